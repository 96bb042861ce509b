// Package kernelrelease holds the one check of a kernel release name that
// gpuprep makes a path of: /lib/modules/RELEASE/modules.dep,
// /boot/vmlinuz-RELEASE, /boot/initrd.img-RELEASE, /boot/config-RELEASE.
// The name comes from the host (/proc/sys/kernel/osrelease, a grub.cfg linux
// line, a BLS entry's version, a directory of /lib/modules), which is
// hostile until checked: "../../etc" would read /etc/modules.dep as the
// kernel's, "6.1/x" a file the kernel's tools never wrote.
package kernelrelease

import (
	"fmt"

	"github.com/gpuprep/gpuprep/internal/host"
)

// maxLen is the longest release the kernel has: utsname's release field is
// __NEW_UTS_LEN (64) bytes and a NUL (include/uapi/linux/utsname.h).
const maxLen = 64

// OSRelease is where the running kernel's release is read.
const OSRelease = "/proc/sys/kernel/osrelease"

// Check returns an error naming name when it cannot be a kernel release
// used as a path component: empty, "." or "..", holding a "/", a NUL, a
// blank or another control byte, or longer than the kernel allows.
func Check(name string) error {
	why := ""
	switch {
	case name == "":
		why = "empty"
	case name == "." || name == "..":
		why = "a directory's own name, not a release"
	case len(name) > maxLen:
		why = fmt.Sprintf("longer than the %d bytes of the kernel's utsname release", maxLen)
	}
	for i := 0; why == "" && i < len(name); i++ {
		switch c := name[i]; {
		case c == '/':
			why = "it holds a '/'"
		case c <= ' ' || c == 0x7f:
			why = fmt.Sprintf("it holds the byte %#02x", c)
		}
	}
	if why != "" {
		return &RefusedError{name, why}
	}
	return nil
}

// RefusedError is Check's error: the name and why it is no release.
type RefusedError struct{ Name, Why string }

func (e *RefusedError) Error() string {
	return fmt.Sprintf("kernel release %q refused: %s (gpuprep makes paths such as /lib/modules/RELEASE of it)", e.Name, e.Why)
}

// Running is the running kernel's release as root's OSRelease holds it, ""
// with an error when it is not readable or Check refuses it.
func Running(root *host.Root) (string, error) {
	k, err := root.ReadString(OSRelease)
	if err != nil {
		return "", err
	}
	if err := Check(k); err != nil {
		return "", fmt.Errorf("%s: %w", OSRelease, err)
	}
	return k, nil
}
