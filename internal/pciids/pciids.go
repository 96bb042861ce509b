// Package pciids names PCI vendors and devices from a pci.ids database: the
// one found inside the host root, else a copy embedded in the binary (never
// the network). It scans the file once for just the IDs asked for, which is
// far cheaper than parsing the whole database.
package pciids

import (
	"bufio"
	"bytes"
	_ "embed"
	"io"
	"strings"

	"github.com/gpuprep/gpuprep/internal/host"
)

// embedded is pci.ids as Debian ships it (the version line at its top says
// which); kept uncompressed because scanning it is cheaper than inflating it.
//
//go:embed pci.ids
var embedded []byte

// Paths are where distributions install pci.ids, searched in order.
var Paths = []string{"/usr/share/misc/pci.ids", "/usr/share/hwdata/pci.ids", "/usr/share/pci.ids"}

// ID is a vendor ID, or a vendor:device pair, in four lower-case hex digits each.
type ID struct{ Vendor, Device string }

// Names holds what was found: vendor names by vendor ID, device names by ID.
type Names struct {
	Vendors map[string]string
	Devices map[ID]string
	Source  string // file it came from, or "embedded"
}

// Lookup names the given IDs from the first pci.ids inside root, or from the
// embedded copy when the root has none.
func Lookup(root *host.Root, ids []ID) Names {
	for _, p := range Paths {
		if f, err := root.Open(p); err == nil {
			defer f.Close()
			n := scan(f, ids)
			n.Source = p
			return n
		}
	}
	n := scan(bytes.NewReader(embedded), ids)
	n.Source = "embedded"
	return n
}

func isHex4(s string) bool {
	if len(s) < 4 {
		return false
	}
	for _, c := range s[:4] {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func scan(r io.Reader, ids []ID) Names {
	n := Names{Vendors: map[string]string{}, Devices: map[ID]string{}}
	wantV := map[string]bool{}
	wantD := map[ID]bool{}
	for _, id := range ids {
		wantV[id.Vendor] = true
		if id.Device != "" {
			wantD[id] = true
		}
	}
	left := len(wantV) + len(wantD)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	vendor := ""
	for sc.Scan() && left > 0 {
		line := sc.Text()
		switch {
		case line == "" || line[0] == '#':
		case strings.HasPrefix(line, "C "):
			return n // device classes follow the vendors
		case line[0] != '\t':
			vendor = ""
			if isHex4(line) && wantV[line[:4]] {
				vendor = line[:4]
				n.Vendors[vendor] = strings.TrimSpace(line[4:])
				left--
			}
		case vendor != "" && len(line) > 1 && line[1] != '\t' && isHex4(line[1:]):
			id := ID{vendor, line[1:5]}
			if wantD[id] {
				n.Devices[id] = strings.TrimSpace(line[5:])
				left--
			}
		}
	}
	return n
}
