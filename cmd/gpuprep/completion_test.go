package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/preflight"
)

// complete runs cobra's hidden __complete command (what the shell scripts
// of gpuprep completion call) and returns the candidates and directive.
func complete(t *testing.T, args ...string) ([]string, string) {
	t.Helper()
	out, errs, code := gpuprep(t, append([]string{"__complete"}, args...)...)
	require.Equal(t, 0, code, errs)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	require.NotEmpty(t, lines)
	return lines[:len(lines)-1], lines[len(lines)-1]
}

func values(cands []string) []string {
	out := make([]string, len(cands))
	for i, c := range cands {
		out[i], _, _ = strings.Cut(c, "\t")
	}
	return out
}

// The directive :4 is cobra's ShellCompDirectiveNoFileComp: a flag value
// is no file name.
func TestCompleteModeAndOutput(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"check", "--mode", ""}, []string{"container", "vm-passthrough", "vm-vgpu"}},
		{[]string{"plan", "--mode", ""}, []string{"container", "vm-passthrough", "vm-vgpu"}},
		{[]string{"grub", "show", "--mode", ""}, []string{"vm-passthrough", "vm-vgpu"}},
		{[]string{"grub", "ensure", "--mode", ""}, []string{"vm-passthrough", "vm-vgpu"}},
		{[]string{"check", "-o", ""}, []string{"text", "json", "junit", "markdown", "html", "nfd"}},
		{[]string{"fleet", "check", "--output", ""}, []string{"text", "json", "junit", "markdown", "html"}},
		{[]string{"checks", "-o", ""}, []string{"text", "json", "markdown"}},
		{[]string{"version", "-o", ""}, []string{"text", "json"}},
		{[]string{"kubevirt", "config", "-o", ""}, []string{"yaml", "json"}},
		{[]string{"operator", "values", "-o", ""}, []string{"yaml", "json"}},
	} {
		cands, dir := complete(t, tc.args...)
		require.Equal(t, tc.want, values(cands), tc.args)
		require.Equal(t, ":4", dir, tc.args)
	}
}

// Every -o of every command completes to the formats it accepts: one its
// usage does not name would be offered nowhere.
func TestCompleteOutputEveryCommand(t *testing.T) {
	root := newRootCmdWith(nil, nil, &globals{})
	seen := 0
	var visit func(path []string)
	visit = func(path []string) {
		c, _, err := root.Find(path)
		require.NoError(t, err)
		if f := c.Flag("output"); f != nil && len(path) > 0 {
			seen++
			cands, dir := complete(t, append(append([]string(nil), path...), "-o", "")...)
			require.Equal(t, ":4", dir, path)
			got := values(cands)
			require.GreaterOrEqual(t, len(got), 2, "%v -o: %q", path, f.Usage)
			for _, v := range got {
				require.Contains(t, f.Usage, v, path)
			}
		}
		for _, sub := range c.Commands() {
			if !sub.Hidden && sub.Name() != "help" {
				visit(append(append([]string(nil), path...), sub.Name()))
			}
		}
	}
	visit(nil)
	require.GreaterOrEqual(t, seen, 11, "the commands with -o")
}

// --skip and --ignore complete the registry's check IDs, one list
// element at a time (those given already are not offered again); check
// --ignore also takes all.
func TestCompleteCheckIDs(t *testing.T) {
	var ids []string
	for _, c := range preflight.All() {
		ids = append(ids, c.ID)
	}
	cands, dir := complete(t, "check", "--skip", "")
	require.Equal(t, ids, values(cands))
	require.Equal(t, ":4", dir)
	require.Contains(t, cands, "iommu.kernel\tIOMMU active in the running kernel")

	cands, _ = complete(t, "check", "--ignore", "")
	require.Equal(t, append([]string{"all"}, ids...), values(cands))

	cands, _ = complete(t, "check", "--skip", "vfio.binding,gpu.present,")
	got := values(cands)
	require.Len(t, got, len(ids)-2)
	for _, v := range got {
		require.True(t, strings.HasPrefix(v, "vfio.binding,gpu.present,"), v)
	}
	require.NotContains(t, got, "vfio.binding,gpu.present,vfio.binding")
	require.Contains(t, got, "vfio.binding,gpu.present,node.label")

	for _, args := range [][]string{{"fleet", "check", "--skip", ""}, {"agent", "--ignore", ""}} {
		cands, _ = complete(t, args...)
		require.Equal(t, ids, values(cands), args)
	}
}

// --select completes the NVIDIA GPUs of --root's host (not its NVSwitches,
// nor other devices), with their names; fleet's --select is the hosts'.
func TestCompleteSelectHostGPUs(t *testing.T) {
	root := fixtureRoot(t, "hgx-h200")
	want := []string{"0000:13:00.0", "0000:23:00.0", "0000:33:00.0", "0000:43:00.0", "0000:53:00.0", "0000:63:00.0", "0000:73:00.0", "0000:83:00.0"}
	for _, args := range [][]string{
		{"--root", root, "check", "--select", ""},
		{"vfio", "status", "--root", root, "--select", ""},
		{"vgpu", "types", "--root", root, "--select", ""},
		{"plan", "--root", root, "--select", ""},
	} {
		cands, dir := complete(t, args...)
		require.Equal(t, want, values(cands), args)
		require.Equal(t, ":4", dir)
	}
	cands, _ := complete(t, "check", "--root", root, "--select", "")
	require.Equal(t, "0000:13:00.0\tNVIDIA Corporation GH100 [H200 SXM 141GB] (nvidia)", cands[0])

	t.Setenv("GPUPREP_ROOT", fixtureRoot(t, "consumer-shared-group"))
	cands, _ = complete(t, "check", "--select", "")
	require.Len(t, cands, 1)
	require.True(t, strings.HasPrefix(cands[0], "0000:02:00.0\t"), cands[0])

	cands, dir := complete(t, "fleet", "check", "--select", "")
	require.Empty(t, cands, "not this host's GPUs")
	require.NotEqual(t, ":4", dir)
}
