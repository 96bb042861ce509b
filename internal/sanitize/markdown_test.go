package sanitize

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestMarkdownEscapesMarkupAndHTML(t *testing.T) {
	for in, want := range map[string]string{
		"<img src=x onerror=alert(1)>": `&lt;img src=x onerror=alert(1)&gt;`,
		"</details><script>":           `&lt;/details&gt;&lt;script&gt;`,
		"[ready](https://x.invalid)":   `\[ready\](https://x.invalid)`,
		"![x](y)":                      `!\[x\](y)`,
		"**ALL HOSTS READY**":          `\*\*ALL HOSTS READY\*\*`,
		"a | b":                        `a \| b`,
		"`code`":                       "\\`code\\`",
		"a\n\n# ALL HOSTS READY":       `a\\n\\n\# ALL HOSTS READY`,
		"- item":                       `\- item`,
		"12. item":                     `12\. item`,
		"=====":                        `\=====`,
		"&lt;b&gt;":                    `&amp;lt;b&amp;gt;`,
		"$\\Huge{READY}$":              `\$\\Huge{READY}\$`,
		"~~gone~~ _em_":                `\~\~gone\~\~ \_em\_`,
		"\x1b[2Jgpu":                   `\\x1b\[2Jgpu`,
		"gpu-1.example":                "gpu-1.example",
		"10.0.0.1":                     "10.0.0.1",
		"1.":                           `1\.`,
		"---":                          `\---`,
	} {
		require.Equal(t, want, Markdown(in), "%q", in)
	}
}

func TestMarkdownIsOneLineWithoutRawHTML(t *testing.T) {
	for name, s := range hostile {
		got := Markdown(s)
		require.NotContains(t, got, "\n", name)
		require.NotContains(t, got, "<", name)
		safeForTerminal(t, got)
	}
}

func TestMarkdownCode(t *testing.T) {
	require.Equal(t, `a'b'\nc`, MarkdownCode("a`b`\nc"))
}

func TestHTML(t *testing.T) {
	got := HTML("<b onclick=\"x\">&\x1b")
	require.Equal(t, `&lt;b onclick=&#34;x&#34;&gt;&amp;\x1b`, got)
	require.False(t, strings.ContainsAny(got, "<>\""))
}
