package main

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestReadmeIsANewcomersPage holds the README to what issue #21 asked of
// it, a page a newcomer reads in five minutes, the reference in docs/: at
// most 300 lines, no paragraph over 150 words (it had one of 1,226), no
// table cell over 200 characters (it had cells of 860), no change history
// ("Before this, …"), and its sections: what gpuprep is for, the two
// set-up commands, the tour, install, where to read on.
var linkTarget = regexp.MustCompile(`\]\([^)]*\)`)

func TestReadmeIsANewcomersPage(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	text := string(b)
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	require.LessOrEqual(t, len(lines), 300, "README.md: move reference material to docs/")
	inCode := false
	var para []string
	flush := func(at int) {
		if n := len(strings.Fields(strings.Join(para, " "))); n > 150 {
			t.Errorf("README.md:%d: a paragraph of %d words (at most 150)", at, n)
		}
		para = nil
	}
	for i, l := range lines {
		if strings.HasPrefix(l, "```") {
			inCode = !inCode
			flush(i + 1)
			continue
		}
		if inCode {
			continue
		}
		if strings.HasPrefix(l, "|") {
			for _, cell := range strings.Split(strings.Trim(l, "|"), "|") {
				shown := linkTarget.ReplaceAllString(strings.TrimSpace(cell), "]") // as read: link targets aside
				require.LessOrEqual(t, len(shown), 200, "README.md:%d: a table cell", i+1)
			}
		}
		if strings.TrimSpace(l) == "" || strings.HasPrefix(l, "#") || strings.HasPrefix(l, "|") {
			flush(i + 1)
			continue
		}
		para = append(para, l)
		require.NotContains(t, l, "Before this", "README.md:%d: change history belongs in git log", i+1)
	}
	flush(len(lines))
	for _, h := range []string{"## The two commands", "## A five-minute tour", "## Install", "## Where to read on"} {
		require.Contains(t, text, "\n"+h+"\n")
	}
}
