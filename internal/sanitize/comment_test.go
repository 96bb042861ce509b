package sanitize

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
)

// A note built from host strings stays one comment line: parsed back, the
// document has the same keys with or without it.
func TestCommentStaysOneYAMLLine(t *testing.T) {
	for name, s := range map[string]string{
		"newline":   "note\nmetadata:\n  ownerReferences: []",
		"cr":        "note\rtoolkit:\r  repository: evil.invalid",
		"crlf":      "note\r\ntoolkit: {repository: evil.invalid}",
		"nel":       "note\u0085toolkit: {repository: evil.invalid}",
		"ls":        "note\u2028toolkit: {repository: evil.invalid}",
		"ps":        "note\u2029toolkit: {repository: evil.invalid}",
		"bom+nul":   "note\x00\ufefftoolkit: x",
		"bad utf-8": "note\xff\xfe",
	} {
		c := Comment(s)
		require.NotContains(t, c, "\n", name)
		doc := "# " + c + "\nspec: {}\n"
		var m map[string]any
		require.NoError(t, yaml.Unmarshal([]byte(doc), &m), name)
		require.Equal(t, map[string]any{"spec": map[string]any{}}, m, name)
		require.True(t, strings.HasPrefix(c, "note"), name)
	}
	require.Equal(t, "a note", Comment("  a note \n"))
}
