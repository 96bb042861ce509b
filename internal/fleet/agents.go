package fleet

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// A fleet can mix architectures (x86_64 nodes, arm64 Grace nodes): gpuprep
// is given one binary per architecture and each host gets the one built for
// the architecture it reports. A binary is never started on a host of
// another architecture (sudo would run it as a shell script).

// AgentPrefix starts the name of a gpuprep built for another host: make
// build's bin/gpuprep-linux-arm64, make dist's dist/gpuprep-linux-amd64.
const AgentPrefix = "gpuprep-linux-"

// goArches is the GOARCH of each uname -m architecture gpuprep names.
var goArches = map[string]string{
	"x86_64": "amd64", "aarch64": "arm64", "i686": "386",
	"ppc64le": "ppc64le", "s390x": "s390x", "riscv64": "riscv64",
}

// goArch is the GOARCH of a uname -m architecture (the names in AgentPrefix
// files), "" when gpuprep has no name for it.
func goArch(uname string) string { return goArches[uname] }

// unameArch is the uname -m name of a GOARCH (goArches read backwards); the
// GOARCH itself when gpuprep has no other name for it.
func unameArch(goarch string) string {
	for u, g := range goArches {
		if g == goarch {
			return u
		}
	}
	return goarch
}

// AgentName is the file name of a gpuprep for hosts of arch (uname -m).
func AgentName(arch string) string {
	if g := goArch(arch); g != "" {
		return AgentPrefix + g
	}
	return AgentPrefix + arch
}

// loadAgent loads p; a file named as an agent (AgentPrefix) must be built
// for the architecture its name says, so that a misnamed file is refused
// rather than sent to the wrong hosts.
func loadAgent(p string) (*Binary, error) {
	b, err := LoadBinary(p)
	if err != nil {
		return nil, err
	}
	if name := filepath.Base(p); strings.HasPrefix(name, AgentPrefix) && name != AgentName(b.Arch) {
		return nil, fmt.Errorf("%s is built for %s: its name says otherwise (%s is the name for it)", p, b.Arch, AgentName(b.Arch))
	}
	return b, nil
}

// agentsIn returns the AgentPrefix files of dir, sorted.
func agentsIn(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), AgentPrefix) && !e.IsDir() {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	sort.Strings(out)
	return out, nil
}

// LoadAgents loads the binaries given with --agent-binary: each path a
// gpuprep executable or a directory whose gpuprep-linux-<arch> files are
// taken (make dist's dist/). Two binaries for one architecture are an
// error: which one a host gets must not depend on the order.
func LoadAgents(paths []string) ([]*Binary, error) {
	var out []*Binary
	for _, p := range paths {
		files := []string{p}
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			if files, err = agentsIn(p); err != nil {
				return nil, err
			}
			if len(files) == 0 {
				return nil, fmt.Errorf("%s: no %s<arch> file in the directory", p, AgentPrefix)
			}
		}
		for _, f := range files {
			b, err := loadAgent(f)
			if err != nil {
				return nil, err
			}
			if o := agentFor(out, b.Arch); o != nil {
				return nil, fmt.Errorf("%s and %s are both built for %s: give one", o.Path, b.Path, b.Arch)
			}
			out = append(out, b)
		}
	}
	return out, nil
}

// DefaultAgents is what hosts run without --agent-binary: the running
// gpuprep (exe) for hosts of its architecture and, for the others, the
// gpuprep-linux-<arch> files beside it (make build puts one in bin/). A
// sibling of exe's own architecture is ignored: those hosts run exe.
func DefaultAgents(exe string) ([]*Binary, error) {
	self, err := LoadBinary(exe)
	if err != nil {
		return nil, err
	}
	out := []*Binary{self}
	files, err := agentsIn(filepath.Dir(exe))
	if err != nil {
		return out, nil // no listing: exe alone
	}
	for _, f := range files {
		if filepath.Base(f) == AgentName(self.Arch) || sameFile(f, exe) {
			continue
		}
		b, err := loadAgent(f)
		if err != nil {
			return nil, fmt.Errorf("beside %s: %w", exe, err)
		}
		if agentFor(out, b.Arch) == nil {
			out = append(out, b)
		}
	}
	return out, nil
}

func sameFile(a, b string) bool {
	x, err1 := os.Stat(a)
	y, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(x, y)
}

// agentFor returns the binary of bins built for arch (uname -m, or a
// GOARCH name), nil when none is.
func agentFor(bins []*Binary, arch string) *Binary {
	i := slices.IndexFunc(bins, func(b *Binary) bool { return archEqual(b.Arch, arch) })
	if i < 0 {
		return nil
	}
	return bins[i]
}

// archList names the architectures of bins, for messages.
func archList(bins []*Binary) string {
	var a []string
	for _, b := range bins {
		a = append(a, b.Arch+" ("+b.Path+")")
	}
	return strings.Join(a, ", ")
}
