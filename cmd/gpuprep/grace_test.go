package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// On an arm64 GH200 node, grub ensure --mode adds iommu.passthrough=1 and
// none of x86's intel_iommu=on / iommu=pt (an arm64 kernel parses neither).
func TestGraceGrubEnsureAddsPassthroughOnly(t *testing.T) {
	run, d := fakeGrubRunner(t)
	root := fixtureRoot(t, "gh200")
	require.NoError(t, os.MkdirAll(filepath.Join(root, "usr/sbin"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "usr/sbin/update-grub"), []byte("#!/bin/sh\n"), 0o755))
	before := read(t, root, "/etc/default/grub")

	out, errOut, code := gpuprepWith(t, d, "grub", "ensure", "--mode", "vm-passthrough", "--root", root)
	require.Equal(t, exitNeedReboot, code, out+errOut)
	require.Contains(t, out, "added: iommu.passthrough=1 (to GRUB_CMDLINE_LINUX_DEFAULT)\n")
	require.Equal(t, [][]string{{"update-grub"}}, run.Calls)
	after := read(t, root, "/etc/default/grub")
	require.Equal(t, strings.Replace(before, `GRUB_CMDLINE_LINUX_DEFAULT="quiet splash"`, `GRUB_CMDLINE_LINUX_DEFAULT="quiet splash iommu.passthrough=1"`, 1), after)
	for _, x86 := range []string{"intel_iommu", "amd_iommu", "iommu=pt"} {
		require.NotContains(t, after, x86)
		require.NotContains(t, out, x86)
	}
}

func TestGracePlanProposesPassthroughOnly(t *testing.T) {
	root := fixtureRoot(t, "gh200")
	out, errOut, code := gpuprep(t, "plan", "--mode", "vm-passthrough", "--root", root)
	require.Equal(t, 0, code, out+errOut)
	require.Contains(t, out, "kernel-args: add iommu.passthrough=1 to the next boot's kernel command line")
	require.NotContains(t, out, "intel_iommu")
	require.NotContains(t, out, "iommu=pt")
}

// A snapshot of an arm64 node carries what says it is one: check on the
// snapshot judges it as arm64 (not "unsupported CPU vendor").
func TestGraceSnapshotCarriesArch(t *testing.T) {
	t.Setenv("NO_COLOR", "1")
	for sc, want := range map[string]string{
		"gh200":         " ✓ cpu.virtualization         KVM at EL2: KVM initialised at EL2",
		"gh200-capture": " ⚠ cpu.virtualization         /dev/kvm: /dev/kvm present, but nothing else shows KVM initialised at EL2",
	} {
		src := fixtureRoot(t, sc)
		dst := filepath.Join(t.TempDir(), "snap")
		out, errs, code := gpuprep(t, "--root", src, "snapshot", dst)
		require.Equal(t, 0, code, out+errs)
		a, _, _ := gpuprep(t, "check", "-v", "--root", src)
		b, _, _ := gpuprep(t, "check", "-v", "--root", dst)
		require.Equal(t, a, b, sc)
		require.Contains(t, b, want, sc)
		require.NotContains(t, b, "unsupported CPU vendor", sc)
	}
}
