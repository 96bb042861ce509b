package vgpu_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/vgpu"
)

// The file checked is the file run: an installer swapped after the plan
// read it (a user-writable upload directory) is refused, never run, and
// what runs is a copy only root can write.
func TestInstallRunsOnlyTheFileItChecked(t *testing.T) {
	r := newRig(t, "vgpu-fresh-sriov", l40s...)
	p, err := vgpu.PlanInstall(context.Background(), r.env, r.opts)
	require.NoError(t, err)
	marker := filepath.Join(t.TempDir(), "swapped-ran")
	require.NoError(t, os.WriteFile(r.opts.Driver, []byte("#!/bin/sh\n: > "+marker+"\n"), 0o755))

	err = p.Execute(context.Background(), r.env, nil)
	require.ErrorContains(t, err, "changed since it was checked")
	require.NoFileExists(t, marker, "the swapped file ran")
	require.NoFileExists(t, filepath.Join(r.h.Dir, "var/log/nvidia-installer.log"), "an installer ran")
	require.NoDirExists(t, filepath.Join(r.h.Dir, vgpu.InstallerScratch, p.Driver.SHA256), "the refused copy is left behind")

	// the plan run as it was checked: from the verified copy, which goes
	r = newRig(t, "vgpu-fresh-sriov", l40s...)
	p, err = vgpu.PlanInstall(context.Background(), r.env, r.opts)
	require.NoError(t, err)
	require.NoError(t, p.Execute(context.Background(), r.env, nil))
	require.FileExists(t, filepath.Join(r.h.Dir, "var/log/nvidia-installer.log"))
	require.Contains(t, r.h.Commands(), "sh "+filepath.Join(r.h.Dir, vgpu.InstallerScratch, p.Driver.SHA256, filepath.Base(r.opts.Driver))+" --silent --dkms")
	st, err := os.Stat(filepath.Join(r.h.Dir, vgpu.InstallerScratch))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), st.Mode().Perm())
	require.NoDirExists(t, filepath.Join(r.h.Dir, vgpu.InstallerScratch, p.Driver.SHA256))
}

// A .deb or .rpm swapped after it was checked is not installed either: the
// package manager gets a root-only copy whose hash is the one checked.
func TestInstallPackageInstallsOnlyTheFileItChecked(t *testing.T) {
	for _, format := range []string{"deb", "rpm"} {
		t.Run(format, func(t *testing.T) {
			r := packageRig(t, format, true)
			require.NoError(t, fixture.New(r.h.Dir).Remove("/usr/bin/gcc-13").Remove("/usr/sbin/dkms").Err())
			p, err := vgpu.PlanInstall(context.Background(), r.env, r.opts)
			require.NoError(t, err)
			require.Len(t, p.Driver.SHA256, 64)
			other, err := os.ReadFile(r.opts.Driver)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(r.opts.Driver, append(other, 0), 0o644))

			err = p.Execute(context.Background(), r.env, nil)
			require.ErrorContains(t, err, "changed since it was checked")
			for _, c := range r.h.Commands() {
				require.NotRegexp(t, `^(env DEBIAN_FRONTEND=noninteractive apt-get install|dpkg -i|dnf install|rpm -Uvh)`, c, "a package manager ran")
			}
			require.False(t, r.h.Root.Exists("/usr/bin/nvidia-vgpu-mgr"))
		})
	}
}
