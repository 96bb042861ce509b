package vgputest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gpuprep/gpuprep/internal/fixture"
)

// RPMMarker follows the RPM lead in the files WriteRPM writes.
const RPMMarker = "gpuprep-fake-rpm"

// RHELRelease is the VERSION of the packages WriteRPM writes: the RHEL
// release NVIDIA builds its vGPU manager rpm for.
const RHELRelease = "9.4"

// packageName is the name NVIDIA gives the package of a flavour ("vgpu-kvm",
// "grid" or "" for the plain driver) on Debian/Ubuntu and on RHEL.
func packageName(format, version, flavour string) string {
	branch, _, _ := strings.Cut(version, ".")
	switch {
	case flavour == "vgpu-kvm" && format == "rpm":
		return "NVIDIA-vGPU-rhel"
	case flavour == "vgpu-kvm":
		return "nvidia-vgpu-ubuntu-" + branch
	case flavour == "grid":
		return "nvidia-linux-grid-" + branch
	}
	return "nvidia-driver-" + branch
}

// PackageFiles are the files (paths without the leading /) a synthetic
// package of flavour holds: the vGPU manager ships nvidia-vgpu-mgr,
// nvidia-vgpud with their units and sriov-manage; the guest (GRID) driver
// nvidia-gridd; all of them nvidia-smi and the module sources DKMS builds.
func PackageFiles(version, flavour string) map[string]string {
	files := map[string]string{
		"usr/bin/nvidia-smi":                       "#!/bin/sh\n",
		"usr/src/nvidia-" + version + "/dkms.conf": "PACKAGE_NAME=\"nvidia\"\nPACKAGE_VERSION=\"" + version + "\"\n",
	}
	switch flavour {
	case "vgpu-kvm":
		for _, b := range []string{"nvidia-vgpu-mgr", "nvidia-vgpud"} {
			files["usr/bin/"+b] = "#!/bin/sh\n"
			files["lib/systemd/system/"+b+".service"] = fmt.Sprintf("[Unit]\nDescription=%s\n[Service]\nExecStart=/usr/bin/%s\n[Install]\nWantedBy=multi-user.target\n", b, b)
		}
		files["usr/lib/nvidia/sriov-manage"] = "#!/bin/sh\n"
	case "grid":
		files["usr/bin/nvidia-gridd"] = "#!/bin/sh\n"
	}
	return files
}

