package vgpu

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"

	"github.com/gpuprep/gpuprep/internal/host"
)

// Driver is a vGPU manager package, verified by InspectDriver.
type Driver struct {
	Path       string
	Version    string // 550.90.05
	Arch       string // x86_64, aarch64
	TargetDir  string // the .run's makeself targetdir: NVIDIA-Linux-x86_64-550.90.05-vgpu-kvm
	Label      string // the .run's makeself label
	Listed     bool   // the archive listing was read and holds nvidia-vgpu-mgr
	Format     string // FormatRun, FormatDeb or FormatRPM
	Package    string // the .deb's or .rpm's package name: nvidia-vgpu-ubuntu-550
	PkgVersion string // the package's own version: a .deb's Version (550.90.05, 1:550.90.05-1), an .rpm's VERSION-RELEASE (9.4-550.90.05)
	SHA256     string // of the file as verified (hex); the install runs a copy with this hash
}

// Driver file formats.
const (
	FormatRun = "run"
	FormatDeb = "deb"
	FormatRPM = "rpm"
)

// Name is how the driver is named in plans: the .run's targetdir or the
// package's name and version.
func (d *Driver) Name() string {
	if d.Format == FormatDeb || d.Format == FormatRPM {
		return d.Package + " " + d.PkgVersion
	}
	return d.TargetDir
}

var (
	runNameRe = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^NVIDIA-Linux-(x86_64|aarch64)-([0-9]+\.[0-9]+(?:\.[0-9]+)?)(-[A-Za-z0-9._-]*)?\.run$`)
	})
	targetDirRe = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^NVIDIA-Linux-(x86_64|aarch64)-([0-9]+\.[0-9]+(?:\.[0-9]+)?)(-[A-Za-z0-9._-]*)?$`)
	})
	headerVarRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?m)^(label|targetdir)="([^"\n]*)"`) })
)

// InspectDriver verifies that path is the vGPU manager for KVM hosts (the
// "vgpu-kvm" build), not the plain GPU driver or the vGPU guest ("grid")
// driver, and reads its version. For a .run, nothing in it runs: the file is
// opened once and read from that descriptor, start to end (see listRun):
//
//   - its makeself header, read as text: its targetdir
//     (NVIDIA-Linux-x86_64-<ver>-vgpu-kvm) names the build, and its version
//     must agree with the file name when the file name has one (a renamed
//     file does not fool it);
//   - the archive listing, read in Go from the payload the header points
//     at, which must hold nvidia-vgpu-mgr, the daemon only the KVM host
//     build ships;
//   - the SHA-256 of every byte read, which the install checks again on
//     the copy it runs (see verifiedCopy): what was checked is what runs.
//
// A .deb or .rpm (told by its first bytes, not its name) is verified by its
// contents instead: see inspectPackage; r runs its read-only queries.
func InspectDriver(ctx context.Context, path string, r host.Runner) (*Driver, error) {
	base := filepath.Base(path)
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--driver: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("--driver: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("--driver %s: not a regular file", path)
	}
	head := make([]byte, maxRunHeader)
	n, err := f.ReadAt(head, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("--driver: %w", err)
	}
	head = head[:n]
	switch {
	case strings.HasPrefix(string(head), debMagic):
		return inspectPackage(ctx, path, FormatDeb, r)
	case strings.HasPrefix(string(head), rpmMagic):
		return inspectPackage(ctx, path, FormatRPM, r)
	case strings.HasSuffix(base, ".deb"):
		return nil, fmt.Errorf("%s: not a Debian package (no ar archive header)", path)
	case strings.HasSuffix(base, ".rpm"):
		return nil, fmt.Errorf("%s: not an RPM package (no RPM lead)", path)
	}
	return inspectRun(path, f, st.Size(), head)
}

// inspectRun verifies the .run at path (open as f, of size, its first
// bytes head): its makeself header names the vGPU manager build for this
// machine, and its archive holds nvidia-vgpu-mgr.
func inspectRun(path string, f *os.File, size int64, head []byte) (*Driver, error) {
	h, err := parseRunHeader(head)
	if err != nil {
		return nil, fmt.Errorf("%s: not an NVIDIA .run file (%v)", path, err)
	}
	d := &Driver{Path: path, Format: FormatRun, Label: h.Label, TargetDir: h.TargetDir}
	if err := d.checkTargetDir(path); err != nil {
		return nil, err
	}
	list, err := listRun(io.NewSectionReader(f, 0, size), size, h)
	if err != nil {
		return nil, fmt.Errorf("%s: reading the archive: %w", path, err)
	}
	if !list.VgpuMgr {
		return nil, fmt.Errorf("%s: the archive holds no nvidia-vgpu-mgr: not a vGPU manager build although its header says %s", path, d.TargetDir)
	}
	d.Listed, d.SHA256 = true, list.SHA256
	return d, nil
}

