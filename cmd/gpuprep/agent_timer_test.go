package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/provision"
	"github.com/gpuprep/gpuprep/vfio"
	"github.com/gpuprep/gpuprep/vgpu"
)

// enabledTimer answers systemctl is-enabled as a node where the commands
// recorded by the kernel simulator ran: enabled once enabled.
type enabledTimer struct{ k host.Runner }

func (r enabledTimer) Run(ctx context.Context, argv ...string) ([]byte, error) {
	if len(argv) == 3 && argv[1] == "is-enabled" && argv[2] == provision.NFDTimerName {
		return []byte("enabled\n"), nil
	}
	return r.k.Run(ctx, argv...)
}

// apply --nfd-timer: planned (plan shows the units' diffs and
// changes nothing), installed with the root-owned gpuprep it runs,
// journalled, idempotent, and taken away whole by rollback (the timer
// disabled and stopped first).
func TestApplyNFDTimerInstallsAndRollsBack(t *testing.T) {
	d := realDeps()
	kern := simulatedKernel(t, d)
	root := fixtureRoot(t, "vfio-bound")
	orig := tree(t, root)
	self := fakeGpuprep(t)
	d.gpuprepBinary = func() string { return self }

	out, errs, code := gpuprepWith(t, d, "plan", "--root", root, "--mode", "vm-passthrough", "--nfd-timer")
	require.Equal(t, 0, code, out+errs)
	require.Contains(t, out, "+++ b"+provision.NFDTimer)
	require.Contains(t, out, "+ExecStart="+vgpu.InstalledBinary+" agent --once --feature-file default --interval 5m")
	require.Contains(t, out, "systemctl enable --now "+provision.NFDTimerName)
	require.Equal(t, orig, tree(t, root), "plan changes nothing")

	out, errs, code = gpuprepWith(t, d, "apply", "--root", root, "--mode", "vm-passthrough", "--nfd-timer", "--yes")
	require.Equal(t, 0, code, out+errs)
	timer, err := os.ReadFile(filepath.Join(root, provision.NFDTimer))
	require.NoError(t, err)
	require.Equal(t, string(provision.NFDTimerContent()), string(timer))
	svc, err := os.ReadFile(filepath.Join(root, provision.NFDService))
	require.NoError(t, err)
	require.NotContains(t, string(svc), self, "the service runs the root-owned copy, never the file gpuprep ran from")
	require.Equal(t, sha256Hex(t, self), sha256Hex(t, filepath.Join(root, vgpu.InstalledBinary)))
	require.DirExists(t, filepath.Join(root, provision.NFDFeatureDir))
	var ran []string
	for _, c := range (*kern).Commands {
		ran = append(ran, strings.Join(c, " "))
	}
	require.Contains(t, ran, "systemctl enable --now "+provision.NFDTimerName)
	n := journalLen(t, root)

	// in place: nothing to do, nothing journalled
	oldK := d.provisionKernel
	d.provisionKernel = func(r *host.Root) (vfio.Sysfs, host.Runner, error) {
		s, run, err := oldK(r)
		return s, enabledTimer{run}, err
	}
	out, errs, code = gpuprepWith(t, d, "apply", "--root", root, "--mode", "vm-passthrough", "--nfd-timer", "--yes")
	require.Equal(t, 0, code, out+errs)
	require.NotContains(t, out, provision.NFDTimerName)
	require.Equal(t, n, journalLen(t, root))

	out, errs, code = gpuprepWith(t, d, "rollback", "--root", root)
	require.Equal(t, 0, code, out+errs)
	require.Equal(t, orig, tree(t, root), "units, binary and the directories made for them are gone")
	ran = nil
	for _, c := range (*kern).Commands {
		ran = append(ran, strings.Join(c, " "))
	}
	require.Contains(t, ran, "systemctl disable --now "+provision.NFDTimerName)
	require.Equal(t, "systemctl daemon-reload", ran[len(ran)-1])
}

// The units: the service is the agent's --once run of the root-owned
// gpuprep, writing only the features.d directory; the timer repeats it.
func TestNFDUnits(t *testing.T) {
	svc := string(provision.NFDServiceContent())
	require.Contains(t, svc, "\nType=oneshot\n")
	require.Contains(t, svc, "\nProtectSystem=strict\nReadWritePaths="+provision.NFDFeatureDir+"\n")
	require.Equal(t, NFDFeatureFile, provision.NFDFeatureDir+"/gpuprep")
	timer := string(provision.NFDTimerContent())
	require.Contains(t, timer, "\nOnUnitActiveSec=5min\n")
	require.Contains(t, timer, "\nWantedBy=timers.target\n")
}
