package preflight_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/preflight"
)

// What cannot be read about the running kernel's modules is an error that
// names what is missing, never a fail: a capture without osrelease or
// /lib/modules says nothing about whether vfio-pci can be loaded.
func TestVFIOModulesWithoutEvidence(t *testing.T) {
	const kver = "6.8.0-45-generic"
	base := "/lib/modules/" + kver
	for _, c := range []struct {
		name, scenario string
		edit           func(b *fixture.Builder)
		subject        string
		status         preflight.Status
		text           string
	}{
		{"no kernel release, no /lib/modules", "capture-no-modules", func(*fixture.Builder) {},
			"/proc/sys/kernel/osrelease", preflight.Error, "/proc/sys/kernel/osrelease not readable"},
		{"kernel release, no /lib/modules", "capture-no-modules", func(b *fixture.Builder) { b.File("/proc/sys/kernel/osrelease", kver+"\n") },
			base, preflight.Error, base + " is missing"},
		{"other kernels' modules only", "capture-no-modules", func(b *fixture.Builder) {
			b.File("/proc/sys/kernel/osrelease", kver+"\n").Mkdir("/lib/modules/6.8.0-50-generic")
		}, base, preflight.Error, "/lib/modules holds 6.8.0-50-generic"},
		{"modules.dep missing, modules.builtin there", "hgx-h200", func(b *fixture.Builder) { b.Remove(base + "/modules.dep") },
			base, preflight.Error, base + "/modules.dep missing"},
		{"modules.builtin missing, vfio_pci not in modules.dep", "hgx-h200", func(b *fixture.Builder) {
			b.Remove(base+"/modules.builtin").File(base+"/modules.dep", "kernel/drivers/vfio/vfio.ko:\nkernel/drivers/vfio/vfio_iommu_type1.ko:\n")
		}, base, preflight.Error, "cannot tell whether vfio_pci can be loaded"},
		{"no index, but all three in the running kernel", "capture-no-modules", func(b *fixture.Builder) {
			b.File("/proc/sys/kernel/osrelease", kver+"\n").Module("vfio", nil).Module("vfio_iommu_type1", nil).BuiltinModule("vfio_pci")
		}, base, preflight.Pass, "vfio_pci (in the running kernel: /sys/module/vfio_pci)"},
		{"a hostile release, refused by name, not read", "hgx-h200", func(b *fixture.Builder) {
			b.File("/proc/sys/kernel/osrelease", "../../etc\n").File("/etc/modules.dep", "kernel/drivers/vfio/vfio.ko:\nkernel/drivers/vfio/vfio_iommu_type1.ko:\nkernel/drivers/vfio/pci/vfio-pci.ko:\n")
		}, "/proc/sys/kernel/osrelease", preflight.Error, `kernel release "../../etc" refused`},
		{"index readable, vfio_pci really missing", "hgx-h200", func(b *fixture.Builder) {
			b.File(base+"/modules.dep", "kernel/drivers/vfio/vfio.ko:\nkernel/drivers/vfio/vfio_iommu_type1.ko:\n")
		}, base + "/modules.dep", preflight.Fail, "missing for kernel " + kver + ": vfio_pci"},
	} {
		dir := t.TempDir()
		require.NoError(t, fixture.Build(c.scenario, dir))
		b := fixture.New(dir)
		c.edit(b)
		require.NoError(t, b.Err())
		_, res := runRoot(t, dir)
		f := find(res, want{"vfio.modules", c.subject, "", ""})
		require.Len(t, f, 1, "%s: findings: %+v", c.name, res.Findings)
		require.Equal(t, c.status, f[0].Status, "%s: %s", c.name, f[0].Message)
		require.Contains(t, f[0].Message, c.text, c.name)
		require.NotContains(t, f[0].Message, "/lib/modules//", c.name)
		if c.status == preflight.Error {
			require.NotEmpty(t, f[0].Remedy, c.name)
		}
	}
}
