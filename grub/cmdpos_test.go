package grub

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// bashCommandNames asks bash which of the unsupported builtins stmt runs
// as a command: each is made an alias (bash expands an alias only where it
// reads a command name: parse.y, command_token_position), stmt is parsed
// as the body of a function, never run, and `declare -f` prints the body
// with the aliases expanded. ok is false where bash refuses the syntax.
func bashCommandNames(t *testing.T, stmt string) (names []string, ok bool) {
	t.Helper()
	var script strings.Builder
	script.WriteString("shopt -s expand_aliases\n")
	builtins := slices.Sorted(func(yield func(string) bool) {
		for b := range unsupportedBuiltins {
			if !yield(b) {
				return
			}
		}
	})
	for i, b := range builtins {
		script.WriteString("\\alias " + shellQuote(b) + "=__gpuprep_cmd_" + strconv.Itoa(i) + "\n")
	}
	// the builtins this script runs are quoted: a quoted word is never an alias
	script.WriteString("\\eval " + shellQuote("__gpuprep_f() {\n"+stmt+"\n}") + " || \\exit 3\n\\declare -f __gpuprep_f\n")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "--norc", "--noprofile", "-c", script.String())
	cmd.Env = []string{"PATH=/nonexistent", "LC_ALL=C"}
	out, err := cmd.Output()
	if err != nil {
		return nil, false
	}
	for _, m := range regexp.MustCompile(`__gpuprep_cmd_(\d+)`).FindAllStringSubmatch(string(out), -1) {
		i, _ := strconv.Atoi(m[1])
		names = append(names, builtins[i])
	}
	return names, true
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// unsupportedIn is commandNames' answer restricted to the unsupported builtins.
func unsupportedIn(stmt string) []string {
	var out []string
	for _, c := range commandNames(stmt) {
		if unsupportedBuiltins[c] {
			out = append(out, c)
		}
	}
	return out
}

// Every command position bash reads is one commandNames finds: the shell
// reader refused `.`/source only as a line's first word, so `true; .
// /etc/x` or `true && source x` sourced a file the reader never read.
// bash 5.2 is the oracle (aliases expand only at command positions).
func TestCommandNamesAsBash(t *testing.T) {
	needBash(t)
	for _, stmt := range []string{
		". /etc/x",
		"true; . /etc/x",
		"true && source /etc/x",
		"false || eval 'X=1'",
		"true | read X",
		"true & . /etc/x",
		"A=1 . /etc/x",
		"A=1 B=2 source /etc/x",
		"A+=1 . /etc/x",
		"2>/dev/null . /etc/x",
		"> /dev/null source /etc/x",
		"true 2>&1; . /etc/x",
		"echo . source eval; echo set",
		"echo '; . /etc/x'",
		`echo "; . /etc/x" \; .`,
		"if . /etc/x; then :; fi",
		"if true; then . /etc/x; fi",
		"if true; then :; elif source y; then :; else . z; fi",
		"while read X; do :; done",
		"until false; do unset X; done",
		"for i in . source eval; do echo $i; done",
		"for ((i=0; i<1; i++)); do . /etc/x; done",
		"select x in . source; do break; done",
		"case $A in . | source) echo . ;; *) . /etc/x ;; esac",
		"case $A in (.) set -- a ;; esac; . /etc/y",
		"{ . /etc/x; }",
		"( . /etc/x )",
		"! . /etc/x",
		"time . /etc/x",
		"[[ -e . ]] && . /etc/x",
		"(( X = 1 )) && declare Y=2",
		"f() { . /etc/x; }",
		"function g { source /etc/x; }",
		"test -e /etc/x && \\\n . /etc/x",
		"echo a # ; . /etc/x",
		"echo $(echo .) .",
		"echo ${A:-.} && local B",
		"true;. /etc/x",
		"true&&source /etc/x",
		// a command substitution runs in a subshell, which cannot change
		// the variables of the files read; bash 5.2 expands no alias in
		// it when it reads the function either
		"echo \"$(. /etc/x)\"",
		"echo `source /etc/x`",
		"X=$(. /etc/x) true",
	} {
		want, ok := bashCommandNames(t, stmt)
		require.True(t, ok, "bash refuses %q", stmt)
		require.Equal(t, want, unsupportedIn(stmt), "%q", stmt)
	}
}

