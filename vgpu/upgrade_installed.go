package vgpu

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/gpuprep/gpuprep/internal/host"
)

// Where an installed vGPU manager's own installer keeps its record.
const (
	// RunRecord is nvidia-installer's record of a .run install: its first
	// line is the version, written by
	// create_backwards_compatible_version_string as "1.0-<digits>
	// (<version>)", its second the description, then the files it installed
	// (backup.c of github.com/NVIDIA/nvidia-installer: BACKUP_LOG
	// "/var/lib/nvidia/log"). Its --uninstall removes what it lists.
	RunRecord = "/var/lib/nvidia/log"
	// RunUninstaller is the installed nvidia-installer, whose --uninstall
	// undoes a .run install (nvidia-uninstall is a link to it).
	RunUninstaller = "/usr/bin/nvidia-installer"
	// DpkgStatus and DpkgInfo are dpkg's records (dpkg(1), FILES): a
	// stanza per package (Package, Status, Version) and each package's
	// file list, <package>.list (<package>:<arch>.list for a multi-arch
	// one).
	DpkgStatus = "/var/lib/dpkg/status"
	DpkgInfo   = "/var/lib/dpkg/info"
	// vgpuMgrPath is the file only the vGPU manager for KVM ships.
	vgpuMgrPath = "/" + vgpuMgrFile
)

// Installed is the vGPU manager a host has, and how it was installed.
type Installed struct {
	Version string // of its installer's or package manager's record; else the loaded module's
	Loaded  string // /sys/module/nvidia/version ("" when not loaded)
	Format  string // FormatRun, FormatDeb, FormatRPM; "" when no record says
	Package string // the .deb's or .rpm's package name
	Record  string // the file (or command) the version was read from
}

// Present says a vGPU manager is installed (its daemon is there).
func (i Installed) Present(root *host.Root) bool { return root.Exists(vgpuMgrPath) }

var runRecordRe = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^1\.0-[0-9]+ \(([0-9]+\.[0-9]+(?:\.[0-9]+)?)\)$`)
})

// ReadInstalled reads which vGPU manager is installed: the .run's record
// (RunRecord), else dpkg's (the package whose file list holds
// /usr/bin/nvidia-vgpu-mgr, and its version in DpkgStatus), else, where
// commands run (r: the live host), rpm's (rpm -qf --qf on the file: its
// database is not text). A host where none says but the module is loaded
// gets Version from the module and no Format.
func ReadInstalled(ctx context.Context, root *host.Root, r host.Runner) (Installed, error) {
	in := Installed{Loaded: InstalledVersion(root)}
	if b, err := root.ReadFile(RunRecord); err == nil {
		first, _, _ := strings.Cut(string(b), "\n")
		m := runRecordRe().FindStringSubmatch(strings.TrimSpace(first))
		if m == nil {
			return in, fmt.Errorf("%s line 1: %q is not nvidia-installer's version line (1.0-DIGITS (VERSION))", RunRecord, clip(first))
		}
		in.Version, in.Format, in.Record = m[1], FormatRun, RunRecord
		return in, nil
	}
	if !root.Exists(vgpuMgrPath) {
		in.Version = in.Loaded // no manager to own: no package lists it
		if in.Version != "" {
			in.Record = "/sys/module/nvidia/version"
		}
		return in, nil
	}
	if pkg, list := dpkgOwner(root, vgpuMgrPath); pkg != "" {
		v, err := dpkgVersion(root, pkg)
		if err != nil {
			return in, err
		}
		m := pkgVersionRe().FindStringSubmatch(v)
		if m == nil {
			return in, fmt.Errorf("%s: package %s has version %q, not an NVIDIA driver version", DpkgStatus, pkg, clip(v))
		}
		in.Version, in.Format, in.Package, in.Record = m[1], FormatDeb, pkg, list
		return in, nil
	}
	if root.Exists("/var/lib/rpm") || root.Exists("/usr/lib/sysimage/rpm") {
		// the driver's version is in RELEASE for NVIDIA's vGPU manager rpm
		// (NVIDIA-vGPU-rhel 9.4 550.90.05), in VERSION for others: see
		// rpmDriverVersion
		out, err := r.Run(ctx, "rpm", "-qf", "--qf", "%{NAME} %{VERSION} %{RELEASE}\n", vgpuMgrPath)
		if f := strings.Fields(lastLine(string(out))); err == nil && len(f) == 3 {
			if v := rpmDriverVersion(f[1], f[2]); v != "" {
				in.Version, in.Format, in.Package, in.Record = v, FormatRPM, f[0], "rpm -qf "+vgpuMgrPath
				return in, nil
			}
		}
	}
	in.Version = in.Loaded
	if in.Version != "" {
		in.Record = "/sys/module/nvidia/version"
	}
	return in, nil
}

// dpkgOwner is the package whose dpkg file list holds file, and that list.
// NVIDIA's packages are read first (a Debian host has thousands of lists).
func dpkgOwner(root *host.Root, file string) (pkg, list string) {
	names := root.Names(DpkgInfo)
	sort.SliceStable(names, func(a, b int) bool {
		return strings.Contains(names[a], "nvidia") && !strings.Contains(names[b], "nvidia")
	})
	for _, n := range names {
		if !strings.HasSuffix(n, ".list") {
			continue
		}
		b, err := root.ReadFile(DpkgInfo + "/" + n)
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n") {
			if l == file {
				name, _, _ := strings.Cut(strings.TrimSuffix(n, ".list"), ":")
				return name, DpkgInfo + "/" + n
			}
		}
	}
	return "", ""
}

// dpkgVersion is the Version of pkg's stanza in DpkgStatus, which must say
// it is installed.
func dpkgVersion(root *host.Root, pkg string) (string, error) {
	b, err := root.ReadFile(DpkgStatus)
	if err != nil {
		return "", fmt.Errorf("%s lists %s's files but %w", DpkgInfo, pkg, err)
	}
	for _, st := range strings.Split(string(b), "\n\n") {
		fields := map[string]string{}
		for _, l := range strings.Split(st, "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && !strings.HasPrefix(l, " ") {
				fields[k] = strings.TrimSpace(v)
			}
		}
		if fields["Package"] != pkg {
			continue
		}
		if !strings.HasSuffix(fields["Status"], " installed") {
			return "", fmt.Errorf("%s: package %s is %q, not installed", DpkgStatus, pkg, clip(fields["Status"]))
		}
		return fields["Version"], nil
	}
	return "", fmt.Errorf("%s: no stanza for package %s, whose file list %s/%s.list holds %s", DpkgStatus, pkg, DpkgInfo, pkg, vgpuMgrPath)
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// clip bounds a host string quoted in an error.
func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
