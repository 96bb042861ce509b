package grub

import (
	"fmt"
	"github.com/gpuprep/gpuprep/internal/change"
	"sort"
	"strings"

	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/kargs"
)

// Request is what an edit should achieve on the kernel command line.
type Request struct {
	// Ensure: each argument ends up in effect. One already in effect
	// (kargs.Satisfied: a comma list holding the value, the last occurrence
	// winning, iommu.passthrough=1 for iommu=pt) is left alone. Otherwise
	// every occurrence of its key (and, for iommu=pt, of iommu.passthrough)
	// is removed and the argument is appended once.
	Ensure []kargs.Param
	// Remove: every occurrence of these keys ("-" and "_" alike) goes.
	Remove []string
	// NotOff: what these keys switch ("intel_iommu", "amd_iommu", "iommu",
	// "intremap") must not be left off: where an argument list leaves it off
	// (kargs.OffIndexes), the occurrences that turn it off go (iommu=off
	// goes, iommu=pt stays; nointremap and intremap=off go).
	//
	// Removals (Remove and NotOff) come first: Ensure is judged on what is
	// left (iommu=pt,off goes whole, and iommu=pt is then appended).
	NotOff []string
}

// removed reports, for each argument of args, whether req removes it.
func (req Request) removed(args []kargs.Param) []bool {
	out := make([]bool, len(args))
	keys := map[string]bool{}
	for _, k := range req.Remove {
		keys[kargs.Norm(k)] = true
	}
	for i, a := range args {
		out[i] = keys[kargs.Norm(a.Key)]
	}
	for _, k := range req.NotOff {
		for _, i := range kargs.OffIndexes(args, k) {
			out[i] = true
		}
	}
	return out
}

// kept is args without what gone marks.
func kept(args []kargs.Param, gone []bool) []kargs.Param {
	var out []kargs.Param
	for i, a := range args {
		if !gone[i] {
			out = append(out, a)
		}
	}
	return out
}

// Edit is the outcome of an edit of the defaults files.
type Edit struct {
	Var       string        // the variable arguments were appended to ("" when none were)
	Changes   []change.File // files whose content changes, in source order
	Satisfied []kargs.Param // Ensure arguments already in effect
	Added     []string      // arguments appended
	Removed   []string      // arguments removed (as written)
	Before    Cmdline
	After     Cmdline
}

// Cmdline is the value of both GRUB_CMDLINE variables.
type Cmdline struct {
	Linux, Default string
}

// Args is the normal boot entry's argument list: GRUB_CMDLINE_LINUX then
// GRUB_CMDLINE_LINUX_DEFAULT, as GRUB passes them (quotes removed).
func (c Cmdline) Args() []kargs.Param {
	var out []kargs.Param
	for _, s := range []string{c.Linux, c.Default} {
		for _, w := range Words(s) {
			out = append(out, kargs.ParseOne(unquoteWord(w)))
		}
	}
	return out
}

// String is the argument list as one line.
func (c Cmdline) String() string {
	return strings.TrimSpace(strings.Join(append(Words(c.Linux), Words(c.Default)...), " "))
}

// ReadFiles returns /etc/default/grub and /etc/default/grub.d/*.cfg in the
// order grub-mkconfig sources them: util/grub-mkconfig.in has
//
//	if test -f ${sysconfdir}/default/grub ; then
//	  . ${sysconfdir}/default/grub
//	fi
//	for x in ${sysconfdir}/default/grub.d/*.cfg ; do
//	  if [ -e "${x}" ]; then . "${x}" ; fi
//	done
//
// so each part is optional: a node with only drop-ins (no
// /etc/default/grub) is configured by them alone. It returns nil when
// neither is there.
func ReadFiles(root *host.Root) ([]File, error) {
	var files []File
	data, err := readDefaults(root, DefaultsFile)
	switch {
	case err == nil:
		files = append(files, File{DefaultsFile, data})
	case root.Exists(DefaultsFile):
		return nil, err
	}
	cfgs, _ := root.Glob("/etc/default/grub.d/*.cfg")
	sort.Strings(cfgs) // the glob's order
	for _, f := range cfgs {
		b, err := readDefaults(root, f)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		files = append(files, File{f, b})
	}
	return files, nil
}

