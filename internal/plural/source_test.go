package plural

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// optionalPlural is "host(s)", "GPU(s)", "NVSwitch(es)": text a person reads that N or Word
// would say right.
var optionalPlural = regexp.MustCompile(`[A-Za-z]\((e|ie)?s\)`)

// kernelText are literals that are not gpuprep's words but the kernel's,
// matched in its log (arch/arm64/kernel/smp.c, hyp_mode_check: "CPU: All
// CPU(s) started at EL%u").
var kernelText = []string{"CPU: All CPU(s) started at"}

// TestNoOptionalPlurals reads every string literal of the module's
// non-test Go files: none says "(s)" for a count it knows.
func TestNoOptionalPlurals(t *testing.T) {
	fset := token.NewFileSet()
	var found []string
	err := filepath.WalkDir("../..", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && p != "../.." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err != nil || !optionalPlural.MatchString(s) || kernel(s) {
				return true
			}
			found = append(found, fset.Position(lit.Pos()).String()+": "+optionalPlural.FindString(s))
			return true
		})
		return nil
	})
	require.NoError(t, err)
	require.Empty(t, found, "say the count with plural.N, plural.Word or plural.Verb")
}

func kernel(s string) bool {
	for _, k := range kernelText {
		if strings.Contains(s, k) {
			return true
		}
	}
	return false
}
