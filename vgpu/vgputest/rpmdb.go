package vgputest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/gpuprep/gpuprep/internal/fixture"
)

// RPMDB is where the synthetic rpm keeps what it installed: a file per
// package, its first line "NAME VERSION RELEASE ARCH", then its files (host
// paths), one a line. A real rpm database is not text (Berkeley DB or
// SQLite in /var/lib/rpm, /usr/lib/sysimage/rpm on newer systems: rpm(8),
// FILES); only Host reads this one, and it lies inside /var/lib/rpm so that
// the root has the directory a RHEL host has.
const RPMDB = "/var/lib/rpm/gpuprep-fake"

// rpmHeader is the header tags of a package the synthetic rpm answers.
type rpmHeader struct{ Name, Version, Release, Arch string }

// nvra is rpm's default query answer, %{NAME}-%{VERSION}-%{RELEASE}.%{ARCH}:
// with no --qf, rpm uses %{?_query_all_fmt}\n, else "%{nvra}\n"
// (lib/poptQV.c of github.com/rpm-software-management/rpm, rpm 4.x).
func (p rpmHeader) nvra() string { return p.Name + "-" + p.Version + "-" + p.Release + "." + p.Arch }

// format expands a --qf query format: the tags NAME, VERSION, RELEASE, ARCH
// and the escape \n (rpm's headerFormat; other tags are not simulated).
func (p rpmHeader) format(qf string) (string, error) {
	tags := map[string]string{"NAME": p.Name, "VERSION": p.Version, "RELEASE": p.Release, "ARCH": p.Arch}
	var out strings.Builder
	for rest := strings.ReplaceAll(qf, `\n`, "\n"); rest != ""; {
		i := strings.Index(rest, "%{")
		if i < 0 {
			out.WriteString(rest)
			break
		}
		out.WriteString(rest[:i])
		j := strings.Index(rest[i:], "}")
		if j < 0 {
			return "", fmt.Errorf("rpm: exit status 1: error: incorrect format: missing }")
		}
		v, ok := tags[strings.ToUpper(rest[i+2:i+j])]
		if !ok {
			return "", fmt.Errorf("rpm: exit status 1: error: incorrect format: unknown tag: %q (not simulated)", rest[i+2:i+j])
		}
		out.WriteString(v)
		rest = rest[i+j+1:]
	}
	return out.String(), nil
}

// recordRPM records the package p as installed with files (host paths),
// replacing a record of the same name (rpm -U replaces the installed
// version), as rpm does.
func (h *Host) recordRPM(b *fixture.Builder, p rpmHeader, files []string) error {
	b.File(RPMDB+"/"+p.Name, strings.Join([]string{p.Name, p.Version, p.Release, p.Arch}, " ")+"\n"+strings.Join(files, "\n")+"\n")
	return b.Err()
}

// installedRPMs reads RPMDB: each package's header and files.
func (h *Host) installedRPMs() (map[string]rpmHeader, map[string][]string) {
	heads, files := map[string]rpmHeader{}, map[string][]string{}
	for _, n := range h.Root.Names(RPMDB) {
		s, err := h.Root.ReadString(RPMDB + "/" + n)
		if err != nil {
			continue
		}
		lines := strings.Split(s, "\n")
		f := strings.Fields(lines[0])
		if len(f) != 4 || f[0] != n {
			continue
		}
		heads[n] = rpmHeader{f[0], f[1], f[2], f[3]}
		for _, l := range lines[1:] {
			if l != "" {
				files[n] = append(files[n], l)
			}
		}
	}
	return heads, files
}

// rpmQueryFile plays `rpm -qf [--qf FMT] PATH`: the owning package's answer,
// else, exit status 1, what rpm's lib/query.c (rpmQueryVerify, RPMQV_PATH;
// tag rpm-4.16.0-release) logs: "file PATH is not owned by any package" (an
// RPMLOG_NOTICE, which rpmlog writes to stdout) when the file exists, "error:
// file PATH: No such file or directory" (RPMLOG_ERR, stderr) when not.
func (h *Host) rpmQueryFile(qf, file string) ([]byte, error) {
	heads, files := h.installedRPMs()
	for n, fs := range files {
		for _, f := range fs {
			if f == file {
				s, err := heads[n].format(qf)
				return []byte(s), err
			}
		}
	}
	if !h.Root.Exists(file) {
		return nil, fmt.Errorf("rpm: exit status 1: error: file %s: No such file or directory", file)
	}
	return []byte("file " + file + " is not owned by any package\n"), fmt.Errorf("rpm: exit status 1")
}

// rpmQuery plays `rpm -q NAME`: the package's NVRA, else (exit status 1)
// "package NAME is not installed" (lib/query.c, RPMQV_PACKAGE, on stdout).
func (h *Host) rpmQuery(name string) ([]byte, error) {
	heads, _ := h.installedRPMs()
	if p, ok := heads[name]; ok {
		return []byte(p.nvra() + "\n"), nil
	}
	return []byte("package " + name + " is not installed\n"), fmt.Errorf("rpm: exit status 1")
}

// removeRPM plays `rpm -e NAME` and `dnf remove -y NAME`: the files its
// record lists go (DKMS's %preun removes the modules it built), then the
// record. rpm -e of a package not installed fails with "error: package
// NAME is not installed" (lib/rpminstall.c, rpmErase, rpm 4.x); dnf 4
// says "No match for argument: NAME", "No packages marked for removal."
// and, nothing to do, "Complete!" (as yum, dnf 4, prints it on RHEL 8).
func (h *Host) removeRPM(b *fixture.Builder, tool, name string) ([]byte, error) {
	heads, files := h.installedRPMs()
	p, ok := heads[name]
	if !ok {
		if tool == "dnf" {
			return []byte("No match for argument: " + name + "\nNo packages marked for removal.\nDependencies resolved.\nNothing to do.\nComplete!\n"), nil
		}
		return nil, fmt.Errorf("rpm: exit status 1: error: package %s is not installed", name)
	}
	for _, f := range files[name] {
		b.Remove(f)
	}
	if err := b.Err(); err != nil {
		return nil, err
	}
	if err := os.Remove(filepath.Join(h.Dir, RPMDB, name)); err != nil {
		return nil, err
	}
	var out []byte
	if tool == "dnf" {
		out = []byte("Removing:\n " + p.Name + " " + p.Arch + " " + p.Version + "-" + p.Release + "\n\nRemoved:\n  " + p.nvra() + "\n\nComplete!\n")
	}
	return out, h.dropModules(b, files[name])
}