// Evaluate sources files and returns both GRUB_CMDLINE variables, or a
// ParseError naming the file and line gpuprep will not guess about.
func Evaluate(files []File) (Cmdline, error) {
	c, _, err := evaluate(files)
	return c, err
}

// evaluate is Evaluate, also returning the sourced state (where each
// variable was set).
func evaluate(files []File) (Cmdline, *shellState, error) {
	st, err := sourceFiles(files)
	if err != nil {
		return Cmdline{}, nil, err
	}
	if err := cmdlineNewlineErr(st); err != nil {
		return Cmdline{}, nil, err
	}
	var c Cmdline
	if c.Linux, _, err = st.value(cmdlineVars[0]); err != nil {
		return c, nil, err
	}
	if c.Default, _, err = st.value(cmdlineVars[1]); err != nil {
		return c, nil, err
	}
	return c, st, nil
}

// TargetVar is the variable gpuprep appends arguments to:
// GRUB_CMDLINE_LINUX_DEFAULT where the files set it (Debian, Ubuntu,
// Proxmox, openSUSE, Arch), else GRUB_CMDLINE_LINUX (RHEL, Fedora).
//
// Why: GRUB_CMDLINE_LINUX_DEFAULT is what those distributions' documentation
// (and Proxmox's and NVIDIA's PCI passthrough guides) tell admins to edit,
// so people find the change where they look; it comes last on the normal
// entry's linux line, so it also wins any "last occurrence" contest; and it
// is left out of the recovery entries, which keeps a boot path without the
// IOMMU changes should they make a node unbootable. Where a distribution
// does not use GRUB_CMDLINE_LINUX_DEFAULT, GRUB_CMDLINE_LINUX is the only
// variable its tools (grub2-mkconfig --update-bls-cmdline) read.
func TargetVar(files []File) string {
	st, _ := sourceFiles(files)
	if st != nil && st.vars[cmdlineVars[1]] != nil {
		return cmdlineVars[1]
	}
	return cmdlineVars[0]
}

