package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
)

// grub show's tables take host strings into cells: a newline, \f (a
// tabwriter line break) or \v (a tabwriter cell break) in the running or
// configured command line must not make a line of its own ("ALL HOSTS
// READY" painted under the table). Found by the #18 review.
func TestGrubShowCellsStayOneLine(t *testing.T) {
	t.Setenv("NO_COLOR", "1")
	for _, cl := range []string{
		"BOOT_IMAGE=/vmlinuz ro intel_iommu=\"on\nALL HOSTS READY\"",
		"BOOT_IMAGE=/vmlinuz ro intel_iommu=on\fALL HOSTS READY",
		"BOOT_IMAGE=/vmlinuz ro intel_iommu=on\vALL HOSTS READY",
	} {
		dir := t.TempDir()
		b := fixture.New(dir)
		fixture.MdevVGPU(b)
		b.File("/proc/cmdline", cl+"\n")
		// a newline in the configured value is refused (grub.cfg would
		// end the linux line there); \f and \v are words to bash
		b.File("/etc/default/grub", "GRUB_DEFAULT=0\nGRUB_CMDLINE_LINUX_DEFAULT=\"iommu=pt\fALL HOSTS READY intel_iommu=on\vALL HOSTS READY\"\nGRUB_CMDLINE_LINUX=\"\"\n")
		require.NoError(t, b.Err())
		out, errs, _ := gpuprep(t, "grub", "show", "--root", dir)
		require.Contains(t, out, "WANTED")
		for _, l := range strings.Split(out+errs, "\n") {
			require.False(t, strings.HasPrefix(strings.TrimSpace(l), "ALL HOSTS READY"), "%q: a line of its own: %q\n%s", cl, l, out)
		}
	}
}

// A /proc/cmdline larger than any kernel keeps (a hostile snapshot's) is
// refused before it is parsed: check says it could not read it, grub show
// that the running arguments are unknown, never that one is pending or in
// effect.
func TestHugeCmdlineIsUnknownNotParsed(t *testing.T) {
	t.Setenv("NO_COLOR", "1")
	dir := t.TempDir()
	b := fixture.New(dir)
	fixture.MdevVGPU(b)
	b.File("/proc/cmdline", "BOOT_IMAGE=/vmlinuz ro intel_iommu=on iommu=pt "+strings.Repeat("a ", 1<<20)+"\n")
	require.NoError(t, b.Err())

	out, _, _ := gpuprep(t, "grub", "show", "--root", dir, "-o", "json")
	require.Contains(t, out, `"runningError": "/proc/cmdline: `)
	require.NotContains(t, out, "configured-reboot-pending")
	require.NotContains(t, out, `"state": "ok"`)
	require.Less(t, len(out), 64<<10, "the huge line is printed")

	out, _, _ = gpuprep(t, "check", "--root", dir, "-o", "json")
	require.Contains(t, out, "more than a kernel command line can be")
}
