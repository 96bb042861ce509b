package main

import (
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fleet/sshdtest"
)

// Every gpuprep command pays for gpuprep's own package initialisation
// before it starts, and so does the check a fleet run starts on each host
// (the process start is most of a warm fleet run's cost per host; see
// bench/README.md): each package's init stays small. Allocations are
// counted, not time, so the test is deterministic. It caught regexps
// compiled at start-up in internal/fleet (643 allocations, 0.6 ms).
func TestOwnPackageInitsStaySmall(t *testing.T) {
	cmd := exec.Command(sshdtest.Gpuprep(t), "--version")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	re := regexp.MustCompile(`(?m)^init (github\.com/gpuprep/gpuprep/\S+) @\S+ ms, \S+ ms clock, (\d+) bytes, (\d+) allocs$`)
	found := re.FindAllStringSubmatch(string(out), -1)
	require.GreaterOrEqual(t, len(found), 5, "inittrace lists gpuprep's packages:\n%s", out)
	for _, m := range found {
		bytes, _ := strconv.Atoi(m[2])
		allocs, _ := strconv.Atoi(m[3])
		assert.LessOrEqual(t, allocs, 64, "%s: %d allocations at start-up (compile regexps on first use: see lazyRegexp)", m[1], allocs)
		assert.LessOrEqual(t, bytes, 16<<10, "%s: %d bytes allocated at start-up", m[1], bytes)
	}
}

// `gpuprep check …` builds the check command alone (see executeWith); it
// behaves as check in the whole tree does, which `gpuprep --root DIR check
// …` (the root's flag first) still builds: the same output, errors, help
// and exit codes.
func TestCheckAloneIsCheckInTheTree(t *testing.T) {
	root := fixtureRoot(t, "hgx-h200")
	for _, args := range [][]string{
		{"-o", "json"},
		{"--mode", "vm-passthrough"},
		{"-o", "junit", "--select", "0000:1b:00.0"},
		{"--help"},
		{"--no-such-flag"},
		{"extra-argument"},
		{"--mode", "nope"},
		{"-o", "yaml"},
	} {
		alone := append([]string{"check", "--root", root}, args...)
		inTree := append([]string{"--root", root, "check"}, args...)
		c1, out1, err1 := runCLI(alone...)
		c2, out2, err2 := runCLI(inTree...)
		assert.Equal(t, c2, c1, "%q: exit code", args)
		assert.Equal(t, out2, out1, "%q: stdout", args)
		assert.Equal(t, err2, err1, "%q: stderr", args)
	}
	g := &globals{checkOnly: true}
	var names []string
	for _, c := range newRootCmdWith(io.Discard, io.Discard, g).Commands() {
		names = append(names, c.Name())
	}
	assert.Equal(t, []string{"check"}, names)
}
