package vgpu

import (
	"fmt"
	"os"
	"path/filepath"
)

// packageCopy copies the package at src into a new private directory
// (os.MkdirTemp: 0700, ours; in a sticky temporary directory nobody else
// can rename it away), hashing the bytes as they are written, and returns
// the copy's path and their SHA-256. dpkg-deb and rpm then read the copy,
// which nobody else can change, so the hash is that of the very package
// they checked: src read three times (fields, hash, file list) could be
// swapped between the reads. done removes the copy.
func packageCopy(src string) (copyPath, sum string, done func(), err error) {
	dir, err := os.MkdirTemp("", "gpuprep-package-")
	if err != nil {
		return "", "", nil, fmt.Errorf("%s: a private copy to check: %w", src, err)
	}
	done = func() { os.RemoveAll(dir) }
	copyPath = filepath.Join(dir, filepath.Base(src))
	sum, err = copyHashing(src, copyPath)
	if err != nil {
		done()
		return "", "", nil, fmt.Errorf("%s: a private copy to check: %w", src, err)
	}
	return copyPath, sum, done, nil
}
