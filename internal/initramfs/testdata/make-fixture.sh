#!/usr/bin/env bash
# Makes initrd.img-6.1.0-18-amd64, a small image laid out as initramfs-tools' mkinitramfs makes one (Debian 12,
# initramfs-tools 0.142): an uncompressed early archive with the Intel microcode path the kernel looks for
# (Documentation/arch/x86/microcode.rst), then the main archive compressed with zstd, each made as mkinitramfs makes
# it: `find . | LC_ALL=C sort | cpio --quiet -R 0:0 -o -H newc` and `zstd -q -1`. The main archive holds what says
# what early boot loads after `gpuprep vfio bind --persist`: conf/modules, etc/modprobe.d/gpuprep-vfio.conf, the
# vfio modules and nouveau (placeholders: only their names are read), modules.alias, merged /usr (lib -> usr/lib).
# Run from this directory. Made with GNU cpio 2.13 and zstd 1.5.4; a rerun differs in inode numbers only.
set -euo pipefail
out=$PWD/initrd.img-6.1.0-18-amd64
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mk() { mkdir -p "$(dirname "$tmp/$1/$2")"; printf '%b' "$3" >"$tmp/$1/$2"; }
mk early kernel/x86/microcode/GenuineIntel.bin '\x01\x00\x00\x00microcode'
k=usr/lib/modules/6.1.0-18-amd64
mk main init '#!/bin/sh\n'
mk main conf/initramfs.conf 'MODULES=most\nCOMPRESS=zstd\n'
mk main scripts/functions 'load_modules()\n{\n\t:\n}\n'
mk main conf/modules 'vfio_iommu_type1\n'
mk main etc/modprobe.d/gpuprep-vfio.conf '# Written by `gpuprep vfio bind --persist`; `gpuprep vfio unbind` removes it. Do not edit:\n# gpuprep reads the device list below.\n# gpuprep-devices: 0000:41:00.0=vfio-pci 0000:41:00.1=vfio-pci\nsoftdep nouveau pre: vfio-pci\nsoftdep nvidia pre: vfio-pci\nsoftdep snd_hda_intel pre: vfio-pci\nblacklist nouveau\noptions vfio-pci ids=10de:2335,10de:22a3\n'
mk main "$k/kernel/drivers/vfio/pci/vfio-pci.ko" 'ELF'
mk main "$k/kernel/drivers/vfio/vfio.ko" 'ELF'
mk main "$k/kernel/drivers/vfio/vfio_iommu_type1.ko" 'ELF'
mk main "$k/kernel/drivers/gpu/drm/nouveau/nouveau.ko" 'ELF'
mk main "$k/modules.alias" 'alias pci:v000010DEd*sv*sd*bc03sc*i* nouveau\nalias pci:v000010DEd*sv*sd*bc04sc03i* snd_hda_intel\n'
ln -s usr/lib "$tmp/main/lib"
find "$tmp" -exec touch -h -d '2024-02-01 12:00:00 UTC' {} +
arc() { (cd "$tmp/$1" && find . | LC_ALL=C sort | cpio --quiet -R 0:0 -o -H newc); }
{ arc early; arc main | zstd -q -1 -c; } >"$out"
