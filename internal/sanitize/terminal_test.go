package sanitize

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// hostile are strings a host can put in its report to act on a terminal.
var hostile = map[string]string{
	"csi clear screen":  "gpu-1\x1b[2J\x1b[H",
	"osc title":         "gpu-1\x1b]0;ALL HOSTS READY\x07",
	"osc8 link":         "\x1b]8;;https://example.invalid\x1b\\click\x1b]8;;\x1b\\",
	"cr repaint":        "gpu-1 not-ready\rgpu-1 ready    ",
	"newline fake line": "gpu-1\nALL HOSTS READY",
	"c1 csi":            "gpu-1\u009b2J",
	"nel":               "a\u0085b",
	"raw c1 byte":       "gpu-1\x9b2J",
	"bidi override":     "gpu-1\u202eydaer\u202c",
	"bidi isolate":      "\u2066gpu\u2069\u200f",
	"line separator":    "a\u2028b\u2029c",
	"nul del bs":        "a\x00b\x7fc\x08d",
	"tab":               "a\tb",
}

// safeForTerminal reports what in s a terminal would act on.
func safeForTerminal(t *testing.T, s string) {
	t.Helper()
	require.True(t, utf8.ValidString(s), "%q", s)
	for _, r := range s {
		require.False(t, unsafeRune(r), "%q holds %U", s, r)
	}
}

func TestTerminalEscapesEveryControl(t *testing.T) {
	for name, s := range hostile {
		got := Terminal(s)
		safeForTerminal(t, got)
		require.NotEqual(t, s, got, name)
		require.Equal(t, got, Terminal(got), "%s: idempotent", name)
	}
	require.Equal(t, `gpu-1\x1b]0;ALL HOSTS READY\x07`, Terminal(hostile["osc title"]))
	require.Equal(t, `gpu-1 not-ready\rgpu-1 ready    `, Terminal(hostile["cr repaint"]))
	require.Equal(t, `gpu-1\u009b2J`, Terminal(hostile["c1 csi"]))
	require.Equal(t, `gpu-1\x9b2J`, Terminal(hostile["raw c1 byte"]))
	require.Equal(t, `gpu-1\u202eydaer\u202c`, Terminal(hostile["bidi override"]))
	require.Equal(t, `a\x00b\x7fc\x08d`, Terminal(hostile["nul del bs"]))
	require.Equal(t, `a\tb`, Terminal(hostile["tab"]))
}

func TestTerminalKeepsPrintableText(t *testing.T) {
	for _, s := range []string{"", "hgx-node-01", `C:\path "quoted"`, "2 × NVIDIA H200 → fix: ✓ ⚠ …", "ünïcödé 日本語", "\ufffd"} {
		require.Equal(t, s, Terminal(s))
	}
}

func TestTerminalHugeString(t *testing.T) {
	s := strings.Repeat("\x1b[2J", 1<<18)
	got := Terminal(s)
	require.Equal(t, strings.Repeat(`\x1b[2J`, 1<<18), got)
}

func TestLinesKeepsNewlinesOnly(t *testing.T) {
	require.Equal(t, "a\\x1b[2J\nRun 'gpuprep --help'\\r", Lines("a\x1b[2J\nRun 'gpuprep --help'\r"))
	require.Equal(t, "plain\ntwo lines", Lines("plain\ntwo lines"))
}