// WriteDeb builds, with dpkg-deb --build, a synthetic .deb of flavour (see
// PackageFiles) named as NVIDIA names theirs
// (nvidia-vgpu-ubuntu-550_550.90.05_amd64.deb) in dir and returns its path.
// It fails when dpkg-deb is not installed.
func WriteDeb(dir, version, flavour string) (string, error) {
	name := packageName("deb", version, flavour)
	stage, err := os.MkdirTemp(dir, "deb-stage-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(stage)
	files := PackageFiles(version, flavour)
	files["DEBIAN/control"] = "Package: " + name + "\nVersion: " + version + "\nArchitecture: amd64\nMaintainer: gpuprep tests <tests@gpuprep.invalid>\nDepends: dkms\nDescription: synthetic NVIDIA package for gpuprep tests\n"
	for p, c := range files {
		full := filepath.Join(stage, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(full, []byte(c), 0o755); err != nil {
			return "", err
		}
	}
	if err := os.Chmod(filepath.Join(stage, "DEBIAN/control"), 0o644); err != nil {
		return "", err
	}
	out := filepath.Join(dir, name+"_"+version+"_amd64.deb")
	cmd := exec.Command("dpkg-deb", "--root-owner-group", "-Zgzip", "--build", stage, out)
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("dpkg-deb --build: %w: %s", err, strings.TrimSpace(string(b)))
	}
	return out, nil
}

// WriteRPM writes a stand-in for an .rpm of flavour, named as NVIDIA names
// theirs (NVIDIA-vGPU-rhel-9.4-550.90.05.x86_64.rpm), into dir. rpmbuild is
// not needed: the file is an RPM lead followed by RPMMarker, the package's
// "NAME VERSION RELEASE ARCH" and its file list, which Host's rpm answers
// queries from (it is not a real RPM: only Host reads it). As NVIDIA's
// vGPU manager rpm, the vgpu-kvm one's VERSION is the RHEL release
// (RHELRelease) and its RELEASE the driver's version: rpm -iv prints
// NVIDIA's as "NVIDIA-vGPU-rhel-8.9-550.163.02" (NVIDIA's Virtual GPU
// Software User Guide, "Installing the Virtual GPU Manager Package for Red
// Hat Enterprise Linux KVM"). The others carry the driver's version in
// VERSION, RELEASE 1.
func WriteRPM(dir, version, flavour string) (string, error) {
	head := rpmHeader{packageName("rpm", version, flavour), version, "1", "x86_64"}
	if flavour == "vgpu-kvm" {
		head.Version, head.Release = RHELRelease, version
	}
	lead := make([]byte, 96)
	copy(lead, "\xed\xab\xee\xdb\x03\x00")
	var b bytes.Buffer
	b.Write(lead)
	fmt.Fprintf(&b, "%s\n%s %s %s %s\n", RPMMarker, head.Name, head.Version, head.Release, head.Arch)
	for _, p := range slices.Sorted(maps.Keys(PackageFiles(version, flavour))) {
		b.WriteString("/" + p + "\n")
	}
	out := filepath.Join(dir, head.nvra()+".rpm")
	return out, os.WriteFile(out, b.Bytes(), 0o644)
}

// readRPM reads what WriteRPM wrote: the header and the file list.
func readRPM(file string) (head rpmHeader, list []string, err error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return head, nil, err
	}
	if len(b) < 96 || !bytes.HasPrefix(b, []byte("\xed\xab\xee\xdb")) {
		return head, nil, fmt.Errorf("error: %s: not an rpm package", file)
	}
	lines := strings.Split(strings.TrimRight(string(b[96:]), "\n"), "\n")
	if len(lines) < 2 || lines[0] != RPMMarker {
		return head, nil, fmt.Errorf("error: %s: not a package WriteRPM wrote", file)
	}
	f := strings.Fields(lines[1])
	if len(f) != 4 {
		return head, nil, fmt.Errorf("error: %s: not a package WriteRPM wrote", file)
	}
	return rpmHeader{f[0], f[1], f[2], f[3]}, lines[2:], nil
}

// rpm answers `rpm -qp --qf FMT FILE` and `rpm -qlp FILE` from a WriteRPM
// file, installs one with `rpm -Uvh`, answers `rpm -qf [--qf FMT] PATH` and
// `rpm -q NAME` from what it installed (RPMDB), and removes a package with
// `rpm -e NAME`.
func (h *Host) rpm(ctx context.Context, b *fixture.Builder, args []string) ([]byte, error) {
	switch {
	case len(args) == 4 && args[0] == "-qp" && args[1] == "--qf":
		return rpmQueryPackage(args)
	case len(args) >= 2 && args[0] == "-Uvh":
		return h.installPackage(ctx, b, "rpm", args[len(args)-1])
	case len(args) == 4 && args[0] == "-qf" && args[1] == "--qf":
		return h.rpmQueryFile(args[2], args[3])
	case len(args) == 2:
		return h.rpmOne(b, args[0], args[1])
	}
	return nil, fmt.Errorf("rpm %v: not simulated", args)
}

// rpmOne answers rpm OPTION ARG: -qlp FILE, -qf PATH, -q NAME, -e NAME.
func (h *Host) rpmOne(b *fixture.Builder, opt, arg string) ([]byte, error) {
	switch opt {
	case "-qlp":
		return rpmQueryPackage([]string{opt, arg})
	case "-qf":
		return h.rpmQueryFile("%{NAME}-%{VERSION}-%{RELEASE}.%{ARCH}\n", arg)
	case "-q":
		return h.rpmQuery(arg)
	case "-e":
		return h.removeRPM(b, "rpm", arg)
	}
	return nil, fmt.Errorf("rpm %v: not simulated", []string{opt, arg})
}

// rpmQueryPackage answers rpm -qp --qf FMT FILE and rpm -qlp FILE from a
// WriteRPM file.
func rpmQueryPackage(args []string) ([]byte, error) {
	if args[0] == "-qlp" {
		_, l, err := readRPM(args[1])
		return []byte(strings.Join(l, "\n") + "\n"), err
	}
	p, _, err := readRPM(args[3])
	if err != nil {
		return nil, err
	}
	s, err := p.format(args[2])
	return []byte(s), err
}

