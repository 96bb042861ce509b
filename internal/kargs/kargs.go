// Package kargs parses kernel command lines the way the kernel does and
// answers whether a wanted argument is in effect: "-" and "_" are the same in
// names, the last occurrence of a key wins, values are comma lists
// (intel_iommu=on,sm_on is "on"), and a bare key sets no value.
package kargs

import "strings"

// Param is one kernel argument.
type Param struct {
	Key      string // as written
	Value    string
	HasValue bool
}

// String writes p as it appears on a command line.
func (p Param) String() string {
	const blanks = " \t\n"
	if strings.ContainsAny(p.Key, blanks) {
		if !p.HasValue {
			return `"` + p.Key + `"`
		}
		return `"` + p.Key + "=" + p.Value + `"`
	}
	if !p.HasValue {
		return p.Key
	}
	if strings.ContainsAny(p.Value, blanks) {
		return p.Key + `="` + p.Value + `"`
	}
	return p.Key + "=" + p.Value
}

// Norm is the name the kernel matches: "-" and "_" are equivalent.
func Norm(key string) string { return strings.ReplaceAll(key, "-", "_") }

// Parse splits a command line into parameters. Double quotes group text that
// holds spaces (key="a b" or "key=a b"), as the kernel's next_arg does.
//
// An '=' that begins an argument does not end its key: next_arg
// (lib/cmdline.c) records the first '=' at an index i with "equals = i"
// while "equals == 0", so an '=' at index 0 leaves equals 0, which it reads
// as "no value". "=" is the parameter named "=" without a value, "=a=b" is
// "=a" set to "b"; no parameter has an empty key.
func Parse(s string) []Param {
	var out []Param
	for i := skipBlanks(s, 0); i < len(s); i = skipBlanks(s, i) {
		var w string
		var eq int
		w, eq, i = word(s, i)
		if w == "" {
			continue
		}
		if w == "--" {
			break // what follows goes to init
		}
		if eq >= 0 {
			out = append(out, Param{Key: w[:eq], Value: w[eq+1:], HasValue: true})
		} else {
			out = append(out, Param{Key: w})
		}
	}
	return out
}

// isBlank is whether c separates the command line's words.
func isBlank(c byte) bool { return c == ' ' || c == '\t' || c == '\n' }

// skipBlanks is the index of the first byte of s from i that is not blank.
func skipBlanks(s string, i int) int {
	for i < len(s) && isBlank(s[i]) {
		i++
	}
	return i
}

// word reads the word of s that starts at i, up to a blank outside double
// quotes: the word without its quotes, where its first '=' is in it (-1:
// none; a leading '=' is part of the key, keyOnly), and the index after it.
func word(s string, i int) (w string, eq, next int) {
	var b strings.Builder
	inq := false
	eq = -1
	for ; i < len(s); i++ {
		c := s[i]
		if c == '"' {
			inq = !inq
			continue
		}
		if !inq && isBlank(c) {
			break
		}
		if c == '=' && eq < 0 && b.Len() > 0 {
			eq = b.Len()
		}
		b.WriteByte(c)
	}
	return b.String(), eq, i
}

// ParseOne parses a single "key=value" or "key" argument, as Parse does:
// a leading '=' is part of the key.
func ParseOne(s string) Param {
	if i := strings.IndexByte(s, '='); i > 0 {
		return Param{Key: s[:i], Value: s[i+1:], HasValue: true}
	} else if i == 0 {
		if j := strings.IndexByte(s[1:], '='); j >= 0 {
			return Param{Key: s[:j+1], Value: s[j+2:], HasValue: true}
		}
	}
	return Param{Key: s}
}

// Last returns the last occurrence of key (the one the kernel uses).
func Last(ps []Param, key string) (Param, bool) {
	k := Norm(key)
	for i := len(ps) - 1; i >= 0; i-- {
		if Norm(ps[i].Key) == k {
			return ps[i], true
		}
	}
	return Param{}, false
}

// HasOption reports whether the comma-separated value list v holds opt.
func HasOption(v, opt string) bool {
	for _, o := range strings.Split(v, ",") {
		if strings.TrimSpace(o) == opt {
			return true
		}
	}
	return false
}

