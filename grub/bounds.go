package grub

import (
	"fmt"

	"github.com/gpuprep/gpuprep/internal/host"
)

// Bounds on the shell subset's expansion. Without them a few hundred bytes
// of defaults file that double a variable forty times (A=$A$A) ask for a
// terabyte, and a long chain of self-appends (A="$A x", once per line)
// copies quadratically: every byte of a value also carries its provenance
// (a chr, 32 bytes), so a 330 KB chain cost 17 GB.
//
// maxValue: what grub-mkconfig makes of GRUB_CMDLINE_LINUX and
// GRUB_CMDLINE_LINUX_DEFAULT goes into one "linux" line, which the kernel
// truncates to COMMAND_LINE_SIZE (2048 bytes on x86 and arm64, 4096 on a
// few architectures); 64 KiB is sixteen times the largest of those, so no
// value a bootable configuration needs comes near it, and it holds for every
// variable, since any may be expanded into the command line.
//
// maxCopied: the total bytes all $VAR references of one reading may copy,
// which bounds the quadratic chain: sixteen maximal values, 1 MiB (32 MiB of
// provenance). The distributions' defaults files copy a few hundred bytes.
//
// maxDefaultsFile: a defaults file is read whole, so one that is not a
// regular file (a link to /dev/zero) or is larger than 1 MiB (the
// distributions' are about 2 KiB) is refused before it is read.
const (
	maxValue        = 64 << 10
	maxCopied       = 1 << 20
	maxDefaultsFile = 1 << 20
)

// errValueTooLong is the error for a value past maxValue; the caller adds the
// file and line.
func errValueTooLong(n int) error {
	return fmt.Errorf("the value grows to %d bytes, more than gpuprep reads (%d; the kernel keeps at most 4096 of a command line)", n, maxValue)
}

// charge accounts for appending the value of $name (add bytes) to a value
// of have bytes, refusing it past either bound.
func (st *shellState) charge(name string, have, add int) error {
	if have+add > maxValue {
		return fmt.Errorf("$%s: %w", name, errValueTooLong(have+add))
	}
	st.copied += add
	if st.copied > maxCopied {
		return fmt.Errorf("$%s: the files' variable references copy more than %d bytes in all (gpuprep's bound on expanding them)", name, maxCopied)
	}
	return nil
}

// readDefaults reads a defaults file within maxDefaultsFile. A file that
// does not exist is read as root.ReadFile reads it (ReadFiles tells a missing
// /etc/default/grub apart).
func readDefaults(root *host.Root, p string) ([]byte, error) {
	if fi, err := root.Stat(p); err == nil {
		switch {
		case !fi.Mode().IsRegular():
			return nil, &ParseError{File: p, Line: 1, Msg: "not a regular file (" + host.KindOf(fi.Mode()) + ")"}
		case fi.Size() > maxDefaultsFile:
			return nil, &ParseError{File: p, Line: 1, Msg: fmt.Sprintf("%d bytes: larger than gpuprep reads (%d)", fi.Size(), maxDefaultsFile)}
		}
	}
	b, err := root.ReadFile(p)
	if err == nil && len(b) > maxDefaultsFile { // grown since the stat
		return nil, &ParseError{File: p, Line: 1, Msg: fmt.Sprintf("larger than gpuprep reads (%d bytes)", maxDefaultsFile)}
	}
	return b, err
}
