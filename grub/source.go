package grub

import (
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/kargs"
)

// ErrUnknownBoot is returned (wrapped) where the root does not tell what
// the next boot's command line is made from (a proxmox-boot-tool node whose
// ESPs may boot systemd-boot or GRUB).
var ErrUnknownBoot = errors.New("cannot tell where the next boot's kernel command line comes from")

// Configured returns the kernel command line the bootloader will use on the
// next boot of kernel kver, as Detect finds the boot setup (Boot.Source):
// what check judges is what grub show shows and grub ensure edits. It
// returns nil when the root has no bootloader configuration gpuprep knows.
func Configured(root *host.Root, kver string) (*Source, error) {
	b, err := Detect(root)
	if errors.Is(err, ErrUnsupported) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return b.Source(kver)
}

// Args is the configuration's argument list, as the bootloader passes it.
func (s *Source) Args() []kargs.Param { return s.args }

// Source is where the next boot of kernel kver gets its arguments from, on
// this boot setup: the GRUB defaults files (GRUB kinds; a BLS node without
// entries); the BLS entry of kver, else the last one that is not a rescue
// entry (BLS, rpm-ostree); /etc/kernel/cmdline (systemd-boot through
// kernel-install); kernelstub's kernel_options; on a proxmox-boot-tool
// node, the first line of /etc/kernel/cmdline (systemd-boot ESPs) or the
// GRUB files (GRUB ESPs), and an error wrapping ErrUnknownBoot where the
// root does not tell which. nil when there is nothing to read (rpm-ostree
// without entries).
func (b *Boot) Source(kver string) (*Source, error) {
	switch b.Kind {
	case KindGRUB, KindGRUB2:
		return grubSource(b.Files, "grub")
	case KindBLS, KindRpmOstree:
		if len(b.Entries) == 0 {
			if b.Kind == KindBLS {
				return grubSource(b.Files, "grub")
			}
			return nil, nil
		}
		e := b.pickEntry(kver)
		opts, line := b.entryOptionsAt(e)
		src := &Source{Kind: "bls", File: e.Path, Cmdline: opts}
		if b.Kind == KindRpmOstree {
			src.Kind = "rpm-ostree"
		}
		src.args, src.at = plainLocated(e.Path, opts, line)
		return src, nil
	case KindSystemdBoot:
		src := &Source{Kind: "kernel-cmdline", File: KernelCmdlineFile}
		if b.KernelCmdline != nil {
			src.Cmdline = strings.TrimSpace(string(b.KernelCmdline.Data))
			src.args, src.at = plainLocated(KernelCmdlineFile, string(b.KernelCmdline.Data), 1)
		}
		return src, nil
	case KindKernelstub:
		src := &Source{Kind: "kernelstub", File: KernelstubConfig, Cmdline: strings.Join(b.KernelstubOptions, " ")}
		for _, o := range b.KernelstubOptions {
			src.args = append(src.args, kargs.ParseOne(unquoteWord(o)))
			src.at = append(src.at, KernelstubConfig)
		}
		return src, nil
	case KindProxmox:
		return b.proxmoxSource()
	}
	return nil, fmt.Errorf("%s: %w", b.Kind, ErrUnsupported)
}

// proxmoxSource is Source on a proxmox-boot-tool node.
func (b *Boot) proxmoxSource() (*Source, error) {
	switch b.ESPMode {
	case ESPGRUB:
		src, err := grubSource(b.Files, KindProxmox)
		if err == nil && src == nil {
			err = fmt.Errorf("proxmox-boot-tool with GRUB on its ESPs (%s), but no %s", b.ESPModeWhy, DefaultsFile)
		}
		return src, err
	case ESPSystemdBoot:
		if b.KernelCmdline == nil {
			// update_esps: "No /etc/kernel/cmdline found - falling back to
			// /proc/cmdline", initrd= removed
			if b.proxmoxRunning == "" {
				return nil, fmt.Errorf("proxmox-boot-tool with systemd-boot on its ESPs, no %s and /proc/cmdline unreadable: %w", KernelCmdlineFile, ErrUnknownBoot)
			}
			src := &Source{Kind: KindProxmox, File: ProxmoxRunningSource, Cmdline: b.proxmoxRunning}
			src.args, src.at = plainLocated("/proc/cmdline", b.proxmoxRunning, 1)
			return src, nil
		}
		line := b.proxmoxCmdline()
		src := &Source{Kind: KindProxmox, File: KernelCmdlineFile, Cmdline: strings.TrimSpace(line)}
		src.args, src.at = plainLocated(KernelCmdlineFile, line, 1)
		return src, nil
	}
	return nil, fmt.Errorf("proxmox-boot-tool (%s lists its ESPs): %s: %w", ProxmoxBootUUIDs, b.ESPModeWhy, ErrUnknownBoot)
}

// ConfiguredArgs is what the next boot of kernel kver passes, as far as the
// configuration says, and where that comes from (Source).
func (b *Boot) ConfiguredArgs(kver string) ([]kargs.Param, string, error) {
	src, err := b.Source(kver)
	if err != nil || src == nil {
		return nil, "", err
	}
	return src.args, src.File, nil
}

// pickEntry is the BLS entry that boots kver, else the last one that is not
// a rescue entry, else the first.
func (b *Boot) pickEntry(kver string) File {
	pick := -1
	for i, e := range b.Entries {
		linux := ""
		for _, l := range strings.Split(string(e.Data), "\n") {
			if f := strings.Fields(l); len(f) >= 2 && f[0] == "linux" {
				linux = f[1]
			}
		}
		switch {
		case kver != "" && path.Base(linux) == "vmlinuz-"+kver:
			return e
		case !strings.Contains(e.Path, "rescue"):
			pick = i
		}
	}
	if pick < 0 {
		pick = 0
	}
	return b.Entries[pick]
}

// entryOptionsAt is entryOptions, and the line of the entry's first
// options line (0 when it has none).
func (b *Boot) entryOptionsAt(e File) (string, int) {
	line := 0
	for i, l := range strings.Split(string(e.Data), "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == "options" {
			line = i + 1
			break
		}
	}
	return b.entryOptions(e), line
}

// grubSource reads the GRUB defaults files (nil when there are none), with
// where each argument is written; kind is the Source's.
func grubSource(files []File, kind string) (*Source, error) {
	if len(files) == 0 {
		return nil, nil
	}
	// The same reading as the editor's (checked against bash), so that
	// what check reports configured is what grub would edit.
	c, st, err := evaluate(files)
	if err != nil {
		return nil, err
	}
	file := files[0].Path // /etc/default/grub, or the first drop-in where it is absent
	for _, n := range []string{cmdlineVars[1], cmdlineVars[0]} {
		if v := st.vars[n]; v != nil && v.assign >= 0 && st.assigns[v.assign].file > 0 {
			file = files[0].Path + " + " + files[st.assigns[v.assign].file].Path
			break
		}
	}
	src := &Source{Kind: kind, File: file, Cmdline: c.String()}
	for _, n := range cmdlineVars {
		v := st.vars[n]
		if v == nil {
			continue
		}
		val := chrString(v.val)
		for _, w := range splitWords(val) {
			src.args = append(src.args, kargs.ParseOne(unquoteWord(val[w[0]:w[1]])))
			ch := v.val[w[0]]
			sg := st.segs[ch.seg]
			src.at = append(src.at, fmt.Sprintf("%s:%d", files[sg.file].Path, lineAt(files[sg.file].Data, ch.s)))
		}
	}
	return src, nil
}