// checkTargetDir reads the arch and version of the .run at path from its
// makeself targetdir, which must name a vGPU manager build (vgpu-kvm) for
// this machine, as the file name says where it says.
func (d *Driver) checkTargetDir(path string) error {
	tm := targetDirRe().FindStringSubmatch(d.TargetDir)
	if tm == nil {
		return fmt.Errorf("%s: not an NVIDIA driver .run file (makeself targetdir %q)", path, d.TargetDir)
	}
	d.Arch, d.Version = tm[1], tm[2]
	flavour := tm[3]
	switch {
	case strings.Contains(flavour, "vgpu-kvm"):
	case strings.Contains(flavour, "grid"):
		return fmt.Errorf("%s: this is the vGPU guest driver (%s), for inside VMs; the host needs the vGPU manager, NVIDIA-Linux-%s-%s-vgpu-kvm.run from the same NVIDIA vGPU download", path, d.TargetDir, d.Arch, d.Version)
	default:
		return fmt.Errorf("%s: this is not the vGPU manager (%s is a plain NVIDIA driver build); the host needs NVIDIA-Linux-<arch>-<ver>-vgpu-kvm.run from the licensed NVIDIA vGPU download", path, d.TargetDir)
	}
	if nm := runNameRe().FindStringSubmatch(filepath.Base(path)); nm != nil && (nm[1] != d.Arch || nm[2] != d.Version) {
		return fmt.Errorf("%s: file name says %s %s but the archive holds %s: renamed or damaged file", path, nm[1], nm[2], d.TargetDir)
	}
	return checkArch(path, d.Arch)
}

// checkArch refuses a driver at path built for arch other than this
// machine's.
func checkArch(path, arch string) error {
	if want := map[string]string{"amd64": "x86_64", "arm64": "aarch64"}[runtime.GOARCH]; want != "" && want != arch {
		return fmt.Errorf("%s: built for %s, this machine is %s", path, arch, want)
	}
	return nil
}

// The first bytes of a .deb (an ar archive) and of an .rpm (its lead).
const (
	debMagic = "!<arch>\n"
	rpmMagic = "\xed\xab\xee\xdb"
)

// Files that tell the packages apart: only the vGPU manager for KVM hosts
// ships the nvidia-vgpu-mgr daemon; the vGPU guest (GRID) driver ships
// nvidia-gridd, the licensing daemon of guests.
const (
	vgpuMgrFile = "usr/bin/nvidia-vgpu-mgr"
	griddFile   = "usr/bin/nvidia-gridd"
)

var pkgVersionRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(?:[0-9]+:)?([0-9]+\.[0-9]+(?:\.[0-9]+)?)`) })

// rpmVersionRe is an NVIDIA driver version as an rpm tag holds it whole: a
// branch of three or more digits (418, 550), then one or two numbers.
var rpmVersionRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9]{3,}\.[0-9]+(?:\.[0-9]+)?$`) })

// rpmDriverVersion is the NVIDIA driver version an .rpm's VERSION and
// RELEASE tags carry, "" when neither is one. NVIDIA's vGPU manager for RHEL
// KVM is NAME NVIDIA-vGPU-rhel, VERSION the RHEL release, RELEASE the
// driver's version: rpm -iv prints its NAME-VERSION-RELEASE as
// "NVIDIA-vGPU-rhel-8.9-550.163.02" (NVIDIA's Virtual GPU Software User
// Guide, "Installing the Virtual GPU Manager Package for Red Hat Enterprise
// Linux KVM"), and the installed package's name is NVIDIA-vGPU-rhel (the
// edpm_nvidia_mdev_prepare role of github.com/openstack-k8s-operators/
// ci-framework). An rpm packaged the usual way carries the driver's version
// in VERSION (550.90.07, RELEASE 1.el9).
func rpmDriverVersion(version, release string) string {
	for _, v := range []string{version, release} {
		if rpmVersionRe().MatchString(v) {
			return v
		}
	}
	return ""
}

