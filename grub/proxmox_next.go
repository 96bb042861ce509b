package grub

import (
	"fmt"
	"sort"
	"strings"

	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/kargs"
	"github.com/gpuprep/gpuprep/internal/kernelrelease"
)

// Which kernel a proxmox-boot-tool node boots next. What this file knows
// of it is read from proxmox-kernel-helper's scripts (jiangcuo/
// proxmox-kernel-helper, a copy of Proxmox's package: src/proxmox-boot/
// functions, src/proxmox-boot/zz-proxmox-boot, src/bin/proxmox-boot-tool,
// src/proxmox-boot/proxmox-boot-cleanup.service):
//
//   - zz-proxmox-boot, update_esp_func: at each refresh (and kernel
//     install), pinned_kernel=$(get_first_line /etc/kernel/proxmox-boot-pin),
//     then, if /etc/kernel/next-boot-pin exists, its first line instead
//     (an empty one unpins).
//   - systemd-boot ESPs: set_systemd_boot_default writes `default
//     proxmox-KVER.conf` into the ESP's loader/loader.conf, or `default
//     proxmox-*` when nothing is pinned; copy_and_config_kernels writes an
//     entry loader/entries/proxmox-KVER.conf (title, version, options,
//     linux, initrd: no sort-key) for each kernel of the boot list with
//     both /boot/vmlinuz-KVER and /boot/initrd.img-KVER. systemd-boot sorts
//     entries without a sort-key by id, newest version first: under
//     `proxmox-*` the newest kernel boots.
//   - GRUB ESPs: set_grub_default writes
//     GRUB_DEFAULT="gnulinux-advanced-ID>gnulinux-KVER-advanced-ID" into
//     /etc/default/grub.d/proxmox-kernel-pin.cfg (removes it when nothing
//     is pinned), then update-grub runs with the ESP on /boot.
//   - The ESPs (/etc/kernel/proxmox-boot-uuids) are mounted under
//     ${TMPDIR:-/var/tmp}/espmounts/UUID only while refresh runs; on a
//     running node their loader.conf is usually not readable, so the
//     answer is made from the pin files and the kernels in /boot, as the
//     last refresh wrote them (proxmox-boot-tool kernel pin asks for a
//     refresh, and without one the ESPs keep what they had).
//   - The initramfs an ESP boots is refresh's copy of /boot/initrd.img-KVER
//     (src/proxmox-boot/proxmox-boot-sync, an initramfs-tools post-update
//     hook, runs refresh after each update-initramfs), so the next kernel's
//     Initrd is that file where the ESPs are not read.
//   - proxmox-boot-cleanup.service (ConditionPathExists=
//     /etc/kernel/next-boot-pin) runs `kernel unpin --next-boot` and
//     refresh at each boot: a next-boot pin lasts one boot.

// Proxmox's pin files and the GRUB snippet refresh writes from them.
const (
	ProxmoxPin         = "/etc/kernel/proxmox-boot-pin"
	ProxmoxNextBootPin = "/etc/kernel/next-boot-pin"
	ProxmoxGrubPin     = "/etc/default/grub.d/proxmox-kernel-pin.cfg"
	// proxmoxESPMounts is where refresh mounts each ESP (MOUNTROOT).
	proxmoxESPMounts = "/var/tmp/espmounts"
	// proxmoxESPDir is where on an ESP refresh copies the kernels
	// (PMX_ESP_DIR).
	proxmoxESPDir = "EFI/proxmox"
)

// isRelease: name can be a kernel release (kernelrelease.Check: a path
// component, no blank or control byte), as a pin file's line or a
// vmlinuz-KVER must be before it names a file.
func isRelease(name string) bool { return kernelrelease.Check(name) == nil }

// proxmoxPinned is the kernel refresh pins ("" when none) and the file
// that says it; an error where a pin is not a kernel release.
func proxmoxPinned(root *host.Root) (kver, from string, err error) {
	from = ProxmoxPin
	if root.Exists(ProxmoxNextBootPin) {
		from = ProxmoxNextBootPin
	} else if !root.Exists(ProxmoxPin) {
		return "", "no " + ProxmoxNextBootPin + " or " + ProxmoxPin, nil
	}
	s, err := kargs.ReadString(root, from)
	if err != nil {
		return "", from, err
	}
	line, _ := cmdlineFirstLine(s) // get_first_line
	switch {
	case line == "":
		return "", from + " empty", nil
	case !isRelease(line):
		return "", from, fmt.Errorf("%s: its first line %q is not a kernel release", from, line)
	}
	return line, from, nil
}

