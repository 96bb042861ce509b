package provision

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Each step of the workflow is one type in a file of its own,
// step_<id>.go (docs/architecture.md, "Where to add things"): the file
// declares the type and its run, and no other step's.
func TestEachStepInItsOwnFile(t *testing.T) {
	declared := map[string]string{} // step type → the file declaring it
	runs := map[string]string{}     // step type → the file with its run
	kinds := map[string]bool{}
	for _, k := range stepKinds {
		kinds[reflect.TypeOf(k).Name()] = true
	}
	fset := token.NewFileSet()
	names, err := filepath.Glob("*.go")
	require.NoError(t, err)
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		require.NoError(t, err)
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.GenDecl:
				for _, s := range d.Specs {
					if ts, ok := s.(*ast.TypeSpec); ok && kinds[ts.Name.Name] {
						declared[ts.Name.Name] = name
					}
				}
			case *ast.FuncDecl:
				if d.Recv != nil && d.Name.Name == "run" {
					if id, ok := d.Recv.List[0].Type.(*ast.Ident); ok && kinds[id.Name] {
						runs[id.Name] = name
					}
				}
			}
		}
	}
	files := map[string]string{}
	for _, k := range stepKinds {
		typ := reflect.TypeOf(k).Name()
		want := "step_" + strings.ReplaceAll(k.id(), "-", "_") + ".go"
		require.Equal(t, want, declared[typ], "step %s: its type %s", k.id(), typ)
		require.Equal(t, want, runs[typ], "step %s: its run", k.id())
		require.Empty(t, files[want], "%s holds two steps", want)
		files[want] = k.id()
	}
}
