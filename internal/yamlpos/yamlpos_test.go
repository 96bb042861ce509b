package yamlpos

import (
	"testing"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
)

// TestLocate: the line of the problem, where yaml.v3 names the line above
// the block it was in (0-based), for a parser error; a scanner error's
// line (yaml.v3 gets it right) is kept.
func TestLocate(t *testing.T) {
	for _, tc := range []struct {
		name, text  string
		yaml3, line int
		msg         string
	}{
		// line 4 "   z: 3" is indented 3 in the list item whose keys are at 4;
		// yaml.v3 names the list's line (2) less one
		{"parser error", "a:\n  - x: 1\n    y: 2\n   z: 3\n", 1, 4, "did not find expected '-' indicator"},
		// line 3 "    c: 2" continues b's value on line 2 as a key
		{"scanner error", "a:\n  b: 1\n    c: 2\n", 3, 3, "mapping values are not allowed in this context"},
		// line 3 " c" (indented 1) ends the mapping at 2; no newline after it
		{"no newline at the end", "a:\n  b: 1\n c", 2, 3, "did not find expected key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var n yaml.Node
			err := yaml.Unmarshal([]byte(tc.text), &n)
			require.Error(t, err)
			l, _ := split(err)
			require.Equal(t, tc.yaml3, l, "what yaml.v3 says: %v", err)
			require.Equal(t, &Error{Line: tc.line, Msg: tc.msg}, Locate([]byte(tc.text), err))
		})
	}
}
