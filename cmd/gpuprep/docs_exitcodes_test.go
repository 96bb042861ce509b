package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fleet"
	"github.com/gpuprep/gpuprep/report"
)

// codeExitCodes are the exit codes this package's source defines: the
// values of its exit* constants, the integer literals given as an
// exitError's code, and "128+N" where a code is 128 plus a signal number.
func codeExitCodes(t *testing.T) []string {
	t.Helper()
	fset := token.NewFileSet()
	paths, err := filepath.Glob("*.go")
	require.NoError(t, err)
	var files []*ast.File
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		require.NoError(t, err)
		files = append(files, f)
	}
	codes := map[string]bool{}
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.ValueSpec:
				for i, name := range n.Names {
					if strings.HasPrefix(name.Name, "exit") && i < len(n.Values) {
						if lit, ok := n.Values[i].(*ast.BasicLit); ok && lit.Kind == token.INT {
							codes[lit.Value] = true
						}
					}
				}
			case *ast.KeyValueExpr:
				if k, ok := n.Key.(*ast.Ident); ok && k.Name == "code" {
					if lit, ok := n.Value.(*ast.BasicLit); ok && lit.Kind == token.INT {
						codes[lit.Value] = true
					}
				}
			case *ast.BinaryExpr:
				if lit, ok := n.X.(*ast.BasicLit); ok && n.Op == token.ADD && lit.Value == "128" {
					codes["128+N"] = true
				}
			}
			return true
		})
	}
	codes[strconv.Itoa(fleet.NotStampedRC)] = true
	var out []string
	for c := range codes {
		out = append(out, c)
	}
	// 130 is an interrupt's code (SIGINT), which the 128+N row documents.
	if codes["128+N"] {
		out = slices.DeleteFunc(out, func(c string) bool {
			n, err := strconv.Atoi(c)
			return err == nil && n > 128 && n < 128+65
		})
	}
	slices.Sort(out)
	return out
}

var exitCodeRow = regexp.MustCompile(`(?m)^\| (\d+|128\+N) \| (.*) \|$`)

// docs/exit-codes.md documents exactly the codes the source defines, and
// each fleet run outcome by the name report.RunOutcome gives it.
func TestDocsExitCodes(t *testing.T) {
	body, err := os.ReadFile("../../docs/exit-codes.md")
	require.NoError(t, err)
	var documented []string
	for _, m := range exitCodeRow.FindAllStringSubmatch(string(body), -1) {
		documented = append(documented, m[1])
	}
	slices.Sort(documented)
	require.Equal(t, codeExitCodes(t), documented, "docs/exit-codes.md's table and the exit codes in cmd/gpuprep differ")
	flat := strings.Join(strings.Fields(string(body)), " ")
	for _, code := range []int{0, 1, 2, 3, 4, 130} {
		require.Contains(t, flat, strconv.Itoa(code)+" `"+report.RunOutcome(code)+"`", "fleet run's outcome for exit %d", code)
	}
}