// Satisfied reports whether want is in effect in ps: the last occurrence of
// its key carries the wanted value among its comma-separated options. A bare
// wanted key (no value) needs the key present. iommu=pt is also satisfied by
// iommu.passthrough=1, its documented synonym, when that comes later.
func Satisfied(ps []Param, want Param) bool {
	if Norm(want.Key) == "iommu" && want.Value == "pt" {
		return passthrough(ps)
	}
	if w, ok := kstrtobool(want.Value); ok && Norm(want.Key) == "iommu.passthrough" && want.HasValue {
		p, found := lastPassthroughArg(ps)
		v, _ := kstrtobool(p.Value)
		return found && v == w
	}
	if Norm(want.Key) == "intel_iommu" && (want.Value == "on" || want.Value == "off") {
		state, _ := IntelIOMMU(ps)
		return state == want.Value
	}
	got, ok := Last(ps, want.Key)
	if !ok {
		return false
	}
	if !want.HasValue {
		return true
	}
	return got.HasValue && HasOption(got.Value, want.Value)
}

// passthrough follows the kernel: iommu=pt/nopt and iommu.passthrough=0/1
// both set the default domain type; the last one written wins.
func passthrough(ps []Param) bool {
	on, _, _ := passthroughBy(ps)
	return on
}

// passthroughBy is passthrough, with the occurrence that set the default
// domain type (ok false when none did). iommu.passthrough= (x86 since Linux
// 5.4, arm64 before) takes a kstrtobool value (1/y/on or 0/n/off, by its
// first characters); iommu=pt and iommu=nopt are x86's older spelling of it
// (kernel-parameters.txt).
func passthroughBy(ps []Param) (on bool, by Param, ok bool) {
	for _, p := range ps {
		switch Norm(p.Key) {
		case "iommu":
			if HasOption(p.Value, "pt") {
				on, by, ok = true, p, true
			} else if HasOption(p.Value, "nopt") {
				on, by, ok = false, p, true
			}
		case "iommu.passthrough":
			if v, valid := kstrtobool(p.Value); p.HasValue && valid {
				on, by, ok = v, p, true
			}
		}
	}
	return on, by, ok
}

// kstrtobool reads a boolean as the kernel's kstrtobool (lib/kstrtox.c)
// does: by its first character (1, y, Y, t, T, e, E true: yes, true,
// enable; 0, n, N, f, F, d, D false) or, after an o, its second (on, off).
// Kernels before 5.19 know only 1/y/n/0/on/off and ignore true/false/
// enable/disable; read the newer way, a "false" still never counts as on.
func kstrtobool(s string) (v, ok bool) {
	if s == "" {
		return false, false
	}
	switch s[0] {
	case '1', 'y', 'Y', 't', 'T', 'e', 'E':
		return true, true
	case '0', 'n', 'N', 'f', 'F', 'd', 'D':
		return false, true
	case 'o', 'O':
		if len(s) > 1 {
			switch s[1] {
			case 'n', 'N':
				return true, true
			case 'f', 'F':
				return false, true
			}
		}
	}
	return false, false
}

// Deciding returns the occurrence in ps that decides whether want is in
// effect, for reports: for iommu=pt the last iommu=pt, iommu=nopt or
// iommu.passthrough= (so iommu.passthrough=1, its equivalent, is named where
// it is what counts); for intel_iommu=on|off the last occurrence holding on
// or off; else the last occurrence of want's key. ok is false when ps has
// none.
func Deciding(ps []Param, want Param) (Param, bool) {
	switch {
	case Norm(want.Key) == "iommu" && want.Value == "pt":
		if _, by, ok := passthroughBy(ps); ok {
			return by, true
		}
	case Norm(want.Key) == "intel_iommu" && (want.Value == "on" || want.Value == "off"):
		if state, by := IntelIOMMU(ps); state != "" {
			return by, true
		}
	case Norm(want.Key) == "iommu.passthrough":
		if p, ok := lastPassthroughArg(ps); ok {
			return p, true
		}
	}
	return Last(ps, want.Key)
}

// lastPassthroughArg is the iommu.passthrough= that sets the default domain
// type: the last one whose value kstrtobool reads (iommu_set_def_domain_type
// in drivers/iommu/iommu.c returns the parse error for another, leaving the
// type as it was). Wanted as iommu.passthrough=, it is judged by itself:
// arm64 has no iommu=pt (x86's early_param), so that never stands in for it.
func lastPassthroughArg(ps []Param) (Param, bool) {
	var by Param
	found := false
	for _, p := range ps {
		if Norm(p.Key) != "iommu.passthrough" || !p.HasValue {
			continue
		}
		if _, ok := kstrtobool(p.Value); ok {
			by, found = p, true
		}
	}
	return by, found
}

