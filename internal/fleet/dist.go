package fleet

import (
	"bufio"
	"debug/elf"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// CheckDist checks a release directory (make dist): its SHA256SUMS, in
// sha256sum's format, lists exactly its gpuprep-linux-<arch> files with
// their digests, and each is a static Linux executable (no interpreter, not
// position-independent) of the architecture its name says, as fleet loads
// it for hosts of that architecture.
func CheckDist(dir string) ([]*Binary, error) {
	sums, err := readSums(filepath.Join(dir, "SHA256SUMS"))
	if err != nil {
		return nil, err
	}
	files, err := agentsIn(dir)
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%s: no %s<arch> file", dir, AgentPrefix)
	}
	var names []string
	for _, f := range files {
		names = append(names, filepath.Base(f))
	}
	listed := make([]string, 0, len(sums))
	for n := range sums {
		listed = append(listed, n)
	}
	slices.Sort(listed)
	if !slices.Equal(names, listed) {
		return nil, fmt.Errorf("SHA256SUMS lists %q, the directory has %q", listed, names)
	}
	bins, err := LoadAgents([]string{dir})
	if err != nil {
		return nil, err
	}
	for _, b := range bins {
		if err := checkRelease(b, sums[filepath.Base(b.Path)]); err != nil {
			return nil, err
		}
	}
	return bins, nil
}

// checkRelease checks one loaded release binary against its listed digest.
func checkRelease(b *Binary, sum string) error {
	if b.SHA256 != sum {
		return fmt.Errorf("%s: sha256 %s, SHA256SUMS says %s", b.Path, b.SHA256, sum)
	}
	if b.Dynamic {
		return fmt.Errorf("%s: dynamically linked (build it with CGO_ENABLED=0)", b.Path)
	}
	f, err := elf.Open(b.Path)
	if err != nil {
		return err
	}
	defer f.Close()
	if f.Type != elf.ET_EXEC || f.OSABI != elf.ELFOSABI_NONE && f.OSABI != elf.ELFOSABI_LINUX {
		return fmt.Errorf("%s: ELF type %v, OS ABI %v: not a static Linux executable", b.Path, f.Type, f.OSABI)
	}
	return nil
}

// readSums reads a sha256sum file: "DIGEST  NAME" (text) or "DIGEST *NAME"
// (binary mode) per line.
func readSums(p string) (map[string]string, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sums := map[string]string{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		sum, name, ok := strings.Cut(sc.Text(), " ")
		name, bin := strings.CutPrefix(name, "*")
		if !bin {
			name, ok = strings.CutPrefix(name, " ")
		}
		if !ok || len(sum) != 64 || strings.Trim(sum, "0123456789abcdef") != "" || name == "" || strings.Contains(name, "/") {
			return nil, fmt.Errorf("%s:%d: not a sha256sum line for a file here: %q", p, n, sc.Text())
		}
		if _, dup := sums[name]; dup {
			return nil, fmt.Errorf("%s:%d: %s listed twice", p, n, name)
		}
		sums[name] = sum
	}
	return sums, sc.Err()
}