// proxmoxKernels are the kernels refresh puts on the ESPs: those with
// /boot/vmlinuz-K and /boot/initrd.img-K (copy_and_config_kernels skips
// the others), newest first as systemd-boot and 10_linux sort them.
func proxmoxKernels(root *host.Root) []string {
	var ks []string
	for _, n := range root.Names("/boot") {
		if k, ok := strings.CutPrefix(n, "vmlinuz-"); ok && isRelease(k) && root.Exists("/boot/initrd.img-"+k) {
			ks = append(ks, k)
		}
	}
	sort.SliceStable(ks, func(i, j int) bool { return verscmp(ks[i], ks[j]) > 0 })
	return ks
}

// proxmoxNextKernel is the kernel a proxmox-boot-tool node boots next, by
// the bootloader its ESPs hold; where that is unknown, the answer both
// would give when they agree.
func proxmoxNextKernel(root *host.Root, b *Boot) NextKernel {
	switch b.ESPMode {
	case ESPSystemdBoot:
		return proxmoxSDBootKernel(root)
	case ESPGRUB:
		return proxmoxGRUBKernel(root, b.Files)
	}
	sd, gr := proxmoxSDBootKernel(root), proxmoxGRUBKernel(root, b.Files)
	if sd.Release != "" && sd.Release == gr.Release {
		sd.From = "whichever its ESPs boot (" + b.ESPModeWhy + "): systemd-boot, " + sd.From + "; GRUB, " + gr.From
		return sd
	}
	return NextKernel{Missing: "proxmox-boot-tool: " + b.ESPModeWhy + ", and the two would boot different kernels (systemd-boot: " + sayNext(sd) + "; GRUB: " + sayNext(gr) + ")"}
}

// sayNext is nk in a few words: its release and why, or what was missing.
func sayNext(nk NextKernel) string {
	if nk.Release == "" {
		return "unknown, " + nk.Missing
	}
	return nk.Release + ", " + nk.From
}

// proxmoxMountedESP is an ESP of the node whose loader.conf is readable
// (refresh mounts them under proxmoxESPMounts), "" when none is.
func proxmoxMountedESP(root *host.Root) string {
	uuids, _, _ := proxmoxESPs(root)
	for _, u := range uuids {
		if !vfatUUID.MatchString(u) || strings.ContainsAny(u, "/ ") {
			continue
		}
		if d := proxmoxESPMounts + "/" + u; root.Exists(d + "/loader/loader.conf") {
			return d
		}
	}
	return ""
}

// proxmoxSDBootKernel is systemd-boot's choice on the ESPs: from a
// mounted ESP's loader.conf and entries where one is readable, else from
// what refresh writes there (the pin files, the kernels in /boot).
func proxmoxSDBootKernel(root *host.Root) NextKernel {
	if esp := proxmoxMountedESP(root); esp != "" {
		es := readBLSEntriesIn(root, []string{esp + "/loader/entries"})
		if len(es) == 0 {
			return NextKernel{Missing: esp + "/loader/entries has no boot loader entry"}
		}
		def, conf, _ := loaderDefaultOf(root, esp+"/loader/loader.conf")
		nk := sdBootSelect(root, es, def, conf, true)
		if k := nk.Release; k != "" && nk.Initrd == "" && !nk.NoInitramfs {
			// the entry's initrd, a path on the ESP
			for _, p := range []string{esp + "/" + proxmoxESPDir + "/" + k + "/initrd.img-" + k, "/boot/initrd.img-" + k} {
				if nk.Initrd == "" && root.Exists(p) {
					nk.Initrd = p
				}
			}
		}
		return nk
	}
	pin, pinFrom, err := proxmoxPinned(root)
	if err != nil {
		return NextKernel{Missing: err.Error() + ": which kernel proxmox-boot-tool sets as systemd-boot's default is unknown"}
	}
	ks := proxmoxKernels(root)
	if len(ks) == 0 {
		return NextKernel{Missing: "no /boot/vmlinuz-KVER with its /boot/initrd.img-KVER, the kernels proxmox-boot-tool refresh copies to the ESPs, and the ESPs (" + ProxmoxBootUUIDs + ") are not mounted"}
	}
	es := make([]blsEntry, 0, len(ks))
	for _, k := range ks {
		es = append(es, blsEntry{id: "proxmox-" + strings.ToLower(k) + ".conf", file: "loader/entries/proxmox-" + k + ".conf on the ESPs",
			version: k, linux: "/boot/vmlinuz-" + k, initrd: "/boot/initrd.img-" + k, triesLeft: -1, triesDone: -1})
	}
	sort.SliceStable(es, func(i, j int) bool { return blsLess(es[i], es[j]) })
	def, says := "proxmox-*", "nothing pinned ("+pinFrom+")"
	if pin != "" {
		def, says = "proxmox-"+pin+".conf", "pinned by "+pinFrom
		if pinFrom == ProxmoxNextBootPin {
			says += " for one boot (proxmox-boot-cleanup.service unpins it at that boot)"
		}
	}
	conf := "the ESPs' loader/loader.conf (not mounted: as proxmox-boot-tool refresh writes it, " + says + "; entries for the kernels in /boot with their initrd.img)"
	return sdBootSelect(root, es, def, conf, false)
}

