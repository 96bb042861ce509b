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

// embedded is the public pci.ids database, version 2026.07.31 (the copy NVIDIA
// ships in go-nvlib v0.13.0; its first lines say which), kept uncompressed
// because scanning it is cheaper than inflating it.
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

func isHex4(s []byte) bool {
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
		line := sc.Bytes() // not copied: only matches become strings
		switch {
		case len(line) == 0 || line[0] == '#':
		case bytes.HasPrefix(line, []byte("C ")):
			return n // device classes follow the vendors
		case line[0] != '\t':
			vendor = ""
			if isHex4(line) && wantV[string(line[:4])] {
				vendor = string(line[:4])
				n.Vendors[vendor] = strings.TrimSpace(string(line[4:]))
				left--
			}
		case vendor != "" && len(line) > 5 && line[1] != '\t' && isHex4(line[1:]):
			id := ID{vendor, string(line[1:5])}
			if wantD[id] {
				n.Devices[id] = strings.TrimSpace(string(line[5:]))
				left--
			}
		}
	}
	return n
}

// Embedded names the given IDs from the embedded copy only. It goes
// straight to each vendor's line (a byte search, far cheaper than scanning
// the lines before it: NVIDIA's is 350 KiB in) and reads only the device
// lines under it.
func Embedded(ids []ID) Names {
	n := Names{Vendors: map[string]string{}, Devices: map[ID]string{}, Source: "embedded"}
	want := map[string]map[string]bool{}
	for _, id := range ids {
		if want[id.Vendor] == nil {
			want[id.Vendor] = map[string]bool{}
		}
		if id.Device != "" {
			want[id.Vendor][id.Device] = true
		}
	}
	for v, devs := range want {
		scanVendor(embedded, v, devs, &n)
	}
	return n
}

// scanVendor names vendor v and the devices devs from v's section of db.
func scanVendor(db []byte, v string, devs map[string]bool, n *Names) {
	if len(v) != 4 || !isHex4([]byte(v)) {
		return
	}
	i := bytes.Index(db, []byte("\n"+v+"  "))
	if i < 0 {
		return
	}
	rest := db[i+1:]
	line, rest := nextLine(rest)
	n.Vendors[v] = strings.TrimSpace(string(line[4:]))
	left := len(devs)
	for len(rest) > 0 && left > 0 {
		line, rest = nextLine(rest)
		switch {
		case len(line) == 0 || line[0] == '#':
		case line[0] != '\t':
			return // the next vendor, or the device classes
		case len(line) > 5 && line[1] != '\t' && devs[string(line[1:5])]:
			n.Devices[ID{v, string(line[1:5])}] = strings.TrimSpace(string(line[5:]))
			left--
		}
	}
}

func nextLine(b []byte) (line, rest []byte) {
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		return b[:i], b[i+1:]
	}
	return b, nil
}

// ResourceName is the Kubernetes extended resource NVIDIA's sandbox device
// plugin (kubevirt-gpu-device-plugin) advertises for a passed-through GPU,
// computed its way: the device's name from pci.ids, upper-cased, with "/",
// "." and white space turned into "_" and every other character outside
// [A-Za-z0-9_] dropped, prefixed "nvidia.com/"; the raw device ID when
// pci.ids has no name. The plugin reads its own bundled pci.ids, so the
// embedded copy is used here, not the host's.
func ResourceName(name, deviceID string) string {
	if name == "" {
		return "nvidia.com/" + deviceID
	}
	var b strings.Builder
	for _, c := range strings.ToUpper(name) {
		switch {
		case c == '/' || c == '.' || c == ' ' || c == '\t':
			b.WriteByte('_')
		case c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_':
			b.WriteRune(c)
		}
	}
	return "nvidia.com/" + b.String()
}
