// Package mkimage builds initramfs images for tests with the programs the
// generators themselves run: GNU cpio in newc format over a sorted file
// list, as initramfs-tools' mkinitramfs does (`find . | LC_ALL=C sort |
// cpio -o -H newc`, then the compressor; the early microcode archive
// uncompressed in front, as its hooks/early-initramfs does), and the
// compressors with the options the kernel needs: xz --check=crc32
// (lib/xz/xz_dec_stream.c checks no CRC64 in the pre-boot decompressor
// configuration mkinitramfs targets), lz4 -l (the legacy frame, the one
// lib/decompress_unlz4.c reads).
package mkimage

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// Compressors maps a compression to the command that makes it.
var Compressors = map[string][]string{
	"none": nil,
	"gzip": {"gzip", "-n", "-9"},
	"xz":   {"xz", "--check=crc32", "-T1"},
	"zstd": {"zstd", "-q", "-1"},
	"lz4":  {"lz4", "-l", "-q"},
}

// Need skips t unless cpio and the compressors named are installed.
func Need(t testing.TB, comps ...string) {
	t.Helper()
	for _, p := range append([]string{"cpio"}, comps...) {
		c := p
		if cmd := Compressors[p]; cmd != nil {
			c = cmd[0]
		}
		if p == "none" {
			continue
		}
		if _, err := exec.LookPath(c); err != nil {
			t.Skipf("%s not installed: the image tests build real images with it", c)
		}
	}
}

// Archive is a cpio archive of files (path → content; a content of
// "-> TARGET" makes a symlink), with every parent directory, made by GNU
// cpio.
func Archive(t testing.TB, files map[string]string) []byte {
	t.Helper()
	dir := t.TempDir()
	for p, c := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if target, ok := strings.CutPrefix(c, "-> "); ok {
			if err := os.Symlink(target, full); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var names []string
	err := filepath.WalkDir(dir, func(p string, _ os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		names = append(names, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(names)
	cmd := exec.Command("cpio", "--quiet", "-o", "-H", "newc", "-R", "0:0")
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader(strings.Join(names, "\n") + "\n")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("cpio: %v", err)
	}
	return out
}

// Compress runs comp's compressor over b.
func Compress(t testing.TB, comp string, b []byte) []byte {
	t.Helper()
	c := Compressors[comp]
	if c == nil {
		return b
	}
	cmd := exec.Command(c[0], append(c[1:], "-c")...)
	cmd.Stdin = bytes.NewReader(b)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v", c[0], err)
	}
	return out
}

// Image is an image as mkinitramfs assembles one: an uncompressed early
// archive of early (none when nil), then main compressed with comp.
func Image(t testing.TB, early, main map[string]string, comp string) []byte {
	t.Helper()
	var img []byte
	if early != nil {
		img = append(img, Archive(t, early)...)
	}
	return append(img, Compress(t, comp, Archive(t, main))...)
}

// Microcode is an early archive as the kernel looks for it
// (Documentation/arch/x86/microcode.rst: kernel/x86/microcode/*.bin).
var Microcode = map[string]string{"kernel/x86/microcode/GenuineIntel.bin": "\x01\x00\x00\x00microcode"}
