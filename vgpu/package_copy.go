package vgpu

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// packageCopy copies the package at src into a new private directory
// (os.MkdirTemp: 0700, ours; in a temporary directory that is root's and
// sticky, or writable by no one else, nobody else can rename it away: see
// safeTempParent), hashing the bytes as they are written, and returns
// the copy's path and their SHA-256. dpkg-deb and rpm then read the copy,
// which nobody else can change, so the hash is that of the very package
// they checked: src read three times (fields, hash, file list) could be
// swapped between the reads. done removes the copy.
func packageCopy(src string) (copyPath, sum string, done func(), err error) {
	dir, err := os.MkdirTemp("", "gpuprep-package-")
	if err != nil {
		return "", "", nil, fmt.Errorf("%s: a private copy to check: %w", src, err)
	}
	done = func() { _ = os.RemoveAll(dir) }
	if err := safeTempParent(dir); err != nil {
		done()
		return "", "", nil, fmt.Errorf("%s: a private copy to check: %w", src, err)
	}
	copyPath = filepath.Join(dir, filepath.Base(src))
	sum, err = copyHashing(src, copyPath)
	if err != nil {
		done()
		return "", "", nil, fmt.Errorf("%s: a private copy to check: %w", src, err)
	}
	return copyPath, sum, done, nil
}

// namedErr is an error whose text names the user's file where the query
// named the private copy; errors.Is and As still see the error.
type namedErr struct {
	err  error
	text string
}

func (e *namedErr) Error() string { return e.text }
func (e *namedErr) Unwrap() error { return e.err }

// namingFile words err, which may name the copy, with the user's path.
func namingFile(err error, copyPath, userPath string) error {
	return &namedErr{err, strings.ReplaceAll(err.Error(), copyPath, userPath)}
}
