package sanitize

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Through NewWriter no control reaches the terminal but the newline and
// the tab; what has none is written byte for byte.
func TestWriterEscapesControlsKeepsLinesAndTabs(t *testing.T) {
	for name, s := range hostile {
		var b bytes.Buffer
		w := NewWriter(&b)
		n, err := fmt.Fprintf(w, "device: %s\n", s)
		require.NoError(t, err)
		require.Equal(t, len("device: \n")+len(s), n, name)
		got := b.String()
		require.True(t, strings.HasPrefix(got, "device: ") && strings.HasSuffix(got, "\n"), name)
		safeForTerminal(t, strings.NewReplacer("\n", "", "\t", "").Replace(got))
		require.Equal(t, strings.Count(s, "\n")+1, strings.Count(got, "\n"), name)
	}
	var b bytes.Buffer
	fmt.Fprint(NewWriter(&b), "--- a/etc/default/grub\n+\tGRUB_CMDLINE_LINUX=\"x\x1b[2J\"\r\n")
	require.Equal(t, "--- a/etc/default/grub\n+\tGRUB_CMDLINE_LINUX=\"x\\x1b[2J\"\\r\n", b.String())
}

func TestWriterKeepsBenignOutput(t *testing.T) {
	var b bytes.Buffer
	in := "GPU           NAME\n0000:17:00.0  NVIDIA H200 → ✓ ünïcödé 日本語 \ufffd\n\tindented\n"
	fmt.Fprint(NewWriter(&b), in)
	require.Equal(t, in, b.String())
	require.Equal(t, NewWriter(&b), NewWriter(NewWriter(&b)), "not wrapped twice")
}

func TestBlock(t *testing.T) {
	require.Equal(t, "a\\x1b]0;x\\x07\n\tb\\r\\u202e", Block("a\x1b]0;x\x07\n\tb\r\u202e"))
	require.Equal(t, "plain\n\ttext", Block("plain\n\ttext"))
}