// proxmoxGRUBKernel is GRUB's choice on the ESPs: their grub.cfg is made
// by update-grub from files (GRUB_DEFAULT, with refresh's pin snippet)
// and the kernels refresh copies there; the ESPs are not mounted, so
// GRUB_DEFAULT is resolved against those kernels as 10_linux orders them
// (entry 0 the newest; ids gnulinux-advanced-ID>gnulinux-KVER-advanced-ID).
func proxmoxGRUBKernel(root *host.Root, files []File) NextKernel {
	def, at, err := grubDefault(files)
	if err != nil {
		return NextKernel{Missing: err.Error()}
	}
	ks := proxmoxKernels(root)
	if len(ks) == 0 {
		return NextKernel{Missing: "no /boot/vmlinuz-KVER with its /boot/initrd.img-KVER, the kernels proxmox-boot-tool refresh copies to the ESPs, and the ESPs are not mounted"}
	}
	says := fmt.Sprintf("GRUB_DEFAULT=%s (%s)", def, at)
	k, why := "", ""
	if pinned := pinEntryKernel(def); pinned != "" {
		for _, x := range ks {
			if x == pinned {
				k, why = x, says+": the entry of "+x
			}
		}
		if k == "" {
			k, why = ks[0], says+" names no kernel refresh copies (no /boot/vmlinuz-"+pinned+" with its initrd.img): GRUB boots the first entry, the newest kernel"
		}
	} else if def == "0" {
		k, why = ks[0], says+": the first entry, the newest kernel"
	} else {
		return NextKernel{Missing: says + " picks from the ESPs' grub.cfg (and grubenv), which are not mounted: which kernel GRUB boots next is unknown"}
	}
	why += " on the ESPs' grub.cfg (not mounted: made by update-grub during proxmox-boot-tool refresh from these files and the kernels in /boot with their initrd.img; the ESPs' grubenv is not read)"
	if pin, from, err := proxmoxPinned(root); err == nil && pin != pinEntryKernel(def) {
		why += "; " + from + " says " + orUnpinned(pin) + ", which the next proxmox-boot-tool refresh writes to " + ProxmoxGrubPin
	}
	return NextKernel{Release: k, Initrd: "/boot/initrd.img-" + k, From: why}
}

func orUnpinned(pin string) string {
	if pin == "" {
		return "nothing pinned"
	}
	return pin
}

// pinEntryKernel is KVER of a GRUB_DEFAULT as set_grub_default writes it
// (gnulinux-advanced-ID>gnulinux-KVER-advanced-ID), "" for another value.
func pinEntryKernel(def string) string {
	sub, entry, ok := strings.Cut(def, ">")
	id, ok2 := strings.CutPrefix(sub, "gnulinux-advanced-")
	if !ok || !ok2 || id == "" {
		return ""
	}
	k, ok := strings.CutSuffix(strings.TrimPrefix(entry, "gnulinux-"), "-advanced-"+id)
	if !ok || !strings.HasPrefix(entry, "gnulinux-") || !isRelease(k) {
		return ""
	}
	return k
}

// grubDefault is GRUB_DEFAULT as grub-mkconfig sources files ("0" where
// none sets it: 00_header's default) and where it was set.
func grubDefault(files []File) (def, at string, err error) {
	if len(files) == 0 {
		return "", "", fmt.Errorf("no %s: GRUB's default entry is unknown", DefaultsFile)
	}
	st, err := sourceFiles(files)
	if err != nil {
		return "", "", err
	}
	v, vr, err := st.value("GRUB_DEFAULT")
	if err != nil {
		return "", "", err
	}
	at = "not set: grub-mkconfig's 0"
	if vr != nil && vr.assign >= 0 {
		a := st.assigns[vr.assign]
		at = fmt.Sprintf("%s:%d", st.files[a.file].Path, a.line)
	}
	if v == "" {
		v = "0"
	}
	return v, at, nil
}
