package main

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/preflight"
)

// docs/commands/fleet.md says where fleet check's judged mode comes from
// as the judged line does (judgedTally): each source the code names, in
// the order it tries them, and the line's own words; docs/exit-codes.md
// names the label too. Neither says a host without --mode or inventory
// mode is judged for every mode.
func TestDocsFleetJudged(t *testing.T) {
	body, err := os.ReadFile("../../docs/commands/fleet.md")
	require.NoError(t, err)
	doc := strings.Join(strings.Fields(string(body)), " ")
	i := strings.Index(doc, "Each host is judged for `--mode`")
	require.GreaterOrEqual(t, i, 0, "fleet.md lost the sentence on the judged mode")
	para := doc[i:]
	para = para[:strings.Index(para, "`fleet run` gives")]

	// the line as the code writes it, for the doc's two examples
	one := &judgedTally{n: map[judgedKey]int{{"vm-passthrough", judgedFromFlag}: 200}}
	many := &judgedTally{unevaluated: 2, n: map[judgedKey]int{{"vm-passthrough", judgedFromInventory}: 120,
		{"container", judgedFromLabel}: 50, {"", judgedNone}: 30}}
	for _, line := range []string{one.line(), many.line()} {
		assert.Contains(t, para, "`gpuprep fleet: "+line+"`")
	}
	at := 0
	for _, src := range []string{"`--mode`", "inventory mode", "`" + preflight.WorkloadLabel + "`", "else none"} {
		k := strings.Index(para[at:], src)
		require.GreaterOrEqual(t, k, 0, "fleet.md: %q, in the order the code tries it", src)
		at += k
	}
	for _, file := range []string{"../../docs/commands/fleet.md", "../../docs/exit-codes.md"} {
		b, err := os.ReadFile(file)
		require.NoError(t, err)
		d := strings.Join(strings.Fields(string(b)), " ")
		assert.NotContains(t, d, "else for every mode", file)
		assert.NotContains(t, d, "inventory mode, else every mode", file)
		assert.NotContains(t, d, "stricter than a local `check` without `--mode`", file)
		assert.NotContains(t, d, "only when it is ready for every mode", file) // report.Verdict: none judged is unknown
		assert.NotContains(t, d, "exits 0 when every check could be evaluated", file)
	}
	codes, _ := os.ReadFile("../../docs/exit-codes.md")
	assert.Contains(t, strings.Join(strings.Fields(string(codes)), " "), "else the node's workload label's mode")
}
