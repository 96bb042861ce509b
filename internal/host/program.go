package host

import "strings"

// binDirs are the directories a root shell's PATH searches for programs:
// where FindProgram looks under a root, and ExecRunner on this machine.
var binDirs = []string{"/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"}

// FindProgram returns the path under r of the first of names found in the
// directories a root shell's PATH searches, or "" when none is there.
func (r *Root) FindProgram(names ...string) string {
	for _, n := range names {
		for _, d := range binDirs {
			p := d + "/" + n
			if st, err := r.Stat(p); err == nil && !st.IsDir() {
				return p
			}
		}
	}
	return ""
}

// ProgramPath is the search path FindProgram uses, as PATH would show it.
func ProgramPath() string { return strings.Join(binDirs, ":") }
