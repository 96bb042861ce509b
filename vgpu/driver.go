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

	"github.com/gpuprep/gpuprep/internal/host"
)

// Driver is a vGPU manager package, verified by InspectDriver.
type Driver struct {
	Path      string
	Version   string // 550.90.05
	Arch      string // x86_64, aarch64
	TargetDir string // the .run's makeself targetdir: NVIDIA-Linux-x86_64-550.90.05-vgpu-kvm
	Label     string // the .run's makeself label
	Listed    bool   // the archive listing was read and holds nvidia-vgpu-mgr
}

// ErrUnsupportedPackage is returned for .deb and .rpm packages of the vGPU
// manager, which gpuprep recognises but does not install yet.
var ErrUnsupportedPackage = errors.New("package format not supported yet")

var (
	runNameRe   = regexp.MustCompile(`^NVIDIA-Linux-(x86_64|aarch64)-([0-9]+\.[0-9]+(?:\.[0-9]+)?)(-[A-Za-z0-9._-]*)?\.run$`)
	targetDirRe = regexp.MustCompile(`^NVIDIA-Linux-(x86_64|aarch64)-([0-9]+\.[0-9]+(?:\.[0-9]+)?)(-[A-Za-z0-9._-]*)?$`)
	headerVarRe = regexp.MustCompile(`(?m)^(label|targetdir)="([^"\n]*)"`)
)

// headerSize bounds how much of a .run is read for its makeself header: the
// shell part of NVIDIA's .run files is about 20 KiB, the payload follows.
const headerSize = 64 << 10

// InspectDriver verifies that path is the vGPU manager for KVM hosts (the
// "vgpu-kvm" build), not the plain GPU driver or the vGPU guest ("grid")
// driver, and reads its version. Two independent pieces of evidence are used:
//
//   - the makeself header of the .run, read as text without running it: its
//     targetdir (NVIDIA-Linux-x86_64-<ver>-vgpu-kvm) names the build, and its
//     version must agree with the file name when the file name has one (a
//     renamed file does not fool it);
//   - the archive listing (`sh FILE --list`, which lists the embedded tar
//     without extracting or installing), which must hold nvidia-vgpu-mgr, the
//     daemon only the KVM host build ships. It is skipped when r cannot run
//     commands (a --dry-run against another root), which Listed reports.
func InspectDriver(ctx context.Context, path string, r host.Runner) (*Driver, error) {
	base := filepath.Base(path)
	switch {
	case strings.HasSuffix(base, ".deb"), strings.HasSuffix(base, ".rpm"):
		pm := "apt-get install ./" + base
		if strings.HasSuffix(base, ".rpm") {
			pm = "dnf install ./" + base
		}
		return nil, fmt.Errorf("%s: %w: gpuprep installs the vGPU manager from NVIDIA's .run file (NVIDIA-Linux-x86_64-<ver>-vgpu-kvm.run, in the same NVIDIA download); install this package with `%s`, then check with `gpuprep check --mode vm-vgpu`", path, ErrUnsupportedPackage, pm)
	}
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("--driver: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("--driver %s: not a regular file", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--driver: %w", err)
	}
	head := make([]byte, headerSize)
	n, err := io.ReadFull(f, head)
	f.Close()
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("--driver: %w", err)
	}
	head = head[:n]
	if !strings.HasPrefix(string(head), "#!/bin/sh") {
		return nil, fmt.Errorf("%s: not an NVIDIA .run file (no makeself shell header)", path)
	}
	d := &Driver{Path: path}
	for _, m := range headerVarRe.FindAllStringSubmatch(string(head), -1) {
		switch m[1] {
		case "label":
			if d.Label == "" {
				d.Label = m[2]
			}
		case "targetdir":
			if d.TargetDir == "" {
				d.TargetDir = m[2]
			}
		}
	}
	tm := targetDirRe.FindStringSubmatch(d.TargetDir)
	if tm == nil {
		return nil, fmt.Errorf("%s: not an NVIDIA driver .run file (makeself targetdir %q)", path, d.TargetDir)
	}
	d.Arch, d.Version = tm[1], tm[2]
	flavour := tm[3]
	switch {
	case strings.Contains(flavour, "vgpu-kvm"):
	case strings.Contains(flavour, "grid"):
		return nil, fmt.Errorf("%s: this is the vGPU guest driver (%s), for inside VMs; the host needs the vGPU manager, NVIDIA-Linux-%s-%s-vgpu-kvm.run from the same NVIDIA vGPU download", path, d.TargetDir, d.Arch, d.Version)
	default:
		return nil, fmt.Errorf("%s: this is not the vGPU manager (%s is a plain NVIDIA driver build); the host needs NVIDIA-Linux-<arch>-<ver>-vgpu-kvm.run from the licensed NVIDIA vGPU download", path, d.TargetDir)
	}
	if nm := runNameRe.FindStringSubmatch(base); nm != nil && (nm[1] != d.Arch || nm[2] != d.Version) {
		return nil, fmt.Errorf("%s: file name says %s %s but the archive holds %s: renamed or damaged file", path, nm[1], nm[2], d.TargetDir)
	}
	if want := map[string]string{"amd64": "x86_64", "arm64": "aarch64"}[runtime.GOARCH]; want != "" && want != d.Arch {
		return nil, fmt.Errorf("%s: built for %s, this machine is %s", path, d.Arch, want)
	}
	out, err := r.Run(ctx, "sh", path, "--list")
	switch {
	case errors.Is(err, host.ErrNoCommands):
		return d, nil
	case err != nil:
		return nil, fmt.Errorf("%s: listing the archive (sh %s --list) failed: %w", path, base, err)
	}
	if !strings.Contains(string(out), "nvidia-vgpu-mgr") {
		return nil, fmt.Errorf("%s: the archive holds no nvidia-vgpu-mgr: not a vGPU manager build although its header says %s", path, d.TargetDir)
	}
	d.Listed = true
	return d, nil
}
