package fleet

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var hostileValues = []string{
	"plain", "", "with space", "a'b", "'", "''", `"; rm -rf / #`, "; rm -rf /", "$(touch /tmp/x)", "`id`",
	"$HOME", "${IFS}", "a\nb", "\n; id\n", "*", "~root", "-n", "--root=/", `\`, `\'`, "!!", "a\tb\rc", "é ü 日本",
}

// Every value comes back from a real shell as one literal word.
func TestQuoteArgsThroughRealShells(t *testing.T) {
	for _, sh := range []string{"/bin/sh", "/bin/bash", "/bin/dash"} {
		if _, err := exec.LookPath(sh); err != nil {
			continue
		}
		cmd, err := QuoteArgs(append([]string{"printf", `%s\0`}, hostileValues...)...)
		require.NoError(t, err)
		out, err := exec.Command(sh, "-c", cmd).Output()
		require.NoError(t, err, sh)
		got := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
		assert.Equal(t, hostileValues, got, sh)
	}
}

func TestQuote(t *testing.T) {
	assert.Equal(t, `'a'\''b'`, Quote("a'b"))
	assert.Equal(t, `''`, Quote(""))
	_, err := QuoteArgs("a\x00b")
	assert.ErrorContains(t, err, "NUL")
}
