package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
)

// evil ends a host string: a window title and a fake verdict, a screen
// clear, a CR repaint, the 8-bit CSI, a bidi override, a zero-width space.
const evil = "\x1b]0;ALL HOSTS READY\x07\x1b[2J\rALL HOSTS READY\u009b2J\u202eydaer\u202c\u200b"

// evilLine ends a host string that is one line (a name, an attribute, a
// link's name): a newline and a fake verdict on a line of its own.
const evilLine = evil + "\nALL HOSTS READY"

// hostileRoot is the mdev-vgpu fixture with the strings a snapshot sends
// (files under --root) ending in evil: the OS's PRETTY_NAME, the host
// name, the kernel command line (those, a line each, with evilLine), the
// GRUB defaults, the kubelet's defaults, the GPU's pci.ids
// name, a GPU's driver (its link's name), a vGPU type's name, a process.
func hostileRoot(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	b := fixture.New(dir)
	fixture.MdevVGPU(b)
	require.NoError(t, b.Err())
	gpu := "0000:21:00.0"
	cmdline := "BOOT_IMAGE=/vmlinuz ro quiet intel_iommu=on x=" + evilLine
	b.File("/etc/os-release", "PRETTY_NAME=\"Ubuntu 22.04"+evil+"\"\nID=ubuntu\n")
	b.File("/proc/sys/kernel/hostname", "vgpu-mdev"+evilLine+"\n")
	b.File("/proc/cmdline", cmdline+"\n")
	b.File("/etc/default/grub", "GRUB_DEFAULT=0\nGRUB_TIMEOUT=5"+evil+"\nGRUB_CMDLINE_LINUX_DEFAULT=\"quiet splash x="+evil+"\"\nGRUB_CMDLINE_LINUX=\"\"\n")
	pciIDs, err := os.ReadFile(filepath.Join(dir, "usr/share/misc/pci.ids"))
	require.NoError(t, err)
	b.File("/usr/share/misc/pci.ids", strings.Replace(string(pciIDs), "[Tesla T4]", "[Tesla T4]"+evil, 1))
	drv := "/sys/bus/pci/drivers/nvidia" + evilLine
	b.Mkdir(drv).File(drv+"/bind", "").File(drv+"/unbind", "")
	b.Link(b.DevPath(gpu)+"/driver", drv)
	b.File(b.DevPath(gpu)+"/mdev_supported_types/nvidia-222/name", "GRID T4-1Q"+evilLine+"\n")
	b.File("/etc/default/kubelet", "KUBELET_EXTRA_ARGS=\"--v=2 x="+evil+"\"\n")
	b.File("/proc/2211/comm", "nvidia-vgpud"+evilLine+"\n")
	require.NoError(t, b.Err())
	return dir
}

// noRawControls reports it when s holds anything a terminal acts on or does not
// show but the newline and the tab: C0 and C1 controls, DEL, bytes that
// are not UTF-8, format characters (bidi controls, zero-width characters),
// line and paragraph separators.
func noRawControls(t *testing.T, what, s string) {
	t.Helper()
	if !utf8.ValidString(s) {
		t.Errorf("%s: not UTF-8: %q", what, s)
		return
	}
	for i, r := range s {
		bad := r < 0x20 && r != '\n' && r != '\t' || r >= 0x7f && r < 0xa0 ||
			unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp)
		if bad {
			lo := max(0, i-60)
			t.Errorf("%s: raw %U at %d: %q", what, r, i, s[lo:min(len(s), i+40)])
			return
		}
	}
}

// A hostile --root reaches the terminal escaped through every command that
// reads it: nothing on stdout or stderr that a terminal acts on, and no
// line of its own ("ALL HOSTS READY" after a CR is on the line it ends).
func TestHostileRootPrintsNoRawControls(t *testing.T) {
	t.Setenv("NO_COLOR", "1")
	root := hostileRoot(t)
	for _, args := range [][]string{
		{"check"},
		{"check", "--mode", "vm-vgpu"},
		{"vfio", "status"},
		{"vfio", "bind", "--dry-run", "--persist"},
		{"vgpu", "types"},
		{"grub", "show"},
		{"grub", "ensure", "--dry-run", "--no-regenerate", "--mode", "vm-passthrough"},
		{"plan", "--mode", "vm-passthrough"},
		{"label", "--mode", "vm-passthrough", "--before-join", "--dry-run"},
	} {
		what := strings.Join(args, " ")
		out, errs, code := gpuprep(t, append(args, "--root", root)...)
		require.NotEqual(t, exitUsage, code, "%s: %s", what, errs)
		noRawControls(t, what+" stdout", out)
		noRawControls(t, what+" stderr", errs)
		for _, l := range strings.Split(out+errs, "\n") {
			if strings.HasPrefix(strings.TrimSpace(l), "ALL HOSTS READY") {
				t.Errorf("%s: a line of its own: %q", what, l)
			}
		}
	}
}
