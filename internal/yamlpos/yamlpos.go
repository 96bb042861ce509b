// Package yamlpos finds the line of a YAML syntax error that the user must
// look at, and says the error as gpuprep says every file error: the line
// and the message, without the parser's "yaml: line N:" prefix.
//
// gopkg.in/yaml.v3 (v3.0.1, yaml.go, (*parser).fail) names, when it has
// one, the line of the error's context (0-based: "while parsing a block
// mapping" is the line the mapping starts on, one line above it) rather
// than of the problem (the token it could not take: the mis-indented
// line). Only scanner errors get a 1-based line. So a mis-indented key at
// line 6 of a list starting at line 4 reads "yaml: line 3: did not find
// expected '-' indicator". The parser's problem mark is not exported;
// Locate finds its line as the first line whose prefix of the document
// fails with the same message (parsing up to and including the problem
// token fails with it; a shorter prefix parses, or ends early with
// another error such as "unexpected end of stream").
package yamlpos

import (
	"regexp"
	"strconv"
	"sync"

	"gopkg.in/yaml.v3"
)

// lineRe is compiled on first use: gpuprep starts on every fleet host, and a
// regexp compiled at init costs each start (TestOwnPackageInitsStaySmall).
var lineRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^yaml: line (\d+): (.*)$`) })

// Error is a YAML syntax error at a line (1-based; 0 when none is known).
type Error struct {
	Line int
	Msg  string
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return "line " + strconv.Itoa(e.Line) + ": " + e.Msg
	}
	return e.Msg
}

// split takes the line (as yaml.v3 printed it) and the message from a
// yaml.v3 error.
func split(err error) (int, string) {
	s := err.Error()
	if g := lineRe().FindStringSubmatch(s); g != nil {
		n, _ := strconv.Atoi(g[1])
		return n, g[2]
	}
	if len(s) > 6 && s[:6] == "yaml: " {
		s = s[6:]
	}
	return 0, s
}

// Locate turns err, the error yaml.v3 gave parsing data, into an *Error at
// the line of the problem. It costs a parse per halving of the document's
// lines (about 20 for the largest file gpuprep reads).
func Locate(data []byte, err error) *Error {
	reported, msg := split(err)
	ends := lineEnds(data)
	fails := func(n int) bool { // the first n lines fail with msg
		var doc yaml.Node
		e := yaml.Unmarshal(data[:ends[n-1]], &doc)
		if e == nil {
			return false
		}
		_, m := split(e)
		return m == msg
	}
	if len(ends) == 0 || !fails(len(ends)) {
		return &Error{Line: reported, Msg: msg}
	}
	lo, hi := 1, len(ends) // fails(hi); find the first n that fails
	for lo < hi {
		mid := (lo + hi) / 2
		if fails(mid) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return &Error{Line: lo, Msg: msg}
}

// lineEnds is the offset just past each line of data (its newline
// included; the last line's end is len(data)).
func lineEnds(data []byte) []int {
	var ends []int
	for i, b := range data {
		if b == '\n' {
			ends = append(ends, i+1)
		}
	}
	if len(data) > 0 && data[len(data)-1] != '\n' {
		ends = append(ends, len(data))
	}
	return ends
}
