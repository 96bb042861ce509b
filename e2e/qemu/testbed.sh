#!/bin/bash
# testbed.sh -- boot a real Debian kernel under QEMU/TCG with an emulated Intel or AMD IOMMU and run
# a test payload in it. Used by the gpuprep end-to-end tests (e2e/check_e2e_test.go, `make e2e`).
#
# usage:
#   testbed.sh setup                                   packages + kernel + initramfs, cached in the work dir
#   testbed.sh exec PAYLOAD_DIR intel|amd [KARG...]    boot, run PAYLOAD_DIR/run as /test/run in the guest,
#                                                      exit with the guest's T_EXIT rc
#   testbed.sh info  intel|amd [KARG...]               boot, print the guest's IOMMU/PCI diagnostics
#   testbed.sh shell intel|amd [KARG...]               boot to an interactive shell on the console
#   testbed.sh disk IMAGE VMLINUZ INITRD intel|amd [KARG...]
#                                                      boot a whole root file system: IMAGE (raw) as the SATA
#                                                      disk of q35's AHCI (root=/dev/sda), the kernel VMLINUZ
#                                                      (its uncompressed vmlinux is booted) and INITRD; the
#                                                      root's own init runs and prints "T_EXIT rc=N" before it
#                                                      reboots or powers off (qemu exits either way)
#   testbed.sh ssh AUTHORIZED_KEYS PORT intel|amd [KARG...]
#                                                      boot with an SSH server (dropbear, user root, the
#                                                      given authorized_keys) on 127.0.0.1:PORT; the guest
#                                                      prints "T_SSHD_UP" when it listens and runs until
#                                                      qemu is killed (or `poweroff -f` over ssh); its host
#                                                      key is $GPUPREP_E2E_DIR/ssh/host_ed25519.pub
#
# KARG: kernel arguments. Each one replaces the default argument with the same key (the text before
# '='), the rest is appended: e.g. `intel_iommu=off` turns the Intel default `intel_iommu=on iommu=pt`
# into `iommu=pt intel_iommu=off`. Defaults: intel `intel_iommu=on iommu=pt`, amd `iommu=pt`
# (AMD-Vi is on by default; `amd_iommu=on` is not a valid option).
#
# environment:
#   GPUPREP_E2E_DIR         work/cache dir (default /var/tmp/gpuprep-e2e)
#   GPUPREP_E2E_LOG         serial log of exec/info (default $GPUPREP_E2E_DIR/last-<cmd>-<iommu>.log)
#   GPUPREP_E2E_TIMEOUT     seconds before qemu is killed (default 240)
#   GPUPREP_E2E_KERNEL_PKG  kernel package (default: what linux-image-amd64 depends on)
#   GPUPREP_E2E_NO_APT=1    never call apt-get install/update (fail instead)
#
# Serial output goes to the log file and to stdout. The guest has no network: the two e1000e NICs of the
# topology are attached to `-netdev user,restrict=on` backends (the guest cannot reach anything).
#
# Measured lessons (see the QEMU IOMMU testbed study) built in here:
#  * TCG, not KVM (nested PVM KVM is ~100x slower); the uncompressed vmlinux is booted through its PVH note
#    (3-4x faster than bzImage: no real-mode BIOS boot, no XZ decompression under TCG);
#  * -nodefaults -display none, romfile= on NICs (no VGA/iPXE option ROMs), `quiet loglevel=4`;
#  * sysfs attributes take ONE write() per value (a separate "\n" write resets driver_override): payloads
#    must use `echo -n` / a single write;
#  * /dev/vfio/N appears asynchronously (devtmpfs): poll before opening;
#  * with -nodefaults and quiet nothing appears on serial before /init: add
#    `earlyprintk=serial,ttyS0 loglevel=8` as KARG when debugging the boot;
#  * Debian's modules are uncompressed and unsigned loading is allowed: busybox modprobe after busybox depmod.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
W=${GPUPREP_E2E_DIR:-/var/tmp/gpuprep-e2e}
TMO=${GPUPREP_E2E_TIMEOUT:-240}