// installPackage plays apt-get, dpkg, dnf or rpm installing file into the
// root: the package's files are unpacked (a .deb by dpkg-deb -x, a WriteRPM
// file from its list) and DKMS's build in its post-install script is played
// by writing the modules for the running kernel. FailPackage makes the
// DKMS build fail as apt-get reports it.
func (h *Host) installPackage(ctx context.Context, b *fixture.Builder, tool, file string) ([]byte, error) {
	kver, _ := h.Root.ReadString("/proc/sys/kernel/osrelease")
	var in unpackedPackage
	var out []byte
	var err error
	if strings.HasSuffix(file, ".rpm") {
		in, err = h.unpackRPM(b, tool, file, kver)
	} else {
		in, out, err = h.unpackDeb(ctx, tool, file, kver)
	}
	if err != nil {
		return out, err
	}
	mods := "/lib/modules/" + kver
	dep, _ := h.Root.ReadString(mods + "/modules.dep")
	dep += "\nupdates/dkms/nvidia.ko:\n"
	b.File(mods+"/updates/dkms/nvidia.ko", "version="+in.version)
	if in.vgpuMgr {
		b.File(mods+"/updates/dkms/nvidia-vgpu-vfio.ko", "version="+in.version)
		if !strings.HasPrefix(kver, "6.") {
			dep += "updates/dkms/nvidia-vgpu-vfio.ko: updates/dkms/nvidia.ko\n"
		}
	}
	b.File(mods+"/modules.dep", strings.TrimLeft(dep, "\n"))
	if err := h.recordPackage(b, in, mods); err != nil {
		return nil, err
	}
	return []byte("Setting up ... done\n"), b.Err()
}

// unpackedPackage is a package installPackage unpacked: its driver
// version, whether it is the vGPU manager, and its name in dpkg's database
// (debPkg) or its rpm header.
type unpackedPackage struct {
	version, debPkg string
	rpmHead         *rpmHeader
	vgpuMgr         bool
}

// unpackRPM unpacks the WriteRPM file from its list, its DKMS build failed
// with FailPackage.
func (h *Host) unpackRPM(b *fixture.Builder, tool, file, kver string) (unpackedPackage, error) {
	head, list, err := readRPM(file)
	if err != nil {
		return unpackedPackage{}, fmt.Errorf("%s: %w", tool, err)
	}
	in := unpackedPackage{rpmHead: &head, version: head.Version}
	if head.Version == RHELRelease {
		in.version = head.Release // NVIDIA's vGPU manager rpm: see WriteRPM
	}
	files := PackageFiles(in.version, "")
	for _, p := range list {
		if strings.HasSuffix(p, "nvidia-vgpu-mgr") {
			files = PackageFiles(in.version, "vgpu-kvm")
		} else if strings.HasSuffix(p, "nvidia-gridd") {
			files = PackageFiles(in.version, "grid")
		}
	}
	if h.FailPackage {
		return in, fmt.Errorf("%s: exit status 1: Error! Bad return status for module build on kernel: %s (x86_64)\nConsult /var/lib/dkms/nvidia/%s/build/make.log for more information.\nwarning: %%post(%s) scriptlet failed, exit status 10", tool, kver, in.version, head.Name)
	}
	for p, c := range files {
		b.File("/"+p, c)
	}
	in.vgpuMgr = files["usr/bin/nvidia-vgpu-mgr"] != ""
	return in, nil
}

// unpackDeb unpacks the .deb with dpkg-deb -x, its DKMS build failed with
// FailPackage (out: what apt-get printed then).
func (h *Host) unpackDeb(ctx context.Context, tool, file, kver string) (in unpackedPackage, out []byte, err error) {
	fields, err := exec.CommandContext(ctx, "dpkg-deb", "-f", file, "Version", "Package").Output()
	if err != nil {
		return in, nil, fmt.Errorf("%s: dpkg-deb: %w", tool, err)
	}
	var pkg string
	for _, l := range strings.Split(string(fields), "\n") {
		if k, v, ok := strings.Cut(l, ": "); ok && k == "Version" {
			in.version = v
		} else if ok && k == "Package" {
			pkg = v
		}
	}
	if h.FailPackage {
		return in, []byte("Setting up " + pkg + " (" + in.version + ") ...\n"), fmt.Errorf("%s: exit status 100: Error! Bad return status for module build on kernel: %s (x86_64)\nConsult /var/lib/dkms/nvidia/%s/build/make.log for more information.\ndpkg: error processing package %s (--configure):\n installed %s package post-installation script subprocess returned error exit status 10\nE: Sub-process /usr/bin/dpkg returned an error code (1)", tool, kver, in.version, pkg, pkg)
	}
	if out, err := exec.CommandContext(ctx, "dpkg-deb", "-x", file, h.Dir).CombinedOutput(); err != nil {
		return in, nil, fmt.Errorf("%s: dpkg-deb -x: %w: %s", tool, err, out)
	}
	in.vgpuMgr = h.Root.Exists("/usr/bin/nvidia-vgpu-mgr")
	in.debPkg = pkg
	return in, nil, nil
}

