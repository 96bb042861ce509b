package preflight_test

import (
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/pci"
	"github.com/gpuprep/gpuprep/preflight"
	"github.com/gpuprep/gpuprep/vfio"
)

var selectRe = regexp.MustCompile(`--select (\S+?)[,)\s]`)

// groupFindings returns the iommu.groups findings, and checks that none
// claims a fix command and that every selection a remedy suggests is one
// gpuprep vfio bind accepts.
func groupFindings(t *testing.T, env *preflight.Env, res *preflight.Result) []preflight.Finding {
	t.Helper()
	var out []preflight.Finding
	for _, f := range res.Findings {
		if f.Check != "iommu.groups" {
			continue
		}
		out = append(out, f)
		require.False(t, f.Fixable, "%s: no command makes a group viable", f.Subject)
		require.Empty(t, f.FixCommand, f.Subject)
		m := selectRe.FindAllStringSubmatch(f.Remedy+" ", -1)
		if len(m) == 0 {
			continue
		}
		var sels []string
		for _, s := range m {
			sels = append(sels, s[1])
		}
		sel, err := pci.ParseSelector(sels)
		require.NoError(t, err)
		_, err = vfio.NewPlan(env.Root, env.Inv, sel, vfio.Options{})
		require.NoError(t, err, "%s: remedy %q", f.Subject, f.Remedy)
	}
	return out
}

// The remedy for a GPU that shares its group with the host's USB, SATA and
// NIC once said to --select them too: a plan that took the host's disk,
// network and keyboard. It says to give the GPU a group of its own, and why
// the others stay.
func TestGroupRemedyKeepsHostControllersOnTheHost(t *testing.T) {
	env, res := run(t, "consumer-shared-group")
	fs := groupFindings(t, env, res)
	require.Len(t, fs, 1)
	f := fs[0]
	require.Equal(t, preflight.Fail, f.Status)
	require.NotContains(t, f.Remedy, "--select")
	require.Contains(t, f.Remedy, "move the GPU to a slot with its own IOMMU group")
	require.Contains(t, f.Remedy, "enable ACS")
	for _, s := range []string{
		"0000:00:14.0 (USB controller, driver xhci_hcd; drives host USB ports",
		"0000:00:17.0 (SATA controller, driver ahci; holds host storage)",
		"0000:03:00.0 (Ethernet controller, driver igc; carries host network traffic)",
	} {
		require.Contains(t, f.Remedy, s)
	}
}

// Selected anyway, the check says they will be refused.
func TestGroupRemedyWhenHostControllersAreSelected(t *testing.T) {
	env, res := run(t, "consumer-shared-group", "10de", "0000:00:14.0", "0000:00:17.0", "0000:03:00.0")
	fs := groupFindings(t, env, res)
	for _, f := range fs {
		switch f.Subject {
		case "0000:02:00.0":
			require.Equal(t, preflight.Warn, f.Status)
			require.Contains(t, f.Remedy, "do not select 0000:00:14.0 (USB controller")
			require.Contains(t, f.Remedy, "0000:00:17.0 (SATA controller, driver ahci; holds host storage)")
			require.Contains(t, f.Remedy, "gpuprep vfio bind refuses them")
		case "0000:00:17.0":
			require.Contains(t, f.Remedy, "do not select 0000:00:17.0 (SATA controller")
		}
		require.NotContains(t, f.Remedy, "select the other devices")
	}
}

// Where the other member is a GPU, selecting both is the remedy, and it is
// one vfio bind takes.
func TestGroupRemedySelectsAnotherGPU(t *testing.T) {
	env, res := run(t, "two-gpus-one-group", "0000:03:00.0")
	fs := groupFindings(t, env, res)
	require.Len(t, fs, 1)
	require.Equal(t, preflight.Fail, fs[0].Status)
	require.Contains(t, fs[0].Remedy, "select the other devices too so that they go to the same VM (--select 0000:03:00.0 --select 0000:04:00.0)")

	env, res = run(t, "two-gpus-one-group")
	for _, f := range groupFindings(t, env, res) {
		require.Equal(t, preflight.Warn, f.Status)
		require.Empty(t, f.Remedy)
	}
}