// inspectPackage verifies a .deb or .rpm by what it holds, not by its file
// name: its fields (dpkg-deb -f / rpm -qp --qf) give the name, version and
// architecture, and its file list (dpkg-deb -c / rpm -qlp) must hold
// usr/bin/nvidia-vgpu-mgr. Both only read the file; r runs them on this
// machine, on a private copy of it (see packageCopy) whose SHA-256 is
// d.SHA256: the install refuses a package whose bytes are not those. What
// is shown (errors, the plan) names path, not the copy.
func inspectPackage(ctx context.Context, path, format string, r host.Runner) (*Driver, error) {
	checked, sum, done, err := packageCopy(path)
	if err != nil {
		return nil, err
	}
	defer done()
	tool := "dpkg-deb"
	fieldsCmd := []string{"dpkg-deb", "-f", checked, "Package", "Version", "Architecture"}
	listCmd := []string{"dpkg-deb", "-c", checked}
	if format == FormatRPM {
		tool = "rpm"
		fieldsCmd = []string{"rpm", "-qp", "--qf", "%{NAME} %{VERSION} %{RELEASE} %{ARCH}", checked}
		listCmd = []string{"rpm", "-qlp", checked}
	}
	query := func(argv []string) (string, error) {
		out, err := r.Run(ctx, argv...)
		if err != nil {
			return "", fmt.Errorf("%s: reading the package (%s) failed: %w; reading a .%s needs %s on the machine gpuprep runs on", path, strings.Join(argv[:2], " "), namingFile(err, checked, path), format, tool)
		}
		return strings.ReplaceAll(string(out), checked, path), nil // rpm's warnings name the file
	}
	out, err := query(fieldsCmd)
	if err != nil {
		return nil, err
	}
	d := &Driver{Path: path, Format: format, Listed: true, SHA256: sum}
	if err := d.readPackageFields(format, out); err != nil {
		return nil, fmt.Errorf("%s: %w (%s answered %q)", path, err, strings.Join(fieldsCmd[:2], " "), strings.TrimSpace(out))
	}
	if d.Version == "" {
		return nil, fmt.Errorf("%s: package %s version %q is not an NVIDIA driver version", path, d.Package, d.PkgVersion)
	}
	list, err := query(listCmd)
	if err != nil {
		return nil, err
	}
	if err := d.checkPackageList(list); err != nil {
		return nil, err
	}
	return d, checkArch(path, d.Arch)
}

// readPackageFields reads d's package name, version, architecture and
// driver version from out, what the fields query of a package of format
// answered.
func (d *Driver) readPackageFields(format, out string) error {
	var arch string
	if format == FormatDeb {
		arch = d.readDebFields(out)
	} else {
		// the answer is the last line: a Runner that merges stderr puts
		// rpm's signature warnings (NOKEY) before it
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if f := strings.Fields(lines[len(lines)-1]); len(f) == 4 {
			d.Package, d.PkgVersion, arch = f[0], f[1]+"-"+f[2], f[3]
			d.Version = rpmDriverVersion(f[1], f[2])
		}
	}
	if d.Package == "" || d.PkgVersion == "" || arch == "" {
		return errors.New("the package has no name, version or architecture")
	}
	d.Arch = map[string]string{"amd64": "x86_64", "arm64": "aarch64"}[arch]
	if d.Arch == "" {
		d.Arch = arch
	}
	if format == FormatDeb {
		if m := pkgVersionRe().FindStringSubmatch(d.PkgVersion); m != nil {
			d.Version = m[1]
		}
	}
	return nil
}

// readDebFields reads dpkg-deb -f's Package and Version into d, and
// returns its Architecture.
func (d *Driver) readDebFields(out string) (arch string) {
	for _, l := range strings.Split(out, "\n") {
		k, v, _ := strings.Cut(l, ":")
		switch strings.TrimSpace(k) {
		case "Package":
			d.Package = strings.TrimSpace(v)
		case "Version":
			d.PkgVersion = strings.TrimSpace(v)
		case "Architecture":
			arch = strings.TrimSpace(v)
		}
	}
	return arch
}

// checkPackageList refuses a package whose file list (list) has no
// nvidia-vgpu-mgr: the vGPU guest driver (nvidia-gridd), or another one.
func (d *Driver) checkPackageList(list string) error {
	switch {
	case listHolds(list, vgpuMgrFile):
		return nil
	case listHolds(list, griddFile):
		return fmt.Errorf("%s: this is the vGPU guest driver (package %s %s holds nvidia-gridd, no nvidia-vgpu-mgr), for inside VMs; the host needs the vGPU manager package for KVM (the vgpu-kvm .%s, or NVIDIA-Linux-%s-%s-vgpu-kvm.run) from the same NVIDIA vGPU download", d.Path, d.Package, d.PkgVersion, d.Format, d.Arch, d.Version)
	}
	return fmt.Errorf("%s: this is not the vGPU manager (package %s %s holds no /%s: a plain NVIDIA driver or another package); the host needs the vGPU manager for KVM from the licensed NVIDIA vGPU download", d.Path, d.Package, d.PkgVersion, vgpuMgrFile)
}

// listHolds reports whether a package's file list names the file f.
func listHolds(list, f string) bool {
	for _, l := range strings.Split(list, "\n") {
		for _, field := range strings.Fields(l) {
			if strings.TrimLeft(field, "./") == f {
				return true
			}
		}
	}
	return false
}
