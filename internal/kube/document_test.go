package kube

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
)

// A note can neither add keys nor take more than its line, whatever line
// break or control it holds.
func TestWriteYAMLNotesAreOneCommentLineEach(t *testing.T) {
	v := &OperatorValues{}
	v.SandboxWorkloads.Enabled = true
	notes := []string{
		"host a\nmetadata:\n  ownerReferences: []",
		"host b\r\ntoolkit:\r\n  repository: evil.invalid",
		"host c\u0085toolkit: {repository: evil.invalid}\u2028metadata: {}",
		"  ",
		"# already a comment\n---\nkind: Pod",
	}
	var b bytes.Buffer
	require.NoError(t, WriteYAML(&b, v, notes))
	var got, want map[string]any
	require.NoError(t, yaml.Unmarshal(b.Bytes(), &got))
	var plain bytes.Buffer
	require.NoError(t, yaml.NewEncoder(&plain).Encode(v))
	require.NoError(t, yaml.Unmarshal(plain.Bytes(), &want))
	require.Equal(t, want, got)
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	require.Len(t, lines, 4+strings.Count(plain.String(), "\n"), b.String())
	for _, l := range lines[:4] {
		require.True(t, strings.HasPrefix(l, "#"), l)
	}
	require.Equal(t, `# host a\nmetadata:\n  ownerReferences: []`, lines[0])
}
