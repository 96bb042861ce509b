package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fleet"
)

// A fleet check killed (SIGKILL, a real process: this test binary run as
// the helper below) while one host still runs leaves a --report file that
// gpuprep report render reads: the five hosts that finished, "incomplete:
// 5 of 6 hosts, cut off" on stderr, exit 3.
func TestFleetReportKilledMidRun(t *testing.T) {
	file := filepath.Join(t.TempDir(), "fleet.json")
	cmd := exec.Command(os.Args[0], "-test.run=^TestFleetReportKilledHelper$")
	cmd.Env = append(os.Environ(), "GPUPREP_KILLED_REPORT="+file, "TMPDIR="+t.TempDir())
	require.NoError(t, cmd.Start())
	killed := false
	defer func() {
		if !killed { // the test failed before it killed it: its exit is not looked at
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}()
	var seen int
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		b, _ := os.ReadFile(file)
		if seen = len(hostsSoFar(t, b)); seen == 5 {
			break
		}
	}
	require.Equal(t, 5, seen, "the five hosts that answered are in the file")
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	killed = true
	err := cmd.Wait()
	require.Error(t, err, "the helper was killed, not finished")

	var out, errb bytes.Buffer
	code := execute([]string{"report", "render", file}, &out, &errb)
	assert.Equal(t, 3, code, errb.String())
	assert.Contains(t, errb.String(), "incomplete: 5 of 6 hosts, cut off")
	for i := 1; i < 6; i++ {
		assert.Contains(t, out.String(), "node-0000"+string(rune('0'+i)))
	}
	assert.NotContains(t, out.String(), "node-00000")
	assert.Contains(t, out.String(), "Interrupted")
}

// TestFleetReportKilledHelper is the fleet check TestFleetReportKilledMidRun
// kills: six hosts into --report GPUPREP_KILLED_REPORT, the first never
// answering.
func TestFleetReportKilledHelper(t *testing.T) {
	file := os.Getenv("GPUPREP_KILLED_REPORT")
	if file == "" {
		t.Skip("run by TestFleetReportKilledMidRun")
	}
	hosts, r := fakeFleet(6, cannedCheck(t))
	remote := r.Remote
	r.Remote = func(ctx context.Context, h *fleet.Host, args []string) (fleet.Output, error) {
		if h == hosts[0] {
			select {} // until killed
		}
		return remote(ctx, h, args)
	}
	c := &fleetCmd{}
	_, err := c.gather(context.Background(), r, hosts, nil, file)
	t.Fatalf("gather returned (%v): it should have been killed first", err)
}
