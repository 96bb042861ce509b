package sanitize

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A host name or a verdict with an invisible character in it does not look
// like the one without: each is shown escaped.
func TestTerminalEscapesInvisibleCharacters(t *testing.T) {
	for in, want := range map[string]string{
		"gpu-1\u200b":                         `gpu-1\u200b`,
		"gpu\u200c-1\u200d":                   `gpu\u200c-1\u200d`,
		"READY\u2060\u2061":                   `READY\u2060\u2061`,
		"\u2062\u2063\u2064gpu-1":             `\u2062\u2063\u2064gpu-1`,
		"\ufeffgpu-1":                         `\ufeffgpu-1`,
		"gpu\u00ad-1":                         `gpu\u00ad-1`,
		"gpu-1\u180e":                         `gpu-1\u180e`,
		"gpu-1\u206a\u206f":                   `gpu-1\u206a\u206f`,
		"ready\U000e0001\U000e0041\U000e007f": `ready\U000e0001\U000e0041\U000e007f`,
		"gpu-1\u3164\u115f\u1160\uffa0":       `gpu-1\u3164\u115f\u1160\uffa0`,
		"\ufff9a\ufffab\ufffb":                `\ufff9a\ufffab\ufffb`,
	} {
		require.Equal(t, want, Terminal(in), "%q", in)
		require.Equal(t, want, Terminal(want), "%q: idempotent", in)
		require.Equal(t, want, Block(in), "%q", in)
	}
}

// What is visible stays as it is: accents, CJK, combining marks, emoji with
// a variation selector, the no-break space.
func TestTerminalKeepsVisibleNonASCII(t *testing.T) {
	for _, s := range []string{"Ä\u0301b", "日本語", "✓\ufe0f", "a\u00a0b", "naïve café", "Привет", "مرحبا"} {
		require.Equal(t, s, Terminal(s))
	}
}
