package preflight

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"

	"github.com/gpuprep/gpuprep/grub"
)

// kernelConfig is the running kernel's build configuration: what it was
// built with, from the file that said so.
type kernelConfig struct {
	from string // the file read: /boot/config-K or /proc/config.gz
	text string
}

// value is opt's value ("y", "m", a string) and whether the configuration
// sets it; "# CONFIG_X is not set" and an absent line both leave it unset.
func (c kernelConfig) value(opt string) (string, bool) {
	for _, l := range strings.Split(c.text, "\n") {
		if v, ok := strings.CutPrefix(l, opt+"="); ok {
			return v, true
		}
	}
	return "", false
}

// maxKernelConfig bounds /proc/config.gz once inflated (an x86 distribution
// kernel's configuration is about 300 KB).
const maxKernelConfig = 8 << 20

// readKernelConfig reads the running kernel's configuration: /boot/config-K
// as Debian, Ubuntu, Proxmox, Fedora and RHEL kernel packages install it,
// else /proc/config.gz (CONFIG_IKCONFIG_PROC), the only copy on an Arch
// Linux node, whose linux package installs no /boot/config. The error says
// what was missing: which files, and why each could not be read. release
// is the kernel's (uname -r); /proc/config.gz counts only for the running
// one.
func readKernelConfig(e *Env, release string) (kernelConfig, error) {
	if release == "" {
		return kernelConfig{}, errors.New("the running kernel's release is unknown, so its configuration (/boot/config-RELEASE) cannot be found")
	}
	boot := "/boot/config-" + release
	b, bootErr := e.Root.ReadFile(boot)
	if bootErr == nil {
		return kernelConfig{from: boot, text: string(b)}, nil
	}
	if release != e.Host.Kernel {
		// /proc/config.gz is the running kernel's
		return kernelConfig{}, fmt.Errorf("%s could not be read (%s)", boot, why(bootErr))
	}
	const proc = "/proc/config.gz"
	text, procErr := readConfigGz(e, proc)
	if procErr == nil {
		return kernelConfig{from: proc, text: text}, nil
	}
	return kernelConfig{}, fmt.Errorf("neither %s (%s) nor %s (%s) could be read", boot, why(bootErr), proc, why(procErr))
}

func readConfigGz(e *Env, p string) (string, error) {
	b, err := e.Root.ReadFile(p)
	if err != nil {
		return "", err
	}
	z, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return "", err
	}
	out, err := io.ReadAll(io.LimitReader(z, maxKernelConfig+1))
	if err != nil {
		return "", err
	}
	if len(out) > maxKernelConfig {
		return "", fmt.Errorf("more than %d bytes inflated", maxKernelConfig)
	}
	return string(out), nil
}

// why is err in a few words: "missing" for a file that is not there.
func why(err error) string {
	if errors.Is(err, fs.ErrNotExist) {
		return "missing"
	}
	return err.Error()
}

// intelDefault is whether the running kernel turns the Intel IOMMU on with
// no intel_iommu= argument, the one reading iommu.kernel, iommu.cmdline,
// grub show and plan share. The Intel IOMMU driver starts disabled unless
// the kernel is built to enable it: dmar_disabled =
// !IS_ENABLED(CONFIG_INTEL_IOMMU_DEFAULT_ON) in drivers/iommu/intel/iommu.c,
// and intel_iommu=on only sets dmar_disabled = 0 (intel_iommu_setup), so on
// a kernel built default-on it changes nothing. Debian's kernel replaces the
// option with a choice (debian/patches/features/x86/intel-iommu-add-kconfig-
// option-to-exclude-igpu-by-default.patch): CONFIG_INTEL_IOMMU_DEFAULT_ON,
// CONFIG_INTEL_IOMMU_DEFAULT_ON_INTGPU_OFF (on, integrated GPU excluded) or
// CONFIG_INTEL_IOMMU_DEFAULT_OFF. Ubuntu builds its amd64 kernels default-on
// from 24.04's 6.8 (debian.master/config/annotations:
// CONFIG_INTEL_IOMMU_DEFAULT_ON policy<{'amd64': 'y'}>, LP: #1951440), and
// so does Proxmox VE's 6.8 kernel, which is built from those annotations
// (pve-kernel Makefile: debian/scripts/misc/annotations --arch amd64
// --export; debian/rules leaves the option alone).
type intelDefault struct {
	// State is "on", "off", "absent" (built without CONFIG_INTEL_IOMMU:
	// no argument starts it) or "unknown" (the configuration could not be
	// read).
	State string
	// Line is the configuration line that decides ("CONFIG_INTEL_IOMMU_DEFAULT_ON=y"),
	// From the file it is in; for "unknown", Missing says what could not be read.
	Line, From, Missing string
}

// Says is the evidence in words: the line and its file, or what was missing.
func (d intelDefault) Says() string {
	if d.State == "unknown" {
		return d.Missing
	}
	return d.Line + " in " + d.From
}

// intelIOMMUDefault is intelDefault for the kernel release (the running
// one: e.Host.Kernel).
func intelIOMMUDefault(e *Env, release string) intelDefault {
	c, err := readKernelConfig(e, release)
	if err != nil {
		which := "the running kernel"
		if release != e.Host.Kernel {
			which = "the next boot's kernel " + release
		}
		return intelDefault{State: "unknown", Missing: "whether " + which + " turns the Intel IOMMU on by default is unknown: " + err.Error()}
	}
	if v, ok := c.value("CONFIG_INTEL_IOMMU"); v != "y" {
		d := intelDefault{State: "absent", Line: "# CONFIG_INTEL_IOMMU is not set", From: c.from}
		if ok {
			d.Line = "CONFIG_INTEL_IOMMU=" + v
		}
		return d
	}
	for _, opt := range []string{"CONFIG_INTEL_IOMMU_DEFAULT_ON", "CONFIG_INTEL_IOMMU_DEFAULT_ON_INTGPU_OFF"} {
		if v, _ := c.value(opt); v == "y" {
			return intelDefault{State: "on", Line: opt + "=y", From: c.from}
		}
	}
	return intelDefault{State: "off", Line: "# CONFIG_INTEL_IOMMU_DEFAULT_ON is not set", From: c.from}
}

// nextIntelDefault is intelDefault for the kernel the next boot starts
// (grub.NextRelease; the running one when that is unknown or the same),
// which is the one a kernel argument configured now is for, and its
// release, and whether it is another kernel than the running one.
func nextIntelDefault(e *Env) (d intelDefault, release string, other bool) {
	release = e.Host.Kernel
	if next := grub.NextRelease(e.Root, e.Host.Kernel); next != "" && next != e.Host.Kernel {
		release, other = next, true
	}
	return intelIOMMUDefault(e, release), release, other
}