// recordPackage records the package in in the database of its tool, with
// its files and the modules DKMS built under mods.
func (h *Host) recordPackage(b *fixture.Builder, in unpackedPackage, mods string) error {
	if in.debPkg == "" && in.rpmHead == nil {
		return nil
	}
	flavour := ""
	files := []string{mods + "/updates/dkms/nvidia.ko"}
	if in.vgpuMgr {
		flavour = "vgpu-kvm"
		files = append(files, mods+"/updates/dkms/nvidia-vgpu-vfio.ko")
	}
	for _, f := range slices.Sorted(maps.Keys(PackageFiles(in.version, flavour))) {
		files = append(files, "/"+f)
	}
	if in.debPkg != "" {
		return h.recordDeb(b, in.debPkg, in.version, files)
	}
	return h.recordRPM(b, *in.rpmHead, files)
}

// stripEnv drops a leading `env VAR=VALUE…` from argv.
func stripEnv(argv []string) []string {
	if len(argv) == 0 || argv[0] != "env" {
		return argv
	}
	argv = argv[1:]
	for len(argv) > 0 && strings.Contains(argv[0], "=") {
		argv = argv[1:]
	}
	return argv
}

// packageCommand plays dpkg-deb's queries (run for real: they only read
// the file), apt-get install -y FILE, dpkg -i FILE, dnf install -y FILE,
// apt-get remove -y PKG, dpkg -r PKG, dnf remove -y PKG and rpm.
func (h *Host) packageCommand(ctx context.Context, b *fixture.Builder, argv []string) ([]byte, error) {
	switch argv[0] {
	case "dpkg-deb":
		return dpkgDeb(ctx, argv)
	case "rpm":
		return h.rpm(ctx, b, argv[1:])
	case "apt-get", "dnf":
		if out, err, ok := h.aptOrDNF(ctx, b, argv); ok {
			return out, err
		}
	case "dpkg":
		if len(argv) == 3 && argv[1] == "-i" {
			return h.installPackage(ctx, b, "dpkg", argv[2])
		}
		if len(argv) == 3 && argv[1] == "-r" {
			return h.removeDeb(b, "dpkg", argv[2])
		}
	}
	return nil, errors.New(strings.Join(argv, " ") + ": not simulated")
}

// dpkgDeb runs dpkg-deb's queries (-f, -c) for real: they only read the
// file.
func dpkgDeb(ctx context.Context, argv []string) ([]byte, error) {
	if len(argv) < 3 || (argv[1] != "-f" && argv[1] != "-c") {
		return nil, fmt.Errorf("dpkg-deb %v: not simulated", argv[1:])
	}
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "dpkg-deb", argv[1:]...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("dpkg-deb: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// aptOrDNF plays apt-get or dnf install -y FILE and remove -y PKG; ok is
// false for any other command line.
func (h *Host) aptOrDNF(ctx context.Context, b *fixture.Builder, argv []string) (out []byte, err error, ok bool) {
	if len(argv) != 4 || argv[2] != "-y" {
		return nil, nil, false
	}
	switch {
	case argv[0] == "apt-get" && argv[1] == "remove":
		out, err = h.removeDeb(b, "apt-get", argv[3])
	case argv[0] == "dnf" && argv[1] == "remove":
		out, err = h.removeRPM(b, "dnf", argv[3])
	case argv[1] != "install":
		return nil, nil, false
	case argv[0] == "apt-get" && !strings.Contains(argv[3], "/"):
		err = fmt.Errorf("apt-get: exit status 100: E: Unable to locate package %s", argv[3])
	default:
		out, err = h.installPackage(ctx, b, argv[0], argv[3])
	}
	return out, err, true
}
