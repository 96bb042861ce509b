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
	"slices"
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
	// FromEmbedded holds the IDs that Source does not name and the
	// embedded copy does (a vendor as {Vendor, ""}); nil when none.
	FromEmbedded map[ID]bool
}

// Lookup names the given IDs from the first pci.ids inside root, or from the
// embedded copy when the root has none. What the root's file does not name
// (a host's copy older than its GPU) is named from the embedded copy, and
// recorded in FromEmbedded.
func Lookup(root *host.Root, ids []ID) Names {
	for _, p := range Paths {
		if f, err := root.Open(p); err == nil {
			n := scan(f, ids)
			_ = f.Close() // only read
			n.Source = p
			n.fillFromEmbedded(ids)
			return n
		}
	}
	return Embedded(ids)
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
	wantV, wantD := wanted(ids)
	left := len(wantV) + len(wantD)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 4096), 1024*1024) // lines are short: a page, grown if ever needed
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

// wanted are the vendors and the devices ids asks to name.
func wanted(ids []ID) (map[string]bool, map[ID]bool) {
	wantV := map[string]bool{}
	wantD := map[ID]bool{}
	for _, id := range ids {
		wantV[id.Vendor] = true
		if id.Device != "" {
			wantD[id] = true
		}
	}
	return wantV, wantD
}

// Embedded names the given IDs from the embedded copy only. It reads no
// more of it than it needs: each vendor's section is found in vendorIndex
// (generated from the embedded file, checked by a test), and a device line
// by a binary search in that section (device IDs are sorted within a vendor
// in pci.ids), so a lookup touches a few pages of the 1.6 MB file instead
// of everything before the device (NVIDIA's H200 line is 450 KiB in).
func Embedded(ids []ID) Names {
	n := Names{Vendors: map[string]string{}, Devices: map[ID]string{}, Source: "embedded"}
	for _, id := range ids {
		sec, ok := embeddedVendor(id.Vendor)
		if !ok {
			continue
		}
		line, rest := nextLine(sec)
		n.Vendors[id.Vendor] = strings.TrimSpace(string(line[4:]))
		if id.Device != "" && isHex4([]byte(id.Device)) && len(id.Device) == 4 {
			if name, ok := findDevice(rest, id.Device); ok {
				n.Devices[id] = name
			}
		}
	}
	return n
}

// vendorAt locates a vendor's section in the embedded pci.ids: its line
// starts at off, the section (its device and subsystem lines) ends at end.
type vendorAt struct {
	id       uint16
	off, end uint32
}

// embeddedVendor returns vendor v's section of the embedded file.
func embeddedVendor(v string) ([]byte, bool) {
	if len(v) != 4 || !isHex4([]byte(v)) {
		return nil, false
	}
	var id uint16
	for _, c := range []byte(v) {
		id = id<<4 | uint16(hexVal(c))
	}
	i, ok := slices.BinarySearchFunc(vendorIndex[:], id, func(a vendorAt, id uint16) int { return int(a.id) - int(id) })
	if !ok {
		return nil, false
	}
	return embedded[vendorIndex[i].off:vendorIndex[i].end], true
}

func hexVal(c byte) byte {
	if c >= 'a' {
		return c - 'a' + 10
	}
	return c - '0'
}

// findDevice finds the device line "\tDDDD  name" in a vendor's lines
// (sorted by device ID, each followed by its subsystem lines and comments):
// a binary search narrows the range to a few KiB, which is then scanned.
func findDevice(sec []byte, dev string) (string, bool) {
	lo, hi := 0, len(sec)
	for hi-lo > 4096 {
		mid := lo + (hi-lo)/2
		at, id := deviceLineAfter(sec[:hi], mid)
		if at < 0 || id > dev {
			hi = mid
			continue
		}
		lo = at // the scan below starts at the line, or before it
		if id == dev {
			break
		}
	}
	for rest := sec[lo:]; len(rest) > 0; {
		var line []byte
		line, rest = nextLine(rest)
		if len(line) > 5 && line[0] == '\t' && line[1] != '\t' && string(line[1:5]) == dev {
			return strings.TrimSpace(string(line[5:])), true
		}
	}
	return "", false
}

// deviceLineAfter finds the first device line starting after offset i of
// b: its offset and ID, or -1.
func deviceLineAfter(b []byte, i int) (int, string) {
	for {
		j := bytes.IndexByte(b[i:], '\n')
		if j < 0 {
			return -1, ""
		}
		i += j + 1
		if len(b)-i > 5 && b[i] == '\t' && b[i+1] != '\t' && isHex4(b[i+1:]) {
			return i, string(b[i+1 : i+5])
		}
	}
}

func nextLine(b []byte) (line, rest []byte) {
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		return b[:i], b[i+1:]
	}
	return b, nil
}
