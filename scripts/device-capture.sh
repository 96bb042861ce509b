#!/bin/bash
# Captures a real GPU node for the tests (developers' tool, not shipped): run as root on the node, from the
# repository root, after `make build`, with OUT set to an empty directory. It runs gpuprep's read-only commands
# live (check in every mode, vfio status, vfio bind --dry-run, grub show, vgpu types, plan), times check, takes
# a snapshot of what gpuprep reads laid out as a --root (sysfs PCI tree, IOMMU groups and classes, modules, ACPI
# table names, /proc, /etc, /boot names, module indexes, the MSRs it reads), then runs check against the snapshot
# and diffs it with the live run. It only reads: no attribute with side effects (reset, remove, rescan, rom, vpd,
# resource*) is opened. Result: $OUT/log.txt and $OUT/res.tar.gz (res/*.json|txt, res/root).
# testdata/device/README.md says how the 2026-11-30 capture became testdata/roots/real/h200-vm.tar.gz.
set -u
B=$PWD/bin/gpuprep
R=/tmp/res; S=/tmp/res/root; mkdir -p $R $S
exec > >(tee $OUT/log.txt) 2>&1
t0=$(date +%s.%N)
sec() { echo; echo "=== $* ($(awk -v a=$t0 -v b=$(date +%s.%N) 'BEGIN{printf "%.1fs", b-a}'))"; }
sec env
uname -a; head -3 /etc/os-release; id; nproc; cat /proc/cmdline; ls /sys/firmware/acpi/tables 2>&1 | tr '\n' ' '; echo
nvidia-smi -L; nvidia-smi --query-gpu=name,pci.bus_id,driver_version,vbios_version,mig.mode.current --format=csv
nvidia-smi -q 2>/dev/null | grep -i -E -A3 'virtualization|GPU Virtualization|Host VGPU|vGPU' | head -30
ls -la /sys/bus/pci/devices/ 2>&1 | head -40
for d in /sys/bus/pci/devices/*; do echo "$(basename $d) $(cat $d/vendor $d/device $d/class 2>/dev/null | tr '\n' ' ') drv=$(basename "$(readlink $d/driver 2>/dev/null)") grp=$(basename "$(readlink $d/iommu_group 2>/dev/null)")"; done
ls /sys/kernel/iommu_groups /sys/class/iommu 2>&1; ls -la /dev/vfio /dev/kvm /dev/cpu 2>&1 | head; ls /lib/modules 2>&1
dmesg 2>/dev/null | grep -i -E 'iommu|dmar|amd-vi|vfio|nvidia|nouveau|kvm' | head -40
sec gpuprep live
$B --version
timeout 60 $B check -o json > $R/check.json; echo "check json rc=$?"
timeout 60 $B check > $R/check.txt; echo "check text rc=$?"; cat $R/check.txt
for m in container vm-passthrough vm-vgpu; do timeout 60 $B check --mode $m -o json > $R/check-$m.json; echo "check $m rc=$?"; done
timeout 60 $B vfio status -o json > $R/vfio-status.json; echo "vfio status rc=$?"; timeout 60 $B vfio status
timeout 60 $B vfio bind --dry-run > $R/vfio-bind-dry-run.txt 2>&1; echo "vfio bind --dry-run rc=$?"; cat $R/vfio-bind-dry-run.txt | head -60
timeout 60 $B grub show > $R/grub-show.txt 2>&1; echo "grub show rc=$?"; cat $R/grub-show.txt
timeout 60 $B vgpu types -o json > $R/vgpu-types.json 2>&1; echo "vgpu types rc=$?"; head -c 1500 $R/vgpu-types.json; echo
for m in container vm-passthrough; do timeout 60 $B plan --mode $m > $R/plan-$m.txt 2>&1; echo "plan $m rc=$?"; cat $R/plan-$m.txt | head -40; done
sec timing
time (for i in $(seq 50); do $B check -o json >/dev/null; done)
time (for i in $(seq 50); do $B --version >/dev/null; done)
sec snapshot
copytree() { # $1 dir, $2 maxdepth: dirs, symlinks (as written), readable small files, placeholders for write-only
  find "$1" -maxdepth "$2" \( -name sections -o -name notes -o -name power -o -name msi_irqs -o -name holders \) -prune -o \
    \( -type l -printf 'l\t%p\n' \) -o \( -type d -printf 'd\t%p\n' \) -o \( -type f -printf 'f%m\t%p\n' \) 2>/dev/null |
  while IFS=$'\t' read -r k p; do
    case $k in
      d) mkdir -p "$S$p" ;;
      l) mkdir -p "$S${p%/*}"; ln -sfn "$(readlink "$p")" "$S$p" ;;
      f*) mkdir -p "$S${p%/*}"; b=${p##*/}
          case $b in resource*|rom|vpd|reset|remove|rescan) : > "$S$p"; continue ;; esac
          m=${k#f}; if (( (8#$m & 0444) == 0 )); then : > "$S$p"; chmod "$m" "$S$p"; continue; fi
          timeout 2 head -c 1048576 "$p" > "$S$p" 2>/dev/null || echo "$p" >> $R/unreadable.txt ;;
    esac
  done
}
for t in /sys/devices/pci*; do copytree $t 14; done
copytree /sys/bus/pci 3; copytree /sys/bus/mdev 3; copytree /sys/class/mdev_bus 2; copytree /sys/class/iommu 3
copytree /sys/kernel/iommu_groups 3; copytree /sys/module 3; copytree /sys/firmware/acpi/tables 2
for f in /proc/cmdline /proc/cpuinfo /proc/interrupts /proc/stat /proc/modules /proc/version /proc/sys/kernel/osrelease /proc/sys/kernel/hostname; do mkdir -p "$S${f%/*}"; cat $f > $S$f; done
for f in /etc/os-release /etc/default /etc/modprobe.d /etc/modules-load.d /etc/kernel/cmdline /etc/kernelstub /run/ostree-booted /boot/grub /boot/grub2 /boot/loader /usr/bin/nvidia-vgpu-mgr /usr/lib/nvidia/sriov-manage; do [ -e $f ] && cp -rL --parents $f $S/ 2>/dev/null; done
k=$(uname -r); mkdir -p $S/boot; for f in /boot/*; do [ -f "$f" ] && case $f in */config-*) cp $f $S$f ;; *) : > $S$f ;; esac; done
for f in modules.dep modules.builtin modules.alias; do [ -f /lib/modules/$k/$f ] && { mkdir -p $S/lib/modules/$k; cp /lib/modules/$k/$f $S/lib/modules/$k/; }; done
mkdir -p $S/dev; for f in /dev/kvm /dev/vfio/* /dev/nvidia*; do [ -e "$f" ] && { mkdir -p "$S${f%/*}"; : > "$S$f"; }; done
for c in /dev/cpu/*; do [ -d "$c" ] && mkdir -p "$S$c"; done
for c in /dev/cpu/*/msr; do [ -e "$c" ] || continue; mkdir -p "$S${c%/*}"; : > "$S$c"
  for a in $((0x3A)) $((0xC0010114)); do dd if=$c of=$S$c bs=8 count=1 iflag=skip_bytes oflag=seek_bytes skip=$a seek=$a conv=notrunc status=none 2>/dev/null; done; done
du -sh $S; find $S | wc -l; wc -l $R/unreadable.txt 2>/dev/null
sec snapshot vs live
timeout 60 $B check --root $S -o json > $R/snap-check.json; echo "snap check rc=$?"
timeout 60 $B check --root $S > $R/snap-check.txt; diff $R/check.txt $R/snap-check.txt && echo "TEXT IDENTICAL"
timeout 60 $B vfio status --root $S -o json > $R/snap-vfio-status.json; diff $R/vfio-status.json $R/snap-vfio-status.json >/dev/null && echo "VFIO STATUS IDENTICAL"
tar -C /tmp -czf $OUT/res.tar.gz res; ls -la $OUT
sec done
