// Package diff writes unified diffs (as `diff -u` does) of the files a
// command would change, for --dry-run.
package diff

import (
	"fmt"
	"strings"
)

// Unified returns the unified diff turning old into new, with 3 lines of
// context, labelled with name; "" when they are equal. A file that does not
// exist yet is diffed from /dev/null.
func Unified(name string, old, new []byte, oldExists bool) string {
	if oldExists && string(old) == string(new) {
		return ""
	}
	a, b := lines(string(old)), lines(string(new))
	from := "a" + name
	if !oldExists {
		from = "/dev/null"
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "--- %s\n+++ b%s\n", from, name)
	ops := editScript(a, b)
	const ctx = 3
	for i := 0; i < len(ops); {
		if ops[i].kind == ' ' {
			i++
			continue
		}
		// a hunk: from ctx lines before this change to ctx lines after the
		// last change that is within 2*ctx of the previous one
		start := max(i-ctx, 0)
		stop := min(lastChange(ops, i, ctx)+ctx+1, len(ops))
		writeHunk(&sb, ops[start:stop])
		i = stop
	}
	return sb.String()
}

// lastChange is the last change of the hunk whose first change is ops[i]:
// the last within 2*ctx lines of the one before it.
func lastChange(ops []op, i, ctx int) int {
	end := i
	for j := i; j < len(ops); j++ {
		if ops[j].kind != ' ' {
			end = j
		} else if j-end > 2*ctx {
			break
		}
	}
	return end
}

// writeHunk writes the hunk h: its header, then its lines.
func writeHunk(sb *strings.Builder, h []op) {
	// the hunk starts at the smallest positions in it (removals are moved
	// before additions, so the first op need not hold them)
	aStart, bStart, aLen, bLen := h[0].ai, h[0].bi, 0, 0
	for _, o := range h {
		aStart, bStart = min(aStart, o.ai), min(bStart, o.bi)
		if o.kind != '+' {
			aLen++
		}
		if o.kind != '-' {
			bLen++
		}
	}
	fmt.Fprintf(sb, "@@ -%s +%s @@\n", rng(aStart, aLen), rng(bStart, bLen))
	for _, o := range h {
		sb.WriteByte(o.kind)
		sb.WriteString(o.text)
		if !strings.HasSuffix(o.text, "\n") {
			sb.WriteString("\n\\ No newline at end of file\n")
		}
	}
}

func rng(start, n int) string {
	if n == 0 {
		return fmt.Sprintf("%d,0", start)
	}
	if n == 1 {
		return fmt.Sprint(start + 1)
	}
	return fmt.Sprintf("%d,%d", start+1, n)
}

// lines splits s keeping the newlines; a last line without one stays as is.
func lines(s string) []string {
	if s == "" {
		return nil
	}
	out := strings.SplitAfter(s, "\n")
	if out[len(out)-1] == "" {
		out = out[:len(out)-1]
	}
	return out
}

type op struct {
	kind   byte // ' ', '-', '+'
	text   string
	ai, bi int // positions in a and b before this op
}

// editScript is a longest-common-subsequence diff; the files gpuprep edits
// are small (configuration files), so the quadratic table is cheap.
func editScript(a, b []string) []op {
	return removalsFirst(walk(a, b, lcsTable(a, b)))
}

// lcsTable is, at [i][j], the length of the longest common subsequence of
// a[i:] and b[j:].
func lcsTable(a, b []string) [][]int32 {
	n, m := len(a), len(b)
	lcs := make([][]int32, n+1)
	for i := range lcs {
		lcs[i] = make([]int32, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	return lcs
}

// walk is the edit script the table lcs of a and b gives, additions
// preferred where both are as short.
func walk(a, b []string, lcs [][]int32) []op {
	n, m := len(a), len(b)
	var ops []op
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && a[i] == b[j]:
			ops = append(ops, op{' ', a[i], i, j})
			i++
			j++
		case j < m && (i == n || lcs[i][j+1] >= lcs[i+1][j]):
			ops = append(ops, op{'+', b[j], i, j})
			j++
		default:
			ops = append(ops, op{'-', a[i], i, j})
			i++
		}
	}
	return ops
}

// removalsFirst shows, within each run of changes, the removals before
// the additions, as diff -u does, keeping each side's order.
func removalsFirst(ops []op) []op {
	out := make([]op, 0, len(ops))
	for i := 0; i < len(ops); {
		if ops[i].kind == ' ' {
			out = append(out, ops[i])
			i++
			continue
		}
		j := i
		for j < len(ops) && ops[j].kind != ' ' {
			j++
		}
		for _, kind := range []byte{'-', '+'} {
			for _, o := range ops[i:j] {
				if o.kind == kind {
					out = append(out, o)
				}
			}
		}
		i = j
	}
	return out
}
