package vgputest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/gpuprep/gpuprep/internal/fixture"
)

// uninstallRun plays `/usr/bin/nvidia-installer --uninstall --silent`: the
// files the installer's record (/var/lib/nvidia/log, see WriteInstaller)
// lists as INSTALLED_FILE ("1: <file>") are removed with the record, and the
// modules go from modules.dep. As NVIDIA's uninstaller, it refuses while
// the nvidia module is loaded (it cannot unload a module in use: backup.c's
// do_uninstall runs rmmod, and gpuprep unloads the modules first).
func (h *Host) uninstallRun(b *fixture.Builder, args []string) ([]byte, error) {
	if len(args) != 2 || args[0] != "--uninstall" || args[1] != "--silent" {
		return nil, fmt.Errorf("nvidia-installer %v: not simulated", args)
	}
	log, err := h.Root.ReadString("/var/lib/nvidia/log")
	if err != nil {
		return nil, errors.New("nvidia-installer: exit status 1: No driver backed up.")
	}
	if h.Root.Exists("/sys/module/nvidia") {
		return nil, errors.New("nvidia-installer: exit status 1: ERROR: An NVIDIA kernel module 'nvidia' appears to be already loaded in your kernel.")
	}
	var gone []string
	for _, l := range strings.Split(log, "\n") {
		if f, ok := strings.CutPrefix(l, "1: "); ok {
			b.Remove(f)
			gone = append(gone, f)
		}
	}
	b.Remove("/var/lib/nvidia")
	if err := b.Err(); err != nil {
		return nil, err
	}
	return []byte("Uninstallation of existing driver is complete.\n"), h.dropModules(b, gone)
}

// dropModules removes from the running kernel's modules.dep the lines of
// the module files in gone (host paths), as depmod does once they are gone.
func (h *Host) dropModules(b *fixture.Builder, gone []string) error {
	kver, _ := h.Root.ReadString("/proc/sys/kernel/osrelease")
	mods := "/lib/modules/" + kver + "/"
	dep, err := h.Root.ReadString(mods + "modules.dep")
	if err != nil {
		return nil
	}
	var keep []string
	for _, l := range strings.Split(dep, "\n") {
		f, _, _ := strings.Cut(l, ":")
		drop := l == ""
		for _, g := range gone {
			drop = drop || mods+f == g
		}
		if !drop {
			keep = append(keep, l)
		}
	}
	b.File(mods+"modules.dep", strings.Join(keep, "\n")+"\n")
	return b.Err()
}

// DpkgStatus and DpkgInfo are dpkg's records of the packages it installed
// (dpkg(1), FILES: /var/lib/dpkg/status, one stanza per package with
// Package, Status and Version; /var/lib/dpkg/info/<package>.list, the
// package's files, one a line), which the synthetic apt-get and dpkg keep.
const (
	DpkgStatus = "/var/lib/dpkg/status"
	DpkgInfo   = "/var/lib/dpkg/info"
)

// recordDeb records package pkg version as installed with files (host
// paths), as dpkg does.
func (h *Host) recordDeb(b *fixture.Builder, pkg, version string, files []string) error {
	st, _ := h.Root.ReadString(DpkgStatus)
	st = strings.TrimSpace(removeStanza(st, pkg))
	if st != "" {
		st += "\n\n"
	}
	st += "Package: " + pkg + "\nStatus: install ok installed\nArchitecture: amd64\nVersion: " + version + "\n"
	b.File(DpkgStatus, st)
	b.File(DpkgInfo+"/"+pkg+".list", strings.Join(files, "\n")+"\n")
	return b.Err()
}

// removeStanza is dpkg's status text without pkg's stanza.
func removeStanza(st, pkg string) string {
	var keep []string
	for _, s := range strings.Split(st, "\n\n") {
		if strings.Contains("\n"+s+"\n", "\nPackage: "+pkg+"\n") || strings.TrimSpace(s) == "" {
			continue
		}
		keep = append(keep, strings.TrimSpace(s))
	}
	return strings.Join(keep, "\n\n")
}

// removeDeb plays `apt-get remove -y PKG` and `dpkg -r PKG`: the files its
// .list names go (DKMS's prerm removes the modules it built), then its
// records.
func (h *Host) removeDeb(b *fixture.Builder, tool, pkg string) ([]byte, error) {
	list, err := h.Root.ReadString(DpkgInfo + "/" + pkg + ".list")
	if err != nil {
		return nil, fmt.Errorf("%s: exit status 100: E: Package '%s' is not installed, so not removed", tool, pkg)
	}
	var gone []string
	for _, f := range strings.Split(list, "\n") {
		if f != "" {
			b.Remove(f)
			gone = append(gone, f)
		}
	}
	st, _ := h.Root.ReadString(DpkgStatus)
	b.File(DpkgStatus, removeStanza(st, pkg)+"\n")
	if err := b.Err(); err != nil {
		return nil, err
	}
	if err := os.Remove(filepath.Join(h.Dir, DpkgInfo, pkg+".list")); err != nil {
		return nil, err
	}
	return []byte("Removing " + pkg + " ...\n"), h.dropModules(b, gone)
}
