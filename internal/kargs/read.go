package kargs

import (
	"fmt"
	"strings"

	"github.com/gpuprep/gpuprep/internal/host"
)

// MaxFile bounds a file that holds a kernel command line (/proc/cmdline,
// /etc/kernel/cmdline, a BLS entry, grubenv). The kernel keeps at most
// COMMAND_LINE_SIZE bytes of one (2048 on arm64, 4096 on x86 since 6.x;
// arch/*/include/uapi/asm/setup.h), so 64 KiB is sixteen times the most a
// boot can use; a snapshot's 200 MiB /proc/cmdline made Parse hold 16 GB.
const MaxFile = 64 << 10

// ReadFile reads the file p under root, which holds a kernel command line,
// refusing one larger than MaxFile with an error naming it.
func ReadFile(root *host.Root, p string) ([]byte, error) {
	if fi, err := root.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Size() > MaxFile {
		return nil, tooLong(p, fi.Size())
	}
	b, err := root.ReadFile(p)
	if err == nil && len(b) > MaxFile { // grown since the stat, or not a regular file
		return nil, tooLong(p, int64(len(b)))
	}
	return b, err
}

// ReadString is ReadFile's content without surrounding white space, as
// host.Root.ReadString gives it.
func ReadString(root *host.Root, p string) (string, error) {
	b, err := ReadFile(root, p)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

func tooLong(p string, n int64) error {
	return fmt.Errorf("%s: %d bytes, more than a kernel command line can be (gpuprep reads at most %d)", p, n, MaxFile)
}
