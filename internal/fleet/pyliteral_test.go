package fleet

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pyRender is what Ansible's INI parser makes of a value, rendered as
// pyLiteral renders it (containers and complex numbers as written).
const pyRender = `
import ast, json, sys
def render(v):
    try:
        x = ast.literal_eval(v)
    except (ValueError, SyntaxError):
        return v
    if x is None: return ""
    if isinstance(x, bool): return str(x)
    if isinstance(x, int): return str(x)
    if isinstance(x, float): return repr(x)
    if isinstance(x, str): return x
    if isinstance(x, bytes):
        try: return x.decode("utf-8")
        except UnicodeDecodeError: return v
    return v
print(json.dumps([render(v) for v in json.load(sys.stdin)]))
`

// Python itself is the oracle for pyLiteral.
func TestPyLiteralAgreesWithPython(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		oracleMissing(t, "no python3 (make test installs ansible-core, which brings it)")
	}
	in := []string{
		"", "a", "a b  c", "a # c", `"a\tb"`, `'a\tb'`, `r'a\tb'`, `R"a\"b"`, `b'x\x41'`, `u'\u00e9t\u00E9'`, `'\U0001F600'`,
		`'a' "b"`, `'a'  'b' 'c'`, `'a' b`, `'a' b'c'`, `f'x'`, `'''tri'ple'''`, `"""a"b"""`, `'unterminated`, `'a\'b'`,
		`'\101\7\0'`, `'\x4'`, `'\q'`, `"'/srv/q'"`, `'/srv/roots/a b'`, `"it's"`,
		"0", "00", "0_0", "010", "7", "-7", "+5", "- 5", "--5", "1_000", "1__0", "_1", "1_", "0x10", "0X1f", "5 # five", "5#", "None # n", "# c", "'a' # c", "'a'#c", "'a' 'b' # c 'd'", "'a' # c\n", "-0x10", "0o17", "0O7", "0b101",
		"0x", "0b2", "123456789012345678901234567890", "1e3", "1E-5", "1e16", "1e15", "1.5e16", "0.0001", "0.00001", ".5", "5.", "550.90",
		"1_000.5", "010.5", "1e400", "-1e400", "1.0", "-0.0", "3.141592653589793", "1e-7", "123456789.123456789", "2.5e-310",
		"None", "True", "False", "none", "true", "yes", "inf", "nan", "1j", "[1, 2]", "{'a': 1}", "(1,)", "1+2", " 5", "5 ", "\t'x'",
		"/srv/a", "a=b", "(5)", "('a')", "((None))", "( 0x10 )", "(5,)", "()", "(", "(5", "((5)", "('a' 'b')", "(True) # t", "('(')", "10.0.0.1", "fe80::1", "22", "0022",
	}
	data, _ := json.Marshal(in)
	cmd := exec.Command(py, "-c", pyRender)
	cmd.Stdin = strings.NewReader(string(data))
	out, err := cmd.Output()
	require.NoError(t, err)
	var want []string
	require.NoError(t, json.Unmarshal(out, &want))
	require.Len(t, want, len(in))
	for i, v := range in {
		assert.Equal(t, want[i], pyLiteral(v), "%q", v)
	}
	// The one difference: a \N{name} escape (no table of Unicode names
	// here) leaves the text as written.
	assert.Equal(t, `'\N{BULLET}'`, pyLiteral(`'\N{BULLET}'`))
}

// Python's str.splitlines is the oracle for pySplitLines.
func TestPySplitLinesAgreesWithPython(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		oracleMissing(t, "no python3")
	}
	in := []string{"", "a", "a\n", "a\nb", "a\r\nb\r\n", "a\rb\r", "\r\n\r\n", "\n\r", "a\r\r\nb", "a\vb\fc\x1cd\x1de\x1ef",
		"a\u0085b\u2028c\u2029d", "é\nü", "a\n\n", "\r", "\n", "x\r\n"}
	data, _ := json.Marshal(in)
	cmd := exec.Command(py, "-c", "import json,sys; print(json.dumps([s.splitlines() for s in json.load(sys.stdin)]))")
	cmd.Stdin = strings.NewReader(string(data))
	out, err := cmd.Output()
	require.NoError(t, err)
	var want [][]string
	require.NoError(t, json.Unmarshal(out, &want))
	for i, s := range in {
		got := pySplitLines(s)
		if len(want[i]) == 0 {
			assert.Empty(t, got, "%q", s)
			continue
		}
		assert.Equal(t, want[i], got, "%q", s)
	}
}
