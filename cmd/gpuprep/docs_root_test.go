package main

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDocsRootQuotesTheRefusals: the two refusals docs/root.md quotes are
// what gpuprep prints, word for word (DIR standing for the root).
func TestDocsRootQuotesTheRefusals(t *testing.T) {
	body, err := os.ReadFile("../../docs/root.md")
	require.NoError(t, err)
	for _, args := range [][]string{
		{"vfio", "bind", "--persist", "--system-disk"},
		{"vgpu", "apply", "-f", "/nonexistent.yaml", "-c", "x"},
	} {
		root := fixtureRoot(t, "boot-grub-debian")
		_, errs, code := gpuprepWith(t, withoutFixtureRoots(), append(args, "--root", root)...)
		require.Equal(t, exitUsage, code, errs)
		line := strings.ReplaceAll(strings.TrimSpace(errs), root, "DIR")
		require.Contains(t, string(body), "   "+line+"\n", "docs/root.md does not quote what %v prints", args)
	}
}
