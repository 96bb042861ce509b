#!/bin/busybox sh
# /init of the gpuprep e2e initramfs (built by testbed.sh setup). Runs as PID 1 inside the
# QEMU/TCG guest. No network, no disk: everything lives in the initramfs.
#
# Kernel command line knobs:
#   testmode=exec|info|shell|ssh  exec: run /test/run (appended payload cpio), print "T_EXIT rc=N";
#                             info: print the diagnostics of /e2e/diag.sh; shell: interactive sh
#                             on the console (for debugging); ssh: the diagnostics, then dropbear
#                             (appended by `testbed.sh ssh`) on the bus-0 e1000e, "T_SSHD_UP" when it
#                             listens, then wait to be powered off. Default: info.
#   e2e_modules=a,b,c|none    modules to modprobe at boot (default vfio,vfio_iommu_type1,vfio-pci,kvm);
#                             "kvm" means kvm_intel or kvm_amd by the CPU's vmx/svm flag (TCG's -cpu max
#                             has svm, so the guest gets a working /dev/kvm like a real KVM host)
#   e2e_loglevel=N            console loglevel while the payload runs (default 1, so kernel
#                             messages cannot interleave with the payload's serial output)
/bin/busybox mkdir -p /proc /sys /dev /tmp /run /root
/bin/busybox mount -t proc proc /proc
/bin/busybox mount -t sysfs sysfs /sys
/bin/busybox mount -t devtmpfs devtmpfs /dev
# the initramfs has no /dev/console node, so the kernel could not give us stdio: take it now
exec </dev/console >/dev/console 2>&1
export PATH=/bin:/sbin:/usr/bin:/usr/sbin HOME=/root TERM=dumb
mkdir -p /dev/pts /dev/shm && mount -t devpts devpts /dev/pts && mount -t tmpfs tmpfs /dev/shm
mount -t tmpfs tmpfs /tmp && mount -t tmpfs tmpfs /run
[ -f /etc/hostname ] && hostname -F /etc/hostname
up() { cut -d' ' -f1 /proc/uptime; }
echo "T_INIT_START uptime=$(up) kernel=$(uname -r)"

MODE=info MODS=vfio,vfio_iommu_type1,vfio-pci,kvm LL=1
for a in $(cat /proc/cmdline); do
  case $a in
    testmode=*) MODE=${a#testmode=} ;;
    e2e_modules=*) MODS=${a#e2e_modules=} ;;
    e2e_loglevel=*) LL=${a#e2e_loglevel=} ;;
  esac
done
if [ "$MODS" != none ]; then
  for m in $(echo "$MODS" | tr ',' ' '); do
    if [ "$m" = kvm ]; then
      if grep -qw vmx /proc/cpuinfo; then m=kvm_intel; elif grep -qw svm /proc/cpuinfo; then m=kvm_amd; fi
    fi
    modprobe "$m" 2>&1 | sed "s/^/T_MODPROBE_ERR $m: /"
  done
fi
echo "T_MODULES_LOADED uptime=$(up) modules=$MODS"

case "$MODE" in
  exec)
    dmesg -n "$LL"
    if [ -x /test/run ]; then
      cd /test && ./run; rc=$?
    else
      echo "T_ERROR no executable /test/run in the initramfs (payload cpio missing?)"; rc=127
    fi
    cd /
    echo "T_EXIT rc=$rc uptime=$(up)"
    ;;
  ssh)
    sh /e2e/diag.sh
    dmesg -n "$LL"
    modprobe e1000e 2>&1 | sed "s/^/T_MODPROBE_ERR e1000e: /"
    ip link set lo up
    # the e1000e on bus 0 is the one whose user-mode netdev forwards the host's port to :22
    IF=
    for i in /sys/class/net/*; do
      case "$(readlink -f "$i/device" 2>/dev/null)" in */0000:00:*) IF=${i##*/}; break ;; esac
    done
    if [ -z "$IF" ] || [ ! -x /bin/dropbear ]; then
      echo "T_SSHD_FAIL if=$IF dropbear=$(ls /bin/dropbear 2>&1)"
    else
      ip link set "$IF" up && ip addr add 10.0.2.15/24 dev "$IF" && ip route add default via 10.0.2.2
      echo "T_SSHD_START if=$IF uptime=$(up)"
      # -s: keys only; -E: log to stderr (the console). It forks into the background before it
      # listens: wait for the listening socket (:0016, state 0A) in /proc/net/tcp
      /bin/dropbear -r /etc/dropbear/dropbear_ed25519_host_key -s -E -p 22
      n=0
      until grep -q '^ *[0-9]*: 00000000:0016 00000000:0000 0A' /proc/net/tcp || [ $n -ge 100 ]; do
        sleep 0.1; n=$((n + 1))
      done
      # and for the link: until e1000e reports carrier, slirp's SYNs to the guest are lost
      until [ "$(cat "/sys/class/net/$IF/carrier" 2>/dev/null)" = 1 ] || [ $n -ge 100 ]; do
        sleep 0.1; n=$((n + 1))
      done
      if [ $n -lt 100 ]; then echo "T_SSHD_UP port=22 uptime=$(up)"; else echo "T_SSHD_FAIL not listening"; fi
    fi
    while :; do sleep 3600; done
    ;;
  shell)
    echo "T_SHELL uptime=$(up) (poweroff -f to leave)"
    setsid cttyhack sh
    ;;
  *)
    sh /e2e/diag.sh
    echo "T_EXIT rc=0 uptime=$(up)"
    ;;
esac
sync
poweroff -f
