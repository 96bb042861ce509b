package vgpu_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/vgpu"
)

// An install that wrote the nouveau blacklist and stopped before
// update-initramfs (killed, or update-initramfs failed): the blacklist is
// there, so blacklisting is not planned again, but the initramfs, older
// than it, still is.
func TestInstallRegeneratesInitramfsOlderThanBlacklist(t *testing.T) {
	r := newRig(t, "vgpu-fresh-sriov", l40s...)
	img := filepath.Join(r.h.Dir, "boot/initrd.img-6.8.0-45-generic")
	b := fixture.New(r.h.Dir).Touch("/boot/initrd.img-6.8.0-45-generic", time.Now().Add(-time.Hour))
	b.File(vgpu.NouveauBlacklist, "# Written by gpuprep vgpu install: the NVIDIA vGPU manager needs the GPUs, not nouveau.\nblacklist nouveau\noptions nouveau modeset=0\n")
	require.NoError(t, b.Err())
	stale, err := os.ReadFile(img)
	require.NoError(t, err)
	require.NotContains(t, string(stale), "gpuprep-blacklist-nouveau.conf")

	p, err := r.install(t)
	require.NoError(t, err)
	require.Equal(t, "regenerate the initramfs (it is older than "+vgpu.NouveauBlacklist+")", titles(p)[0])
	require.NotContains(t, titles(p), "blacklist nouveau")
	require.Contains(t, r.h.Commands(), "update-initramfs -u")
	fresh, err := os.ReadFile(img)
	require.NoError(t, err)
	require.Contains(t, string(fresh), "== etc/modprobe.d/gpuprep-blacklist-nouveau.conf\n# Written by gpuprep vgpu install")

	// done: nothing more to plan
	p, err = r.install(t)
	require.NoError(t, err)
	require.Empty(t, titles(p))
}