// Equivalent reports whether p, the occurrence that decides want
// (Deciding), is written with another key than want's: iommu.passthrough=
// for iommu=pt.
func Equivalent(p, want Param) bool { return Norm(p.Key) != Norm(want.Key) }

// IntelIOMMU follows the kernel's intel_iommu= handler (intel_iommu_setup):
// it runs for every occurrence, in order, and within one its comma options
// in order; "on" and "off" each set the state, so the last of them wins
// (intel_iommu=on,off is off; intel_iommu=on intel_iommu=sm_on stays on).
// It returns "on", "off" or "" (neither given) and the occurrence that set
// the state. A bare intel_iommu (no "=") matches no handler and does nothing.
func IntelIOMMU(ps []Param) (string, Param) {
	state, by := "", Param{}
	for _, p := range ps {
		if Norm(p.Key) != "intel_iommu" || !p.HasValue {
			continue
		}
		for _, o := range strings.Split(p.Value, ",") {
			if o = strings.TrimSpace(o); o == "on" || o == "off" {
				state, by = o, p
			}
		}
	}
	return state, by
}

// Disabling returns the occurrence of key ("intel_iommu", "amd_iommu" or
// "iommu") that leaves the IOMMU off, following the kernel: intel_iommu=
// is off when its last on/off option is off (IntelIOMMU); amd_iommu=off
// (amd_iommu_disabled) and iommu=off (x86 iommu_setup sets no_iommu) are
// never undone by a later occurrence (iommu=off iommu=pt is still off), so
// the last occurrence holding "off" is returned.
func Disabling(ps []Param, key string) (Param, bool) {
	k := Norm(key)
	if k == "intel_iommu" {
		state, by := IntelIOMMU(ps)
		return by, state == "off"
	}
	var by Param
	found := false
	for _, p := range ps {
		if Norm(p.Key) == k && p.HasValue && HasOption(p.Value, "off") {
			by, found = p, true
		}
	}
	return by, found
}

// IntRemapOff follows the kernel's interrupt-remapping switches:
// intremap= (setup_irqremap) takes comma options in order, "on" and "off"
// each setting the state, and nointremap (deprecated) sets it off; every
// occurrence runs in order, so the last of them wins. It reports whether
// the list leaves remapping off, and the occurrence that did.
func IntRemapOff(ps []Param) (Param, bool) {
	off, by := false, Param{}
	for _, p := range ps {
		switch Norm(p.Key) {
		case "nointremap":
			off, by = true, p
		case "intremap":
			if !p.HasValue {
				continue
			}
			for _, o := range strings.Split(p.Value, ",") {
				switch strings.TrimSpace(o) {
				case "on":
					off = false
				case "off":
					off, by = true, p
				}
			}
		}
	}
	return by, off
}

// OffIndexes returns, when ps leaves off what key switches ("intel_iommu",
// "amd_iommu", "iommu" (see Disabling) or "intremap" (see IntRemapOff)), the
// positions of every occurrence that turns it off: an occurrence of the key
// holding the "off" option, and for intremap every nointremap too. Without
// them the list no longer turns it off. It returns nil when ps does not
// leave it off.
func OffIndexes(ps []Param, key string) []int {
	k := Norm(key)
	switch k {
	case "intremap":
		if _, off := IntRemapOff(ps); !off {
			return nil
		}
	default:
		if _, off := Disabling(ps, k); !off {
			return nil
		}
	}
	var out []int
	for i, p := range ps {
		n := Norm(p.Key)
		switch {
		case k == "intremap" && n == "nointremap",
			n == k && p.HasValue && HasOption(p.Value, "off"):
			out = append(out, i)
		}
	}
	return out
}

// AsEquivalent is, for a message, " (as P, its equivalent)" when want is
// satisfied in ps by another argument P that means the same
// (iommu.passthrough=1 for iommu=pt), else "".
func AsEquivalent(ps []Param, want Param) string {
	if p, ok := Deciding(ps, want); ok && Equivalent(p, want) && Satisfied(ps, want) {
		return " (as " + p.String() + ", its equivalent)"
	}
	return ""
}
