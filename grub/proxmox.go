package grub

import (
	"fmt"
	"github.com/gpuprep/gpuprep/internal/change"
	"regexp"
	"slices"
	"strings"
	"unicode/utf16"

	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/kargs"
)

// Proxmox VE (and Proxmox Backup Server) on ZFS, or installed for UEFI,
// boots from ESPs that proxmox-boot-tool keeps in sync, even though
// /etc/default/grub is there. What this file knows of it is read from
// proxmox-kernel-helper's own scripts (jiangcuo/proxmox-kernel-helper,
// src/bin/proxmox-boot-tool, src/proxmox-boot/functions and
// src/proxmox-boot/zz-proxmox-boot, a copy of Proxmox's package) and from
// proxmox/pve-docs system-booting.adoc:
//
//   - functions: ESP_LIST="/etc/kernel/proxmox-boot-uuids", one ESP's vfat
//     UUID a line; a line not matching [0-9a-fA-F]{4}-[0-9a-fA-F]{4} is
//     skipped ("does not look like a VFAT-UUID"). Without the file,
//     zz-proxmox-boot says "No /etc/kernel/proxmox-boot-uuids found,
//     skipping ESP sync": the node boots plain GRUB from /boot/grub.
//   - zz-proxmox-boot, update_esp_func: an ESP boots GRUB when it has
//     EFI/proxmox/grubx64.efi (grubaa64.efi on arm64; "init <part> grub",
//     the Secure Boot setup) or the node was booted in legacy BIOS mode (no
//     /sys/firmware/efi); else (UEFI) systemd-boot, with an entry
//     loader/entries/proxmox-<kver>.conf per kernel whose options line is
//     CMDLINE.
//   - zz-proxmox-boot, update_esps: CMDLINE=$(get_first_line
//     /etc/kernel/cmdline) ("we can have cmdline files with multiple or no
//     new line at all"): only the first line counts; without root= on it,
//     it stops ("No root= parameter in /etc/kernel/cmdline found!", exit 1)
//     whatever the ESPs boot. Without the file, it takes /proc/cmdline with
//     its initrd= arguments removed.
//   - In GRUB mode it bind-mounts the ESP on /boot and runs update-grub
//     there: GRUB_CMDLINE_LINUX(_DEFAULT) of /etc/default/grub go into the
//     ESP's grub.cfg, and "/boot/grub/grub.cfg is NOT read when booting from
//     those disks" (proxmox-boot/000_proxmox_boot_header).
//   - pve-docs: "The kernel commandline needs to be placed as one line in
//     /etc/kernel/cmdline. To apply your changes, run proxmox-boot-tool
//     refresh"; the ESPs "are not kept mounted during regular operation".

// KindProxmox is a node whose ESPs proxmox-boot-tool keeps (Boot.ESPMode
// says which bootloader they hold).
const KindProxmox = "proxmox-boot-tool"

// ProxmoxBootUUIDs lists the ESPs proxmox-boot-tool keeps in sync.
const ProxmoxBootUUIDs = "/etc/kernel/proxmox-boot-uuids"

// ESP modes of a proxmox-boot-tool node.
const (
	ESPSystemdBoot = "systemd-boot"
	ESPGRUB        = "grub"
)

// ProxmoxRefresh is the command that copies the kernels and the command line
// to every ESP.
var ProxmoxRefresh = []string{"proxmox-boot-tool", "refresh"}

// vfatUUID is the test proxmox-boot-tool applies to each line of
// ProxmoxBootUUIDs (grep -qE, so anywhere in the line).
var vfatUUID = regexp.MustCompile(`[0-9a-fA-F]{4}-[0-9a-fA-F]{4}`)

// bootLoaderGUID is the vendor GUID of the Boot Loader Interface's EFI
// variables (systemd.io/BOOT_LOADER_INTERFACE), which systemd-boot and GRUB's
// bli module set at each boot.
const bootLoaderGUID = "4a67b082-0a4c-41cf-b6c7-440b29bb8c4f"

// proxmoxESPs reads ProxmoxBootUUIDs: ok false when it is absent (no ESP is
// kept: plain GRUB), and an error when it lists no ESP the tool accepts.
func proxmoxESPs(root *host.Root) (uuids []string, ok bool, err error) {
	if !root.Exists(ProxmoxBootUUIDs) {
		return nil, false, nil
	}
	data, err := kargs.ReadFile(root, ProxmoxBootUUIDs)
	if err != nil {
		return nil, true, err
	}
	for _, l := range strings.Split(string(data), "\n") {
		if vfatUUID.MatchString(l) {
			uuids = append(uuids, strings.TrimSpace(l))
		}
	}
	if len(uuids) == 0 {
		return nil, true, fmt.Errorf("%s lists no ESP whose UUID proxmox-boot-tool accepts (XXXX-XXXX): it syncs none, so which bootloader boots this node and from where cannot be told; run proxmox-boot-tool status, then proxmox-boot-tool clean or init: %w", ProxmoxBootUUIDs, ErrUnknownBoot)
	}
	return uuids, true, nil
}

