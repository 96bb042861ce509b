package initramfs

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/internal/host"
)

func TestCommandFirstToolFound(t *testing.T) {
	for _, c := range []struct {
		files []string
		want  []string
	}{
		{nil, nil},
		{[]string{"/usr/sbin/update-initramfs", "/usr/bin/dracut"}, []string{"update-initramfs", "-u"}},
		{[]string{"/usr/bin/dracut"}, []string{"dracut", "-f"}},
		{[]string{"/usr/local/sbin/dracut"}, []string{"dracut", "-f"}},
		{[]string{"/usr/bin/mkinitcpio"}, []string{"mkinitcpio", "-P"}},
		{[]string{"/opt/bin/dracut"}, nil}, // not on a root shell's PATH
	} {
		dir := t.TempDir()
		b := fixture.New(dir)
		for _, f := range c.files {
			b.File(f, "#!/bin/sh\n")
		}
		b.Mkdir("/usr/sbin/mkinitcpio.d") // a directory is not a program
		require.NoError(t, b.Err())
		r, err := host.NewRoot(dir)
		require.NoError(t, err)
		require.Equal(t, c.want, Command(r), "%v", c.files)
	}
}

// OlderThan: every image (each kernel's, dracut's and mkinitcpio's names;
// not leftovers) older than t, or nil as soon as one is as new.
func TestOlderThan(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	b := fixture.New(dir)
	b.Mkdir("/lib/modules/6.8.0-45-generic").Mkdir("/usr/lib/modules/6.8.0-49-generic")
	b.File("/boot/initrd.img-6.8.0-45-generic", "x").Touch("/boot/initrd.img-6.8.0-45-generic", t0.Add(-time.Hour))
	b.File("/boot/initramfs-6.8.0-49-generic.img", "x").Touch("/boot/initramfs-6.8.0-49-generic.img", t0.Add(-time.Minute))
	b.File("/boot/initrd.img-6.8.0-45-generic.new", "x").Touch("/boot/initrd.img-6.8.0-45-generic.new", t0.Add(time.Hour))
	require.NoError(t, b.Err())
	r, err := host.NewRoot(dir)
	require.NoError(t, err)
	require.Equal(t, []string{"/boot/initrd.img-6.8.0-45-generic", "/boot/initramfs-6.8.0-49-generic.img"}, OlderThan(r, t0))
	require.Nil(t, OlderThan(r, t0.Add(-time.Minute)), "an image as new as t")

	require.NoError(t, fixture.New(dir).File("/etc/mkinitcpio.d/linux.preset", "").File("/boot/initramfs-linux-fallback.img", "x").
		Touch("/boot/initramfs-linux-fallback.img", t0).Err())
	require.Nil(t, OlderThan(r, t0), "the fallback image of a mkinitcpio preset")
	require.Nil(t, OlderThan(r, t0.Add(-24*time.Hour)))
	require.Contains(t, Images(r), "/boot/initramfs-linux.img")
}
