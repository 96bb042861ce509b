package fleet

import (
	"fmt"
	"unicode"
	"unicode/utf8"
)

// maxHostName bounds an inventory host's name and address: 253 bytes, the
// longest DNS name written out (RFC 1035's 255 octets on the wire). The
// name is the address where none is given, and it is printed in reports
// and logs, so a name of megabytes is refused rather than carried. Ansible
// itself checks nothing (InventoryData.add_host takes any string).
const maxHostName = 253

// maxHostPattern bounds a host pattern before its ranges are expanded
// (every name a range makes is at most as long as its pattern), so that
// expanding one cannot make maxRangeHosts names of megabytes each.
const maxHostPattern = 1024

// hostNameProblem says what is wrong with an inventory host name, "" when
// nothing is: empty, longer than maxHostName, not UTF-8, or holding a
// control character (NUL, newline, escape, C1) or a line or paragraph
// separator, any of which would let one name read as several lines or
// rewrite the terminal where it is printed.
func hostNameProblem(name string) string {
	switch {
	case name == "":
		return "empty host name"
	case len(name) > maxHostName:
		return fmt.Sprintf("host name of %d bytes: at most %d", len(name), maxHostName)
	case !utf8.ValidString(name):
		return fmt.Sprintf("host name %q is not UTF-8", name)
	}
	for _, r := range name {
		if unicode.IsControl(r) || unicode.In(r, unicode.Zl, unicode.Zp) {
			return fmt.Sprintf("host name %q holds the control character %U", name, r)
		}
	}
	return ""
}