log() { printf '[testbed %s] %s\n' "$(date +%T)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }
usage() { sed -n '2,26p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 2; }

# Modules copied into the guest, relative to /lib/modules/$KVER (the real Debian layout). Entries that the
# kernel package does not have (e.g. vfio_virqfd, merged into vfio in 6.2+) are skipped.
MODS="kernel/virt/lib/irqbypass.ko
kernel/drivers/vfio/vfio.ko
kernel/drivers/vfio/vfio_virqfd.ko
kernel/drivers/vfio/vfio_iommu_type1.ko
kernel/drivers/vfio/pci/vfio-pci-core.ko
kernel/drivers/vfio/pci/vfio-pci.ko
kernel/drivers/vfio/mdev/mdev.ko
kernel/arch/x86/kvm/kvm.ko
kernel/arch/x86/kvm/kvm-intel.ko
kernel/arch/x86/kvm/kvm-amd.ko
kernel/drivers/crypto/ccp/ccp.ko"

# Modules copied into the guest but loaded only when a test names them in e2e_modules=: e1000e gives the
# topology's NICs a real driver, which `gpuprep vfio` tests move to vfio-pci and restore. Extracted from the
# cached kernel package on demand (kernel dirs prepared before they were added lack them).
EXTRA_MODS="kernel/drivers/net/ethernet/intel/e1000e/e1000e.ko"

# ---------------------------------------------------------------------------------------------- setup
ensure_packages() {
  local missing=()
  command -v qemu-system-x86_64 >/dev/null || missing+=(qemu-system-x86)
  # the initramfs has no libc: busybox must be the static build
  dpkg-query -W -f='${Status}\n' busybox-static 2>/dev/null | grep -q 'ok installed' || missing+=(busybox-static)
  command -v cpio >/dev/null || missing+=(cpio)
  command -v xz >/dev/null || missing+=(xz-utils)
  [ ${#missing[@]} -eq 0 ] && return 0
  log "missing packages: ${missing[*]}"
  [ "${GPUPREP_E2E_NO_APT:-0}" = 1 ] && die "GPUPREP_E2E_NO_APT=1 and packages are missing: ${missing[*]}"
  [ "$(id -u)" = 0 ] || die "not root: cannot apt-get install ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q >&2
  apt-get install -y -q --no-install-recommends qemu-system-x86 busybox-static cpio xz-utils >&2
}

# ensure_dropbear: the ssh boot mode copies dropbear and its shared libraries into the guest. Optional:
# without it (and no way to install it) only the ssh mode is unavailable.
ensure_dropbear() {
  [ -x /usr/sbin/dropbear ] && command -v dropbearkey >/dev/null && return 0
  if [ "${GPUPREP_E2E_NO_APT:-0}" = 1 ] || [ "$(id -u)" != 0 ]; then
    log "note: dropbear-bin is not installed (and cannot be here): the ssh mode is unavailable"; return 0
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q --no-install-recommends dropbear-bin >&2 ||
    { apt-get update -q >&2 && apt-get install -y -q --no-install-recommends dropbear-bin >&2; } ||
    log "note: apt-get install dropbear-bin failed: the ssh mode is unavailable"
}

# ssh_hostkey: the guest's dropbear host key, generated once on the host (key generation under TCG is slow)
ssh_hostkey() {
  local d="$W/ssh"
  [ -f "$d/dropbear_ed25519_host_key" ] && [ -s "$d/host_ed25519.pub" ] && return 0
  command -v dropbearkey >/dev/null || { log "note: no dropbearkey (dropbear-bin): the ssh mode is unavailable"; return 0; }
  mkdir -p "$d.tmp"
  rm -f "$d.tmp/dropbear_ed25519_host_key"
  dropbearkey -t ed25519 -f "$d.tmp/dropbear_ed25519_host_key" >/dev/null 2>&1
  dropbearkey -y -f "$d.tmp/dropbear_ed25519_host_key" | grep '^ssh-ed25519 ' | cut -d' ' -f1,2 >"$d.tmp/host_ed25519.pub"
  rm -rf "$d"; mv "$d.tmp" "$d"
  log "ssh mode: guest host key $(cat "$d/host_ed25519.pub")"
}

kernel_pkg() {
  if [ -n "${GPUPREP_E2E_KERNEL_PKG:-}" ]; then echo "$GPUPREP_E2E_KERNEL_PKG"; return; fi
  local p
  p=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/{print $2; exit}' || true)
  if [ -z "$p" ] && [ "$(id -u)" = 0 ] && [ "${GPUPREP_E2E_NO_APT:-0}" != 1 ]; then
    apt-get update -q >&2 || true
    p=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/{print $2; exit}' || true)
  fi
  if [ -z "$p" ] && [ -f "$W/current-kernel-pkg" ]; then   # offline: use what we prepared before
    p=$(cat "$W/current-kernel-pkg"); log "apt-cache does not know linux-image-amd64; using cached $p"
  fi
  [ -n "$p" ] || die "cannot determine the kernel package (apt-cache depends linux-image-amd64)"
  echo "$p"
}

# extract_vmlinux VMLINUZ OUT: the uncompressed ELF kernel is the XZ stream after the fd 37 7a 58 5a 00 magic
extract_vmlinux() {
  local pos
  for pos in $(LC_ALL=C grep -obUaP '\xfd7zXZ\x00' "$1" | cut -d: -f1); do
    tail -c +$((pos + 1)) "$1" | xz -dc >"$2" 2>/dev/null || true
    [ "$(head -c4 "$2" | od -An -c | tr -d ' ')" = '177ELF' ] && return 0
  done
  return 1
}

prepare_kernel() {   # -> $KD with vmlinux and kroot/ (boot/, lib/modules/$K/...)
  local deb
  mkdir -p "$W/debs"
  deb=$(ls "$W/debs/${KPKG}"_*.deb 2>/dev/null | head -1 || true)
  if [ -z "$deb" ]; then
    log "apt-get download $KPKG"
    # let apt's sandbox user write there (avoids the 'unsandboxed download' warning as root)
    if [ "$(id -u)" = 0 ] && id _apt >/dev/null 2>&1; then chown _apt "$W/debs"; fi
    (cd "$W/debs" && apt-get download -q "$KPKG" >&2)
    deb=$(ls "$W/debs/${KPKG}"_*.deb | head -1)
  fi
  if [ -f "$KD/.done" ]; then return 0; fi
  log "unpacking $(basename "$deb") (no install on the host)"
  rm -rf "$KD.tmp"; mkdir -p "$KD.tmp/kroot"
  # tar exits 2 when a pattern matches nothing (e.g. a kernel without ccp); what we need is checked below
  dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$KD.tmp/kroot" --wildcards \
    "./boot/*" "./lib/modules/$K/modules.*" "./lib/modules/$K/kernel/drivers/vfio/*" \
    "./lib/modules/$K/kernel/virt/*" "./lib/modules/$K/kernel/arch/x86/kvm/*" \
    "./lib/modules/$K/kernel/drivers/crypto/ccp/*" 2>/dev/null || true
  [ -f "$KD.tmp/kroot/boot/vmlinuz-$K" ] || die "no /boot/vmlinuz-$K in $deb"
  ls "$KD.tmp/kroot/lib/modules/$K/kernel/drivers/vfio/pci/vfio-pci.ko"* >/dev/null 2>&1 ||
    die "no vfio-pci module in $deb"
  log "extracting the uncompressed vmlinux (PVH boot)"
  extract_vmlinux "$KD.tmp/kroot/boot/vmlinuz-$K" "$KD.tmp/vmlinux" || die "vmlinux extraction failed"
  touch "$KD.tmp/.done"
  rm -rf "$KD"; mv "$KD.tmp" "$KD"
}

build_initramfs() {
  local ir="$KD/ir.tmp" kr="$KD/kroot" m a stamp
  # cheap (<1 s) but skip it when nothing changed
  stamp=$(cat "$HERE/init.sh" "$HERE/diag.sh" "${BASH_SOURCE[0]}" /bin/busybox | sha256sum | cut -c1-16)
  if [ -f "$KD/initramfs.cpio.gz" ] && [ "$(cat "$KD/initramfs.stamp" 2>/dev/null)" = "$stamp" ]; then
    return 0
  fi
  log "building the initramfs"
  rm -rf "$ir"
  mkdir -p "$ir"/{bin,dev,proc,sys,tmp,run,root,etc,e2e,test,boot,usr,"lib/modules/$K"}
  ln -s bin "$ir/sbin"; ln -s ../bin "$ir/usr/bin"; ln -s ../bin "$ir/usr/sbin"
  cp /bin/busybox "$ir/bin/busybox"
  for a in $(/bin/busybox --list); do [ "$a" = busybox ] || ln -s busybox "$ir/bin/$a"; done
  install -m 0755 "$HERE/init.sh" "$ir/init"
  install -m 0755 "$HERE/diag.sh" "$ir/e2e/diag.sh"
  # the real module tree layout for `uname -r`, so tools find the vfio modules "for the running kernel"
  local deb; deb=$(ls "$W/debs/${KPKG}"_*.deb 2>/dev/null | head -1 || true)
  for m in $EXTRA_MODS; do
    [ -f "$kr/lib/modules/$K/$m" ] || [ -z "$deb" ] ||
      dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$kr" "./lib/modules/$K/$m" 2>/dev/null || true
  done
  for m in $MODS $EXTRA_MODS; do
    [ -f "$kr/lib/modules/$K/$m" ] || { log "note: $m not in $KPKG, skipped"; continue; }
    mkdir -p "$ir/lib/modules/$K/$(dirname "$m")"
    cp "$kr/lib/modules/$K/$m" "$ir/lib/modules/$K/$m"
  done
  for a in modules.builtin modules.builtin.modinfo modules.order; do
    [ -f "$kr/lib/modules/$K/$a" ] && cp "$kr/lib/modules/$K/$a" "$ir/lib/modules/$K/"
  done
  /bin/busybox depmod -b "$ir" "$K"    # modules.dep, modules.alias, modules.symbols
  cp "$kr/boot/config-$K" "$ir/boot/"
  cat >"$ir/etc/os-release" <<'OSR'
PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"
NAME="Debian GNU/Linux"
VERSION_ID="12"
VERSION="12 (bookworm)"
VERSION_CODENAME=bookworm
ID=debian
VARIANT="gpuprep e2e initramfs"
OSR
  mkdir -p "$ir/usr/lib"; cp "$ir/etc/os-release" "$ir/usr/lib/os-release"
  echo e2e-guest >"$ir/etc/hostname"
  printf 'root:x:0:0:root:/root:/bin/sh\n' >"$ir/etc/passwd"
  printf 'root:x:0:\n' >"$ir/etc/group"
  (cd "$ir" && find . | cpio -o -H newc -R 0:0 --quiet | gzip -1) >"$KD/initramfs.cpio.gz.tmp"
  mv "$KD/initramfs.cpio.gz.tmp" "$KD/initramfs.cpio.gz"
  echo "$stamp" >"$KD/initramfs.stamp"
  rm -rf "$ir"
}

setup() {
  mkdir -p "$W"
  ensure_packages
  ensure_dropbear
  KPKG=$(kernel_pkg); K=${KPKG#linux-image-}; KD="$W/kernel/$K"
  prepare_kernel
  build_initramfs
  ssh_hostkey
  echo "$KPKG" >"$W/current-kernel-pkg"
  ln -sfn "kernel/$K" "$W/current"
  log "ready: kernel $K, $(du -h "$KD/vmlinux" | cut -f1) vmlinux, $(du -h "$KD/initramfs.cpio.gz" | cut -f1) initramfs in $KD"
}

# ------------------------------------------------------------------------------------------------ run
# merge_kargs DEFAULTS... -- EXTRA...: each EXTRA replaces the DEFAULT with the same key
merge_kargs() {
  local d=() e=() out=() x y key seen
  while [ $# -gt 0 ] && [ "$1" != -- ]; do d+=("$1"); shift; done
  [ $# -gt 0 ] && shift
  e=("$@")
  for x in "${d[@]+"${d[@]}"}"; do
    key=${x%%=*}; seen=0
    for y in "${e[@]+"${e[@]}"}"; do [ "${y%%=*}" = "$key" ] && seen=1; done
    [ $seen = 1 ] || out+=("$x")
  done
  out+=("${e[@]+"${e[@]}"}")
  echo "${out[*]+"${out[*]}"}"
}

# vm MODE IOMMU INITRD LOG [KARG...]: boots the topology, serial -> LOG + stdout; returns qemu's status
vm() {
  local mode=$1 iommu=$2 initrd=$3 logf=$4 dev defaults kargs
  shift 4
  case $iommu in
    intel) dev=(-device intel-iommu,intremap=on,caching-mode=on); defaults=(intel_iommu=on iommu=pt) ;;
    amd)   dev=(-device amd-iommu,intremap=on); defaults=(iommu=pt) ;;
    none)  dev=(); defaults=() ;;
    *) die "unknown IOMMU '$iommu' (intel|amd|none)" ;;
  esac
  # no_timer_check: under slow TCG emulation the kernel's IO-APIC timer check can fail
  # ("timer doesn't work through Interrupt-remapped IO-APIC") and panic at boot; seen once.
  kargs="console=ttyS0 panic=-1 quiet loglevel=4 no_timer_check testmode=$mode $(merge_kargs "${defaults[@]+"${defaults[@]}"}" -- "$@")"
  log "boot $iommu: $kargs (log $logf)"
  local qemu_stdin=/dev/null
  [ "$mode" = shell ] && qemu_stdin=/dev/stdin
  set +e
  # Topology (measured, see the study): edu + pci-testdev on bus 0; e1000e on bus 0 and behind root port rp1;
  # a PCIe-to-PCI bridge behind rp2 with edu + pci-testdev behind it (one IOMMU group: no ACS behind a
  # conventional PCI bridge); a VGA 1234:1111 + ICH9 HDA 8086:293e multifunction pair behind rp3 (a
  # "GPU + HDMI audio" pair in one group); an ICH9 EHCI controller.
  # --foreground: qemu stays in this script's process group (timeout would make one of its own), so the
  # tests kill the guest with the group, also on a test's failure or interrupt
  timeout --foreground "$TMO" qemu-system-x86_64 \
    -accel tcg,thread=multi -cpu max -smp "${VM_SMP:-2}" -m 1024 \
    -machine q35,kernel-irqchip=split "${dev[@]+"${dev[@]}"}" \
    -nodefaults -display none -serial stdio -monitor none -no-reboot \
    -kernel "${VM_KERNEL:-$KD/vmlinux}" -initrd "$initrd" -append "$kargs" "${VM_DISK[@]+"${VM_DISK[@]}"}" \
    -device edu -device pci-testdev \
    -device e1000e,netdev=n0,romfile= -netdev "user,id=n0,restrict=on${N0_OPTS:-}" \
    -device pcie-root-port,id=rp1,chassis=1,slot=1 \
    -device e1000e,bus=rp1,netdev=n1,romfile= -netdev user,id=n1,restrict=on \
    -device pcie-root-port,id=rp2,chassis=2,slot=2 -device pcie-pci-bridge,id=br1,bus=rp2 \
    -device edu,bus=br1,addr=1 -device pci-testdev,bus=br1,addr=2 \
    -device pcie-root-port,id=rp3,chassis=3,slot=3 \
    -device VGA,bus=rp3,addr=0.0,multifunction=on,romfile= -device ich9-intel-hda,bus=rp3,addr=0.1 \
    -device ich9-usb-ehci1 \
    <"$qemu_stdin" 2>&1 | tee "$logf"
  local rc=${PIPESTATUS[0]}
  set -e
  return "$rc"
}

run_guest() {   # run_guest MODE IOMMU INITRD [KARG...]
  local mode=$1 iommu=$2 initrd=$3 logf t0 t1 qrc grc
  shift 3
  logf=${GPUPREP_E2E_LOG:-$W/last-$mode-$iommu.log}
  mkdir -p "$(dirname "$logf")"
  t0=$(date +%s.%N)
  qrc=0; vm "$mode" "$iommu" "$initrd" "$logf" "$@" || qrc=$?
  t1=$(date +%s.%N)
  if [ "$mode" = shell ] || [ "$mode" = ssh ]; then return "$qrc"; fi
  grc=$(tr -d '\r' <"$logf" | sed -n 's/^T_EXIT rc=\([0-9][0-9]*\).*/\1/p' | tail -1)
  local wall; wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.1f", b-a}')
  if [ -z "$grc" ]; then
    if [ "$qrc" = 124 ]; then
      log "TIMEOUT: qemu killed after ${TMO}s, no T_EXIT line (log $logf)"; echo "T_QEMU rc=$qrc wall=${wall}s guest_rc=none" >>"$logf"; return 124
    fi
    log "no T_EXIT line from the guest (qemu rc=$qrc, ${wall}s, log $logf)"
    echo "T_QEMU rc=$qrc wall=${wall}s guest_rc=none" >>"$logf"
    return 125
  fi
  echo "T_QEMU rc=$qrc wall=${wall}s guest_rc=$grc" >>"$logf"
  log "guest exit rc=$grc, qemu rc=$qrc, wall ${wall}s"
  return "$grc"
}

current_kernel() {
  [ -f "$W/current/.done" ] && [ -f "$W/current/initramfs.cpio.gz" ] || die "run '$0 setup' first (work dir $W)"
  KD=$(cd "$W/current" && pwd -P); K=$(basename "$KD"); KPKG=linux-image-$K
}

cmd_exec() {
  [ $# -ge 2 ] || usage
  local payload=$1 iommu=$2
  shift 2
  [ -x "$payload/run" ] || die "$payload/run is missing or not executable"
  current_kernel
  tmp=$(mktemp -d "$W/exec.XXXXXX")   # global: the EXIT trap runs after this function returned
  trap 'rm -rf "$tmp"' EXIT
  mkdir -p "$tmp/root/test"
  cp -a "$payload/." "$tmp/root/test/"
  # base initramfs (gzip) + zero padding to a 4-byte boundary + the payload as an uncompressed cpio
  # (concatenated archives are valid; uncompressed is faster than gunzip under TCG)
  cp "$KD/initramfs.cpio.gz" "$tmp/initrd"
  local sz; sz=$(stat -c %s "$tmp/initrd")
  head -c $(( (512 - sz % 512) % 512 )) /dev/zero >>"$tmp/initrd"
  (cd "$tmp/root" && find test | cpio -o -H newc -R 0:0 --quiet) >>"$tmp/initrd"
  run_guest exec "$iommu" "$tmp/initrd" "$@"
}

# cmd_ssh AUTHORIZED_KEYS PORT IOMMU [KARG...]: dropbear (root) in the guest, reachable on 127.0.0.1:PORT
# through the bus-0 e1000e's user-mode network (restrict=on: the guest still reaches nothing).
cmd_ssh() {
  [ $# -ge 3 ] || usage
  local keys=$1 port=$2 iommu=$3 l
  shift 3
  [ -f "$keys" ] || die "no authorized_keys file $keys"
  case $port in ''|*[!0-9]*) die "bad port '$port'" ;; esac
  current_kernel
  [ -x /usr/sbin/dropbear ] || die "no /usr/sbin/dropbear: run '$0 setup' (installs dropbear-bin)"
  ssh_hostkey
  [ -f "$W/ssh/dropbear_ed25519_host_key" ] || die "no guest host key in $W/ssh"
  tmp=$(mktemp -d "$W/ssh.XXXXXX")   # global: the EXIT trap runs after this function returned
  trap 'rm -rf "$tmp"' EXIT
  local r="$tmp/root"
  mkdir -p "$r/bin" "$r/lib/x86_64-linux-gnu" "$r/lib64" "$r/etc/dropbear" "$r/root/.ssh"
  cp /usr/sbin/dropbear "$r/bin/dropbear"
  for l in $(ldd /usr/sbin/dropbear | awk '/=> \//{print $3}'); do cp -L "$l" "$r/lib/x86_64-linux-gnu/"; done
  cp -L /lib64/ld-linux-x86-64.so.2 "$r/lib64/"
  cp "$W/ssh/dropbear_ed25519_host_key" "$r/etc/dropbear/"
  printf '/bin/sh\n' >"$r/etc/shells"
  cp "$keys" "$r/root/.ssh/authorized_keys"
  chmod 700 "$r/root" "$r/root/.ssh"; chmod 600 "$r/root/.ssh/authorized_keys" "$r/etc/dropbear/"*
  # base initramfs + padding + the ssh overlay (uncompressed cpio), as for exec payloads
  cp "$KD/initramfs.cpio.gz" "$tmp/initrd"
  local sz; sz=$(stat -c %s "$tmp/initrd")
  head -c $(( (512 - sz % 512) % 512 )) /dev/zero >>"$tmp/initrd"
  (cd "$r" && find . | cpio -o -H newc -R 0:0 --quiet) >>"$tmp/initrd"
  N0_OPTS=",hostfwd=tcp:127.0.0.1:$port-:22" run_guest ssh "$iommu" "$tmp/initrd" "$@"
}

# cmd_disk IMAGE VMLINUZ INITRD IOMMU [KARG...]: a root file system's own boot (e2e/reboot_e2e_test.go).
# The disk is q35's built-in AHCI controller (00:1f.2, already in the topology: no PCI device is added);
# the uncompressed vmlinux of VMLINUZ is booted through its PVH note, as for the initramfs guest.
cmd_disk() {
  [ $# -ge 4 ] || usage
  local img=$1 vmlinuz=$2 initrd=$3 iommu=$4
  shift 4
  [ -f "$img" ] && [ -f "$vmlinuz" ] && [ -f "$initrd" ] || die "disk: missing $img, $vmlinuz or $initrd"
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpuprep-disk.XXXXXX")   # global: the EXIT trap runs after this function returned
  trap 'rm -rf "$tmp"' EXIT
  extract_vmlinux "$vmlinuz" "$tmp/vmlinux" || die "no vmlinux in $vmlinuz"
  VM_KERNEL=$tmp/vmlinux
  VM_SMP=${VM_SMP:-1}   # a root with systemd: one vCPU (two stalled one under load: RCU "timer wakeup didn't happen")
  VM_DISK=(-drive "file=$img,format=raw,if=none,id=d0,cache=unsafe" -device ide-hd,drive=d0,bus=ide.0)
  KD=/nonexistent
  run_guest disk "$iommu" "$initrd" root=/dev/sda rw "$@"
}

case "${1:-}" in
  setup) shift; setup ;;
  disk) shift; cmd_disk "$@" ;;
  ssh) shift; cmd_ssh "$@" ;;
  exec) shift; cmd_exec "$@" ;;
  info|shell)
    m=$1; shift; [ $# -ge 1 ] || usage
    current_kernel; io=$1; shift
    run_guest "$m" "$io" "$KD/initramfs.cpio.gz" "$@" ;;
  *) usage ;;
esac
