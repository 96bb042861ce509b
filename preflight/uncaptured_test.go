package preflight_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/preflight"
)

// absentCase: scenario with the directories remove taken out; check's
// finding on subject is an error holding text, and empty with them there.
type absentCase struct {
	scenario, check, subject string
	remove                   []string
	empty                    preflight.Status
	text                     string
}

// A --root that lacks a directory the kernel always creates on the running
// system (a capture that left it out) is no evidence of what it would hold:
// the check errs and names it; with the directory there, the verdict stands.
func TestAbsentDirectoryInARootIsNoEvidence(t *testing.T) {
	for name, c := range map[string]absentCase{
		"no /sys/class/iommu": {"iommu-off-kernel", "iommu.kernel", "/sys/class/iommu",
			[]string{"/sys/class/iommu", "/sys/kernel/iommu_groups"}, preflight.Fail, "the root has no /sys/class/iommu"},
		"no /sys/kernel/iommu_groups": {"iommu-off-kernel", "iommu.groups", "0000:17:00.0",
			[]string{"/sys/class/iommu", "/sys/kernel/iommu_groups"}, preflight.Fail, "the root has no /sys/kernel/iommu_groups"},
		"no /dev":        {"vtx-disabled", "kvm.device", "/dev/kvm", []string{"/dev"}, preflight.Fail, "the root has no /dev"},
		"no /sys/module": {"hgx-h200", "driver.nouveau", "/sys/module/nouveau", []string{"/sys/module"}, preflight.Pass, "the root has no /sys/module"},
	} {
		t.Run(name, func(t *testing.T) {
			require.Equal(t, c.empty, c.finding(t, false).Status)
			f := c.finding(t, true)
			require.Equal(t, preflight.Error, f.Status, f.Message)
			require.Contains(t, f.Message, c.text)
			require.NotEmpty(t, f.Remedy)
		})
	}
}

func (c absentCase) finding(t *testing.T, absent bool) preflight.Finding {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, fixture.Build(c.scenario, dir))
	if absent {
		b := fixture.New(dir)
		for _, p := range c.remove {
			b.Remove(p)
		}
		require.NoError(t, b.Err())
	}
	_, res := runRoot(t, dir)
	f := find(res, want{c.check, c.subject, "", ""})
	require.Len(t, f, 1, "findings: %+v", res.Findings)
	return f[0]
}