// Where gpuprep and bash part, gpuprep refuses more, never less: a case
// pattern on a line without its "case" (the reader takes a file a line at
// a time) cannot be told from a command.
func TestCommandNamesPartFromBash(t *testing.T) {
	needBash(t)
	_, ok := bashCommandNames(t, "set) . /etc/x ;;")
	require.False(t, ok, "bash refuses the line alone")
	require.Equal(t, []string{"set", "."}, unsupportedIn("set) . /etc/x ;;"))
}

// A quoted command name runs the builtin all the same (quote removal comes
// before the command is looked up); bash, running it, is the oracle.
func TestCommandNamesQuoted(t *testing.T) {
	needBash(t)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "inc"), []byte("X=sourced\n"), 0o644))
	for _, stmt := range []string{"'.' ./inc", `"source" ./inc`, `\. ./inc`, `true; s\ource ./inc`, `A=1 ".""" ./inc`} {
		cmd := exec.Command("bash", "--norc", "--noprofile", "-c", "X=no\n"+stmt+"\nprintf %s \"$X\"")
		cmd.Dir = dir
		cmd.Env = []string{"PATH=/nonexistent", "LC_ALL=C"}
		out, err := cmd.Output()
		require.NoError(t, err, stmt)
		require.Equal(t, "sourced", string(out), "bash sources in %q", stmt)
		got := unsupportedIn(stmt)
		sort.Strings(got)
		require.Len(t, got, 1, stmt)
		require.Contains(t, []string{".", "source"}, got[0], stmt)
	}
}

// The reader refuses, with the file and line, a statement that runs an
// unsupported builtin at any command position.
func TestSourceRefusesBuiltinsAtAnyCommandPosition(t *testing.T) {
	for _, c := range []struct{ file, err string }{
		{"GRUB_TIMEOUT=5\ntrue; . /etc/x\n", `/etc/default/grub:2: unsupported shell statement "true; . /etc/x": it runs ., which could change any variable`},
		{"true && source /etc/x\n", `/etc/default/grub:1: unsupported shell statement "true && source /etc/x": it runs source, which could change any variable`},
		{"if [ -e /etc/x ]; then . /etc/x; fi\n", `/etc/default/grub:1: unsupported shell statement "if [ -e /etc/x ]; then . /etc/x; fi": it runs ., which could change any variable`},
		{"A=1 eval 'GRUB_TIMEOUT=2'\n", `/etc/default/grub:1: unsupported shell statement "A=1 eval 'GRUB_TIMEOUT=2'": it runs eval, which could change any variable`},
	} {
		_, err := sourceFiles([]File{{DefaultsFile, []byte(c.file)}})
		require.EqualError(t, err, c.err, c.file)
	}
	// words that only look like them are fine
	_, err := sourceFiles([]File{{DefaultsFile, []byte("echo '; . /etc/x' set\nGRUB_CMDLINE_LINUX=\"quiet\"\n")}})
	require.NoError(t, err)
}

// FuzzCommandNames: every unsupported builtin bash parses as a command in
// a fuzzed statement, commandNames finds too (it may find more: see
// TestCommandNamesPartFromBash).
//
//	go test ./grub -run '^$' -fuzz FuzzCommandNames -fuzztime 30s
func FuzzCommandNames(f *testing.F) {
	needBash(f)
	for _, s := range []string{"true; . /etc/x", "if a; then source b; fi", "case x in a) eval y;; esac", "A=1 2>/dev/null set -- a", "{ read X; } && (unset Y) | local Z"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, stmt string) {
		if len(stmt) > 200 || strings.ContainsAny(stmt, "\x00") || strings.Contains(stmt, "<<") {
			return
		}
		bash, ok := bashCommandNames(t, stmt)
		if !ok {
			return
		}
		ours := unsupportedIn(stmt)
		for _, b := range bash {
			require.Contains(t, ours, b, "bash runs %s in %q; gpuprep found %v", b, stmt, ours)
		}
	})
}
