package provision_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/preflight"
	"github.com/gpuprep/gpuprep/provision"
	"github.com/gpuprep/gpuprep/vgpu"
)

// The nfd-timer step (--nfd-timer): planned as the root-owned gpuprep, the
// two units and enabling the timer; carried out with systemctl simulated
// (vgputest.Host); planned no more once done; undone by rollback (the
// files gone, the timer disabled).
func TestStepNFDTimer(t *testing.T) {
	n, v := newSystemdNode(t, "turing-multifunction")
	bin := fakeGpuprep(t)
	o := provision.Options{Mode: preflight.VMPassthrough, Runner: v, NFDTimer: true, Binary: bin}
	before := n.tree(t)
	enabled := filepath.Join(n.dir, "run/fake-systemd/is-enabled", provision.NFDTimerName)

	// plan: what a dry run shows, nothing changed
	p := planWith(t, n, o)
	s := p.Step(provision.StepNFDTimer)
	require.NotNil(t, s)
	require.Equal(t, p.Steps[len(p.Steps)-1], s, "the last step")
	require.Equal(t, "install the gpuprep-nfd.timer that refreshes Node Feature Discovery's feature file every 5 minutes", s.Title)
	require.Len(t, s.Notes, 1)
	require.Contains(t, s.Notes[0], "installs this gpuprep (SHA-256 ")
	require.Contains(t, s.Notes[0], "as "+vgpu.InstalledBinary+", root's own")
	require.Len(t, s.Files, 2)
	require.Equal(t, provision.NFDService, s.Files[0].Path)
	require.Equal(t, string(provision.NFDServiceContent()), string(s.Files[0].New))
	require.Equal(t, provision.NFDTimer, s.Files[1].Path)
	require.Equal(t, string(provision.NFDTimerContent()), string(s.Files[1].New))
	require.Equal(t, []string{"systemctl daemon-reload", "systemctl enable --now " + provision.NFDTimerName}, s.Commands)
	require.Equal(t, before, n.tree(t), "plan changes nothing")
	require.Empty(t, v.h.Commands(), "plan runs nothing")

	// run
	oc, err := provision.Apply(context.Background(), n.env, p, provision.ApplyOptions{})
	require.NoError(t, err)
	require.Contains(t, stepIDs(oc), "nfd-timer done")
	want, err := os.ReadFile(bin)
	require.NoError(t, err)
	require.Equal(t, string(want), n.read(t, vgpu.InstalledBinary))
	require.Equal(t, string(provision.NFDTimerContent()), n.read(t, provision.NFDTimer))
	require.DirExists(t, filepath.Join(n.dir, provision.NFDFeatureDir))
	require.FileExists(t, enabled)

	// idempotent: the units as written, the timer enabled, the same binary
	require.Nil(t, planWith(t, n, o).Step(provision.StepNFDTimer))
	// a unit edited since is planned back, with nothing else
	require.NoError(t, os.WriteFile(filepath.Join(n.dir, provision.NFDTimer), []byte("[Timer]\nOnCalendar=hourly\n"), 0o644))
	s = planWith(t, n, o).Step(provision.StepNFDTimer)
	require.NotNil(t, s)
	require.Len(t, s.Files, 1)
	require.Equal(t, provision.NFDTimer, s.Files[0].Path)
	require.Empty(t, s.Notes, "the binary is installed already")
	require.NoError(t, os.WriteFile(filepath.Join(n.dir, provision.NFDTimer), provision.NFDTimerContent(), 0o644))

	// undo
	res := n.rollback(t, provision.RollbackOptions{})
	require.NotEmpty(t, res.Undone)
	for _, f := range []string{provision.NFDService, provision.NFDTimer, vgpu.InstalledBinary} {
		_, err := os.Stat(filepath.Join(n.dir, f))
		require.ErrorIs(t, err, os.ErrNotExist, f)
	}
	require.NoFileExists(t, enabled, "the timer disabled")
}
