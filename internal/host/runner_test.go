package host

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// A long output's tail is cut on a character boundary: the message stays
// valid UTF-8 (a byte cut split "é" and made the error unprintable as JSON
// text).
func TestOutputTailKeepsUTF8(t *testing.T) {
	out := []byte(strings.Repeat("é", 1500) + "x") // 3001 bytes: the cut (at 1001) falls inside a character
	tail := OutputTail(out)
	require.True(t, utf8.ValidString(tail), "%q", tail[:10])
	require.True(t, strings.HasPrefix(tail, "\n…é"))
	require.LessOrEqual(t, len(tail), len("\n…")+2000)
	require.Equal(t, "\nshort", OutputTail([]byte(" short \n")))
	require.Equal(t, "", OutputTail([]byte("  \n")))
}
