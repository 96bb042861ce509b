package vfio

import (
	"fmt"
	"strings"

	"github.com/gpuprep/gpuprep/internal/pci"
)

// NextCmdline names the next boot's kernel command line as the source of an
// Evidence (NextBootCmdline: the bootloader configuration, else the running
// one).
const NextCmdline = "the next boot's kernel command line"

// Evidence is one line of a root's boot configuration, or one argument of
// the next boot's kernel command line, that decides whether vfio-pci loads
// early at boot and with which IDs: what a verdict on persistence rests on.
// Another layer (the initramfs image's own files) can compare its findings
// with these by Source and Line.
type Evidence struct {
	Source string // the file, or NextCmdline
	Line   int    // its 1-based line; 0 for the command line
	Text   string // the line or argument as written (trimmed, bounded)
	By     string // what acts on it at boot: "initramfs-tools", "dracut", "mkinitcpio", "systemd-modules-load", "modprobe", "the kernel"
	Says   string // what it does then; for a discounted one, why it does nothing
	IDs    string // an ids= list it gives vfio-pci ("" when none)
}

// maxEvidenceText bounds the text of a line quoted in a message.
const maxEvidenceText = 160

func newEvidence(src string, line int, text, by, says string) Evidence {
	text = strings.TrimSpace(text)
	if len(text) > maxEvidenceText {
		text = text[:maxEvidenceText] + "…"
	}
	return Evidence{Source: src, Line: line, Text: text, By: by, Says: says}
}

// Where is Source with its line ("/etc/initramfs-tools/modules:14").
func (e Evidence) Where() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d", e.Source, e.Line)
	}
	return e.Source
}

// String is the evidence for a message: where, what is written, who reads
// it and what it does.
func (e Evidence) String() string {
	return fmt.Sprintf("%s %q (%s: %s)", e.Where(), e.Text, e.By, e.Says)
}

// Binder kinds: what names a device for a VFIO driver at boot.
const (
	BinderGpuprep    = "gpuprep"          // gpuprep's own persistent configuration
	BinderCmdlineIDs = "cmdline-ids"      // vfio-pci.ids= on the next boot's kernel command line
	BinderOptionsIDs = "modprobe-options" // options vfio-pci ids= in a modprobe.d file
	BinderLoaderIDs  = "loader-ids"       // a loader that passes ids= itself (/etc/initramfs-tools/modules)
	BinderDriverctl  = "driverctl"        // a driverctl override
	BinderUdev       = "udev-rule"        // a udev rule naming the device with a VFIO driver
)

// Binder is one thing that binds a device to a VFIO driver at boot, with
// the evidence it rests on.
type Binder struct {
	Kind string
	At   Evidence // what names the device (its IDs, its address)
	// LoadedBy: for IDs given to a modular vfio-pci, what loads vfio-pci
	// early (the IDs act only then); empty where vfio-pci is built in, or
	// where At loads it itself.
	LoadedBy []Evidence
}

// String is the binder for a message, naming its file and line.
func (b Binder) String() string {
	s := b.At.String()
	if len(b.LoadedBy) > 0 {
		s += ", vfio-pci loaded early by " + b.LoadedBy[0].String()
	}
	return s
}

// BindsByAddress reports whether a binder of d names its address rather
// than its ID (a udev rule's driver_override, gpuprep's own udev rule among
// them, or a driverctl override): it binds d without vfio-pci's ids=.
func (v *BootView) BindsByAddress(d *pci.Device) bool {
	for _, b := range v.BinderEvidence(d) {
		switch b.Kind {
		case BinderUdev, BinderDriverctl:
			return true
		case BinderGpuprep:
			if r, err := v.root.ReadFile(UdevRule); err == nil && strings.Contains(string(r), `"`+d.Address+`"`) {
				return true
			}
		}
	}
	return false
}