// ValidateArg checks that an argument gpuprep is asked to add can be written
// into any quoting style without escaping.
func ValidateArg(a string) error {
	if a == "" {
		return fmt.Errorf("empty argument")
	}
	for i := 0; i < len(a); i++ {
		c := a[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte("\"'\\$`;&|<>(){}*?[]#~!", c) >= 0 {
			return fmt.Errorf("argument %q: gpuprep adds only arguments without blanks, quotes or shell special characters", a)
		}
	}
	if a[0] == '=' || a[0] == '-' {
		return fmt.Errorf("argument %q: not a kernel parameter", a)
	}
	return nil
}

// EditFiles plans req against the defaults files (in sourcing order) and
// returns the new contents. Every byte outside the edited values stays as
// it was; quoting styles are kept. It refuses, with a ParseError naming the
// file and line, whatever it cannot edit safely: values built from a
// command's output or from variables it cannot rewrite, unsupported shell
// statements touching the command line. The result is checked by sourcing
// the new files again: each variable must hold exactly the old arguments
// minus the removed ones plus the added ones, and no other variable may
// change; otherwise nothing is changed and an error says why.
func EditFiles(files []File, req Request) (*Edit, error) {
	if len(files) == 0 {
		return nil, fmt.Errorf("%s: not found", DefaultsFile)
	}
	for _, p := range req.Ensure {
		if err := ValidateArg(p.String()); err != nil {
			return nil, err
		}
	}
	st, err := sourceFiles(files)
	if err != nil {
		return nil, err
	}
	if err := cmdlineNewlineErr(st); err != nil {
		return nil, err
	}
	var before Cmdline
	vals := map[string]*variable{}
	for _, n := range cmdlineVars {
		s, v, err := st.value(n)
		if err != nil {
			return nil, err
		}
		vals[n] = v
		if n == cmdlineVars[0] {
			before.Linux = s
		} else {
			before.Default = s
		}
	}
	ed := &Edit{Before: before, After: before}
	args := before.Args()
	gone := req.removed(args) // per argument, in the order of the words below
	left := kept(args, gone)

	// What goes and what comes.
	drop := map[string]bool{} // normalized keys
	var add []string
	for _, want := range req.Ensure {
		if kargs.Satisfied(left, want) {
			ed.Satisfied = append(ed.Satisfied, want)
			continue
		}
		drop[kargs.Norm(want.Key)] = true
		if kargs.Norm(want.Key) == "iommu" && want.Value == "pt" {
			drop["iommu.passthrough"] = true
		}
		add = append(add, want.String())
	}
	target := TargetVar(files)

	// Source edits: deletions of words where they were written.
	type span struct {
		file, s, e int
		ins        string
	}
	var edits []span
	expected := map[string][]string{}
	idx := 0 // the word's position in args
	for _, n := range cmdlineVars {
		v := vals[n]
		var val []chr
		if v != nil {
			val = v.val
		}
		s := chrString(val)
		for _, w := range splitWords(s) {
			word := s[w[0]:w[1]]
			g := idx < len(gone) && gone[idx]
			idx++
			if !g && !drop[kargs.Norm(kargs.ParseOne(unquoteWord(word)).Key)] {
				expected[n] = append(expected[n], word)
				continue
			}
			ed.Removed = append(ed.Removed, unquoteWord(word))
			cs := val[w[0]:w[1]]
			seg := cs[0].seg
			for _, c := range cs {
				if c.param {
					a := st.assigns[st.segs[c.seg].assign]
					return nil, &ParseError{files[a.file].Path, lineAt(files[a.file].Data, c.s), fmt.Sprintf("%s: the argument %q is written in the word of a ${NAME:-word} expansion, which gpuprep does not edit; edit it by hand", n, word)}
				}
				if c.seg != seg {
					a := st.assigns[st.segs[seg].assign]
					return nil, &ParseError{files[a.file].Path, a.line, fmt.Sprintf("%s: the argument %q is put together from several quoted or expanded parts; edit it by hand", n, word)}
				}
			}
			sg := st.segs[seg]
			a := st.assigns[sg.assign]
			if !isCmdlineVar(a.name) {
				return nil, &ParseError{files[a.file].Path, a.line, fmt.Sprintf("%s gets %q from $%s; gpuprep edits only GRUB_CMDLINE_LINUX and GRUB_CMDLINE_LINUX_DEFAULT: edit it by hand", n, word, a.name)}
			}
			ds, de := cs[0].s, cs[len(cs)-1].e
			// take the blanks before the word with it when they belong to the
			// same segment, else those after it
			k := w[0]
			for k > 0 && isBlank(val[k-1].c) && val[k-1].seg == seg {
				k--
			}
			if k < w[0] && (k == 0 || !isBlank(val[k-1].c)) {
				ds = val[k].s
			} else {
				k = w[1]
				for k < len(val) && isBlank(val[k].c) && val[k].seg == seg {
					k++
				}
				if k > w[1] && (k == len(val) || !isBlank(val[k].c)) {
					de = val[k-1].e
				}
			}
			edits = append(edits, span{file: sg.file, s: ds, e: de})
		}
	}
	expected[target] = append(expected[target], add...)

	// Deletions, merged per file.
	newData := make([][]byte, len(files))
	for i := range files {
		newData[i] = append([]byte(nil), files[i].Data...)
	}
	deleted := make([][]bool, len(files))
	for i := range files {
		deleted[i] = make([]bool, len(files[i].Data)+1)
	}
	for _, e := range edits {
		for p := e.s; p < e.e; p++ {
			deleted[e.file][p] = true
		}
	}
	var inserts []span
	if len(add) > 0 {
		text := strings.Join(add, " ")
		ed.Var, ed.Added = target, add
		v := st.vars[target]
		if v == nil || v.assign < 0 {
			// Not set anywhere: a new line at the end of the first file
			// (/etc/default/grub, or the first drop-in where it is absent).
			d := files[0].Data
			nl := lineEnding(d)
			line := target + `="` + text + `"` + nl
			if len(d) > 0 && d[len(d)-1] != '\n' {
				line = nl + line
			}
			inserts = append(inserts, span{file: 0, s: len(d), e: len(d), ins: line})
		} else {
			a := st.assigns[v.assign]
			del := deleted[a.file]
			data := files[a.file].Data
			// prev returns the last byte kept in [from, to), or 0.
			prev := func(from, to int) (byte, byte) {
				for p := to - 1; p >= from; p-- {
					if !del[p] {
						q := byte(0)
						for r := p - 1; r >= from; r-- {
							if !del[r] {
								q = data[r]
								break
							}
						}
						return data[p], q
					}
				}
				return 0, 0
			}
			sep := func(from, to int) string {
				c, before := prev(from, to)
				if c == 0 || c == ' ' || c == '\t' || c == '\n' && before != '\\' {
					return ""
				}
				return " "
			}
			end := a.valueEnd // before a CR ending the line, which stays last
			switch {
			case a.lastQuoted:
				sg := st.segs[a.segs[a.endSeg]]
				// after the opening quote, before the closing one
				inserts = append(inserts, span{file: a.file, s: sg.close, e: sg.close, ins: sep(sg.open+1, sg.close) + text})
			case a.wordStart == end:
				if unquotedSafe(text) {
					inserts = append(inserts, span{file: a.file, s: end, e: end, ins: text})
				} else {
					inserts = append(inserts, span{file: a.file, s: end, e: end, ins: `"` + text + `"`})
				}
			case a.plainWord:
				// An unquoted value cannot take a blank: quote it (the one
				// change of quoting style, since the alternative is a
				// backslash before the blank).
				inserts = append(inserts,
					span{file: a.file, s: a.wordStart, e: a.wordStart, ins: `"`},
					span{file: a.file, s: end, e: end, ins: sep(a.wordStart, end) + text + `"`})
			default:
				// ends with an expansion or an escape: append a quoted part
				inserts = append(inserts, span{file: a.file, s: end, e: end, ins: `" ` + text + `"`})
			}
		}
	}
	if len(edits) == 0 && len(inserts) == 0 {
		return ed, nil
	}
	for fi := range files {
		var ins []span
		for _, x := range inserts {
			if x.file == fi {
				ins = append(ins, x)
			}
		}
		var b strings.Builder
		data := files[fi].Data
		for p := 0; p <= len(data); p++ {
			for _, x := range ins {
				if x.s == p {
					b.WriteString(x.ins)
				}
			}
			if p < len(data) && !deleted[fi][p] {
				b.WriteByte(data[p])
			}
		}
		newData[fi] = []byte(b.String())
	}

	// Check the result the way grub-mkconfig will see it.
	newFiles := make([]File, len(files))
	for i := range files {
		newFiles[i] = File{files[i].Path, newData[i]}
	}
	st2, err := sourceFiles(newFiles)
	if err != nil {
		return nil, fmt.Errorf("gpuprep could not edit the kernel command line safely (the edited files would not parse: %v); edit it by hand", err)
	}
	var after Cmdline
	for _, n := range cmdlineVars {
		s, _, err := st2.value(n)
		if err != nil {
			return nil, fmt.Errorf("gpuprep could not edit %s safely (%v); edit it by hand", n, err)
		}
		if got := Words(s); strings.Join(got, "\x00") != strings.Join(expected[n], "\x00") {
			return nil, fmt.Errorf("gpuprep could not edit %s safely: the result would be %q, not %q; edit it by hand", n, strings.Join(got, " "), strings.Join(expected[n], " "))
		}
		if n == cmdlineVars[0] {
			after.Linux = s
		} else {
			after.Default = s
		}
	}
	for name, v := range st.vars {
		if isCmdlineVar(name) {
			continue
		}
		w := st2.vars[name]
		if w == nil || w.opaque != v.opaque || chrString(w.val) != chrString(v.val) {
			return nil, fmt.Errorf("gpuprep could not edit the kernel command line safely: the edit would also change %s; edit it by hand", name)
		}
	}
	ed.After = after
	for i := range files {
		if string(newData[i]) != string(files[i].Data) {
			ed.Changes = append(ed.Changes, changeOf(files[i], newData[i]))
		}
	}
	return ed, nil
}

func isBlank(c byte) bool { return c == ' ' || c == '\t' || c == '\n' }

// changeOf is f's change to data (f not there: its Data nil).
func changeOf(f File, data []byte) change.File {
	return change.Between(f.Path, f.Data, f.Data != nil, data)
}
