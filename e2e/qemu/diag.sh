#!/bin/sh
# Ground truth of the guest, printed as prefixed lines on the serial console, independent of gpuprep:
#   T_PCI <address> <vendor>:<device> class=<class> driver=<driver|-> group=<n|->
# plus T_DIAG/T_IOMMU/T_GROUP/T_IRQ/T_DMESG/T_MOD lines for humans.
echo "T_DIAG kernel=$(uname -r) hostname=$(hostname)"
echo "T_DIAG cmdline=$(cat /proc/cmdline)"
echo "T_IOMMU class_iommu=[$(ls /sys/class/iommu 2>/dev/null | tr '\n' ' ')] groups=$(ls /sys/kernel/iommu_groups 2>/dev/null | wc -l)"
for d in /sys/bus/pci/devices/*; do
  [ -e "$d" ] || continue
  drv=-; [ -e "$d/driver" ] && drv=$(basename "$(readlink "$d/driver")")
  grp=-; [ -e "$d/iommu_group" ] && grp=$(basename "$(readlink "$d/iommu_group")")
  v=$(cat "$d/vendor"); dv=$(cat "$d/device")
  echo "T_PCI ${d##*/} ${v#0x}:${dv#0x} class=$(cat "$d/class") driver=$drv group=$grp"
done
for g in /sys/kernel/iommu_groups/*; do
  [ -e "$g" ] || continue
  echo "T_GROUP ${g##*/} type=$(cat "$g/type" 2>/dev/null) devices=$(ls "$g/devices" | tr '\n' ' ')"
done
grep -E 'IO-APIC|PCI-MSI|DMAR|AMD-Vi' /proc/interrupts | sed 's/^/T_IRQ /'
dmesg | grep -iE 'DMAR|IOMMU|remapping|AMD-Vi|x2apic|vfio' | grep -v 'Adding to iommu group' | sed 's/^/T_DMESG /'
sed 's/^/T_MOD /' /proc/modules
echo "T_DIAG cpu_virt_flags=[$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -xE 'vmx|svm' | tr '\n' ' ')]"
echo "T_DIAG dev_vfio=[$(ls /dev/vfio 2>/dev/null | tr '\n' ' ')] dev_kvm=$([ -e /dev/kvm ] && echo yes || echo no)"
