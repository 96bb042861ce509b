package grub

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A kernel release named by a hostile root (a grub.cfg linux line, a BLS
// entry's version or linux line) becomes /lib/modules/RELEASE and
// /boot/initrd.img-RELEASE: one with ".." or "/" is refused by name, not
// read (internal/kernelrelease).
func TestNextKernelHostileReleaseNames(t *testing.T) {
	menu := "menuentry 'x' {\n\tlinux /boot/vmlinuz-.. root=/dev/sda1\n}\n"
	nk := FindNextKernel(nextRoot(t, map[string]string{DefaultsFile: debianDefaults, "/boot/grub/grub.cfg": menu}, nil))
	require.Empty(t, nk.Release)
	require.Contains(t, nk.Missing, `kernel release ".." refused`)

	const mid = "2d1f0c9e8b7a46f5a4e3d2c1b0a99887"
	for version, want := range map[string]string{
		"../../etc":         `kernel release "../../etc" refused: it holds a '/'`,
		"6.1.0-18-amd64/..": `kernel release "6.1.0-18-amd64/.." refused`,
	} {
		entry := "title x\nversion " + version + "\nlinux /vmlinuz-6.1.0-18-amd64\noptions root=UUID=1 ro\n"
		files := map[string]string{
			DefaultsFile: "GRUB_ENABLE_BLSCFG=true\n",
			"/boot/loader/entries/" + mid + "-x.conf": entry,
			"/etc/modules.builtin":                    "",
		}
		nk := FindNextKernel(nextRoot(t, files, nil))
		require.Empty(t, nk.Release, version)
		require.Contains(t, nk.Missing, want)
	}
	entry := "title x\nlinux /vmlinuz-..\noptions root=UUID=1 ro\n"
	nk = FindNextKernel(nextRoot(t, map[string]string{DefaultsFile: "GRUB_ENABLE_BLSCFG=true\n", "/boot/loader/entries/" + mid + "-x.conf": entry}, nil))
	require.Empty(t, nk.Release)
	require.Contains(t, nk.Missing, `kernel release ".." refused`)
}