// proxmoxMode says which bootloader the ESPs of a proxmox-boot-tool node
// hold, and on what evidence; mode "" when the root does not tell. The ESPs
// are not mounted, so the evidence is how the running system was booted:
// legacy BIOS (GRUB), the bootloader's own LoaderInfo EFI variable, else
// what it put on the command line (GRUB's BOOT_IMAGE=, systemd-boot's
// initrd= of an entry under EFI\proxmox).
func proxmoxMode(root *host.Root) (mode, why string) {
	if root.Exists("/sys/firmware") && !root.Exists("/sys/firmware/efi") {
		return ESPGRUB, "booted in legacy BIOS mode (no /sys/firmware/efi), where proxmox-boot-tool installs GRUB"
	}
	if li := loaderInfo(root); li != "" {
		switch {
		case strings.HasPrefix(li, "systemd-boot"):
			return ESPSystemdBoot, "booted by " + li + " (EFI variable LoaderInfo)"
		case strings.HasPrefix(strings.ToUpper(li), "GRUB"):
			return ESPGRUB, "booted by " + li + " (EFI variable LoaderInfo)"
		}
	}
	raw, err := kargs.ReadString(root, "/proc/cmdline")
	if err == nil {
		for _, p := range kargs.Parse(raw) {
			switch {
			case p.Key == "BOOT_IMAGE":
				return ESPGRUB, "booted by GRUB (/proc/cmdline has BOOT_IMAGE=, which GRUB's linux command sets)"
			case p.Key == "initrd" && strings.Contains(strings.ToLower(strings.ReplaceAll(p.Value, "/", `\`)), `\efi\proxmox\`):
				return ESPSystemdBoot, "booted by systemd-boot (/proc/cmdline has " + p.String() + ", the initrd of a proxmox-boot-tool loader entry)"
			}
		}
	}
	return "", "the root does not tell whether its ESPs boot systemd-boot or GRUB (no LoaderInfo EFI variable, no BOOT_IMAGE= or initrd=\\EFI\\proxmox\\… in /proc/cmdline, /sys/firmware/efi present or not captured); proxmox-boot-tool status says"
}

// loaderInfo is the LoaderInfo EFI variable ("systemd-boot 252.33", "GRUB
// 2.12"), "" when it cannot be read. efivarfs gives 4 bytes of attributes,
// then the value: a NUL-terminated UTF-16LE string.
func loaderInfo(root *host.Root) string {
	b, err := kargs.ReadFile(root, "/sys/firmware/efi/efivars/LoaderInfo-"+bootLoaderGUID)
	if err != nil || len(b) < 6 || len(b) > 4+2*256 {
		return ""
	}
	b = b[4:]
	var u []uint16
	for i := 0; i+1 < len(b); i += 2 {
		c := uint16(b[i]) | uint16(b[i+1])<<8
		if c == 0 {
			break
		}
		u = append(u, c)
	}
	s := string(utf16.Decode(u))
	for _, r := range s {
		if r < ' ' || r > '~' {
			return "" // not what a bootloader writes there
		}
	}
	return s
}

// cmdlineFirstLine is what get_first_line gives of s: up to the first newline
// (IFS= read -r: blanks and backslashes kept), and where it ends.
func cmdlineFirstLine(s string) (line string, end int) {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i], i
	}
	return s, len(s)
}

// proxmoxCmdlineErr refuses an /etc/kernel/cmdline that stops
// proxmox-boot-tool refresh: no root= on its first line.
func proxmoxCmdlineErr(f File) error {
	line, _ := cmdlineFirstLine(string(f.Data))
	if _, ok := kargs.Last(wordsArgs(line), "root"); ok {
		return nil
	}
	more := ""
	if strings.TrimSpace(line) == "" && strings.TrimSpace(string(f.Data)) != "" {
		more = " (proxmox-boot-tool reads the first line only; this file's arguments are on later lines)"
	}
	return &ParseError{f.Path, 1, "no root= argument" + more + ": proxmox-boot-tool refresh stops at it (\"No root= parameter in /etc/kernel/cmdline found!\"); put the whole command line, root= included, on the first line"}
}

// editFirstLine is editPlainCmdline on the first line of f only (what
// proxmox-boot-tool reads), every other byte kept; a CR ending the line
// stays last.
func editFirstLine(f File, req Request) (*change.File, []string, []string, error) {
	s := string(f.Data)
	line, end := cmdlineFirstLine(s)
	cr := ""
	if strings.HasSuffix(line, "\r") {
		line, cr = line[:len(line)-1], "\r"
	}
	ch, add, del, err := editPlainCmdline(File{f.Path, []byte(line)}, req)
	if err != nil || ch == nil {
		return nil, nil, nil, err
	}
	out := string(ch.New) + cr + s[end:]
	if end == len(s) && len(f.Data) == 0 {
		out = strings.TrimRight(string(ch.New), "\n") + "\n"
	}
	edited := changeOf(f, []byte(out))
	return &edited, add, del, nil
}

// proxmoxCmdline is the first line of /etc/kernel/cmdline, as
// proxmox-boot-tool copies it to the loader entries.
func (b *Boot) proxmoxCmdline() string {
	line, _ := cmdlineFirstLine(string(b.KernelCmdline.Data))
	return strings.TrimSuffix(line, "\r")
}

// planProxmox plans req on a proxmox-boot-tool node: /etc/kernel/cmdline
// (systemd-boot ESPs) or /etc/default/grub (GRUB ESPs), both where the root
// does not tell which, then proxmox-boot-tool refresh, which copies them to
// every ESP (update-grub would not: /boot/grub/grub.cfg is not what boots).
func (b *Boot) planProxmox(p *Plan, req Request) error {
	if b.KernelCmdline != nil {
		// refresh reads it, and stops at it, in either mode
		if err := proxmoxCmdlineErr(*b.KernelCmdline); err != nil {
			return err
		}
	}
	if b.ESPMode != ESPGRUB {
		f, created := b.KernelCmdline, false
		if f == nil {
			// refresh copies the running command line; the file made
			// from it keeps that and takes the change
			if b.proxmoxRunning == "" {
				return fmt.Errorf("proxmox-boot-tool without %s, and /proc/cmdline unreadable: %w; create %s with the command line the ESPs should boot, on one line", KernelCmdlineFile, ErrUnsupported, KernelCmdlineFile)
			}
			f, created = &File{KernelCmdlineFile, []byte(b.proxmoxRunning + "\n")}, true
		}
		ch, added, removed, err := editFirstLine(*f, req)
		if err == nil && ch != nil && created {
			ch.Old = nil // a new file
			err = proxmoxCmdlineErr(File{KernelCmdlineFile, ch.New})
		}
		if err != nil {
			return err
		}
		if ch != nil {
			p.Changes = append(p.Changes, *ch)
			if created {
				p.Notes = append(p.Notes, KernelCmdlineFile+" is created from the running command line (initrd= left out), which proxmox-boot-tool refresh copies to the ESPs while it is absent")
			}
		}
		for _, w := range req.Ensure {
			if !slices.Contains(added, w.String()) {
				p.Satisfied = append(p.Satisfied, w)
			}
		}
		p.Added, p.Removed = appendNew(p.Added, added...), appendNew(p.Removed, removed...)
	}
	if b.ESPMode != ESPSystemdBoot {
		if len(b.Files) == 0 {
			return fmt.Errorf("proxmox-boot-tool with GRUB on its ESPs, but no %s: %w", DefaultsFile, ErrUnsupported)
		}
		ed, err := EditFiles(b.Files, req)
		if err != nil {
			return err
		}
		p.Changes = append(p.Changes, ed.Changes...)
		p.Var = ed.Var
		if b.ESPMode == ESPGRUB {
			p.Satisfied = ed.Satisfied
		} else { // both files: satisfied where both have it
			p.Satisfied = slices.DeleteFunc(p.Satisfied, func(w kargs.Param) bool { return !slices.Contains(ed.Satisfied, w) })
		}
		p.Added, p.Removed = appendNew(p.Added, ed.Added...), appendNew(p.Removed, ed.Removed...)
	}
	if b.ESPMode == "" {
		p.Notes = append(p.Notes, "proxmox-boot-tool: "+b.ESPModeWhy+"; both "+KernelCmdlineFile+" (systemd-boot) and "+DefaultsFile+" (GRUB) are edited, and refresh writes whichever the ESPs boot")
	}
	if len(p.Changes) > 0 {
		p.Commands = append(p.Commands, ProxmoxRefresh)
	}
	return nil
}

// detectProxmox fills b for a node whose ESPs proxmox-boot-tool keeps.
func detectProxmox(root *host.Root, b *Boot) (*Boot, error) {
	b.Kind, b.Regenerate = KindProxmox, ProxmoxRefresh
	b.Entries = nil // /boot/loader/entries is not on the ESPs
	b.ESPMode, b.ESPModeWhy = proxmoxMode(root)
	if b.KernelCmdline == nil {
		b.proxmoxRunning = proxmoxRunning(root)
	}
	if b.ESPMode == ESPSystemdBoot {
		return b, nil // the GRUB files are not read at all
	}
	files, err := ReadFiles(root)
	if err != nil {
		return nil, err
	}
	b.Files = files
	return b, nil
}

// ProxmoxRunningSource names what a proxmox-boot-tool node without
// /etc/kernel/cmdline gives its systemd-boot ESPs.
const ProxmoxRunningSource = "/proc/cmdline (no /etc/kernel/cmdline: proxmox-boot-tool refresh copies the running command line, initrd= left out)"

// proxmoxRunning is /proc/cmdline without its initrd= arguments, as
// update_esps takes it where /etc/kernel/cmdline is absent (perl -pe
// 's/\binitrd=([0-9a-zA-Z\\\/.-])*\s*//g;'); "" when unreadable.
func proxmoxRunning(root *host.Root) string {
	raw, err := kargs.ReadString(root, "/proc/cmdline")
	if err != nil {
		return ""
	}
	var keep []string
	for _, w := range Words(raw) {
		if !strings.HasPrefix(w, "initrd=") {
			keep = append(keep, w)
		}
	}
	return strings.Join(keep, " ")
}
