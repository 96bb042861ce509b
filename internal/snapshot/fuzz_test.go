package snapshot

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzUnpack unpacks fuzzed tar streams (gzipped here, so that the fuzzer
// works on the tar structure) under small limits: whatever is accepted
// writes nothing outside the directory, stays within the limits, and packs
// to a tarball that unpacks and packs again to the same entries (Unpack
// keeps the times of regular files, not of directories and links).
//
//	go test ./internal/snapshot -run '^$' -fuzz FuzzUnpack -fuzztime 20s
func FuzzUnpack(f *testing.F) {
	paths, _ := filepath.Glob("testdata/hostile/*.tar.gz")
	paths = append(paths, "../../testdata/roots/real/h200-vm-gpuprep-snapshot.tar.gz")
	for _, p := range paths {
		b, err := os.ReadFile(p)
		require.NoError(f, err)
		zr, err := gzip.NewReader(bytes.NewReader(b))
		require.NoError(f, err)
		raw, err := io.ReadAll(zr)
		require.NoError(f, err)
		if len(raw) <= 1<<20 {
			f.Add(raw)
		}
	}
	defer func(b, e, s int64) { MaxUnpackBytes, MaxUnpackEntries, MaxUnpackStream = b, e, s }(MaxUnpackBytes, MaxUnpackEntries, MaxUnpackStream)
	MaxUnpackBytes, MaxUnpackEntries, MaxUnpackStream = 1<<20, 200, 4<<20
	f.Fuzz(func(t *testing.T, raw []byte) {
		parent := t.TempDir()
		in := filepath.Join(parent, "in.tar.gz")
		require.NoError(t, os.WriteFile(in, gzipped(t, raw), 0o644))
		dir := filepath.Join(parent, "root")
		err := Unpack(in, dir)
		ents, rerr := os.ReadDir(parent)
		require.NoError(t, rerr)
		require.LessOrEqual(t, len(ents), 2, "only in.tar.gz and root in %s", parent)
		if err != nil {
			return
		}
		n, size := treeSize(t, dir)
		require.LessOrEqual(t, n, MaxUnpackEntries)
		require.LessOrEqual(t, size, MaxUnpackBytes)
		var once, twice bytes.Buffer
		require.NoError(t, Pack(dir, &once))
		again := filepath.Join(parent, "again.tar.gz")
		require.NoError(t, os.WriteFile(again, once.Bytes(), 0o644))
		dir2 := filepath.Join(parent, "root2")
		require.NoError(t, Unpack(again, dir2))
		require.NoError(t, Pack(dir2, &twice))
		require.Equal(t, summary(t, once.Bytes()), summary(t, twice.Bytes()))
	})
}

// summary lists a tarball's entries: name, type, mode, link, time (a
// regular file's) and content.
func summary(t *testing.T, tgz []byte) []string {
	zr, err := gzip.NewReader(bytes.NewReader(tgz))
	require.NoError(t, err)
	tr := tar.NewReader(zr)
	var out []string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err)
		body, err := io.ReadAll(tr)
		require.NoError(t, err)
		when := h.ModTime.UnixNano()
		if h.Typeflag != tar.TypeReg {
			when = 0
		}
		out = append(out, fmt.Sprintf("%s %c %o %q %d %x", h.Name, h.Typeflag, h.Mode, h.Linkname, when, sha256.Sum256(body)))
	}
}

func gzipped(t *testing.T, raw []byte) []byte {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	_, err := zw.Write(raw)
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	return b.Bytes()
}

// treeSize counts the entries under dir and the bytes of its regular files.
func treeSize(t *testing.T, dir string) (n, size int64) {
	require.NoError(t, filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || p == dir {
			return err
		}
		n++
		if fi.Mode().IsRegular() {
			size += fi.Size()
		}
		return nil
	}))
	return n, size
}
