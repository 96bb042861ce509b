package preflight

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/host"
)

func TestReadKernelLogFallsBackToTheJournal(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "proc/sys/kernel"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "proc/sys/kernel/dmesg_restrict"), []byte("1\n"), 0o644))
	root, err := host.NewRoot(dir)
	require.NoError(t, err)
	denied := errors.New("dmesg: read kernel buffer failed: Operation not permitted")
	journal := "Dec 01 10:00:00 gh200-01 kernel: kvm [1]: VHE mode initialized successfully\n"

	r := &host.FakeRunner{Strict: true, Responses: map[string]host.FakeResponse{
		"dmesg": {Err: denied}, "journalctl -k -b --no-pager -q": {Out: []byte(journal)}}}
	out, err := readKernelLog(root, r)
	require.NoError(t, err)
	l := parseKernelLog(func() ([]byte, error) { return out, nil })
	require.Equal(t, []string{"kvm [1]: VHE mode initialized successfully"}, l.Lines)

	r = &host.FakeRunner{Strict: true, Responses: map[string]host.FakeResponse{
		"dmesg": {Err: denied}, "journalctl -k -b --no-pager -q": {Err: errors.New("No journal files were found.")}}}
	_, err = readKernelLog(root, r)
	require.ErrorContains(t, err, "dmesg is restricted to root (kernel.dmesg_restrict = 1)")
	require.ErrorContains(t, err, "journalctl -k: No journal files were found.")

	// never on a root that is not the running system
	r = &host.FakeRunner{}
	_, err = liveKernelLog(root, r)()
	require.ErrorContains(t, err, "not the running system")
	require.Empty(t, r.Calls)
}
