package vgpu

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// longNamesRun is a .run (in memory) whose gzip'd tar holds n PAX entries
// named <i>/aaaa… of nameLen bytes, then nvidia-vgpu-mgr.
func longNamesRun(t *testing.T, n, nameLen int) ([]byte, *runHeader) {
	t.Helper()
	var payload bytes.Buffer
	zw, err := gzip.NewWriterLevel(&payload, gzip.BestCompression)
	require.NoError(t, err)
	tw := tar.NewWriter(zw)
	for i := 0; i < n; i++ {
		prefix := fmt.Sprintf("%d/", i)
		name := prefix + strings.Repeat("a", nameLen-len(prefix))
		require.NoError(t, tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Typeflag: tar.TypeReg, Format: tar.FormatPAX}))
	}
	require.NoError(t, tw.WriteHeader(&tar.Header{Name: "nvidia-vgpu-mgr", Mode: 0o755, Typeflag: tar.TypeReg}))
	require.NoError(t, tw.Close())
	require.NoError(t, zw.Close())
	hdr := "#!/bin/sh\nlabel=\"x\"\ntargetdir=\"NVIDIA-Linux-x86_64-550.54.16-vgpu-kvm\"\nfilesizes=\"" + fmt.Sprint(payload.Len()) + "\"\noffset=`head -n 6 \"$0\" | wc -c | tr -d \" \"`\nexit 0\n"
	file := append([]byte(hdr), payload.Bytes()...)
	h, err := parseRunHeader(file)
	require.NoError(t, err)
	return file, h
}

// heapAfter returns how much more heap is in use, after a GC, while what f
// returns is still reachable.
func heapAfter(f func() any) int64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	kept := f()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(kept)
	return int64(after.HeapAlloc) - int64(before.HeapAlloc)
}

// The listing keeps no names: 4000 names of 4000 bytes (16 MB of names,
// each within PATH_MAX) leave the listing holding well under 1 MiB.
func TestRunListingKeepsNoNames(t *testing.T) {
	file, h := longNamesRun(t, 4000, 4000)
	var l *runListing
	grew := heapAfter(func() any {
		var err error
		l, err = listRun(bytes.NewReader(file), int64(len(file)), h)
		require.NoError(t, err)
		return l
	})
	require.Equal(t, 4001, l.Entries)
	require.True(t, l.VgpuMgr)
	require.Less(t, grew, int64(1<<20), "heap retained by the listing of a %d-byte .run", len(file))
}

// A name longer than PATH_MAX is refused: no tar gpuprep lists needs one.
func TestRunListingRefusesLongNames(t *testing.T) {
	file, h := longNamesRun(t, 3, maxRunName+1)
	_, err := listRun(bytes.NewReader(file), int64(len(file)), h)
	require.ErrorContains(t, err, "file name of 4097 bytes")
}

// The names' bytes together are bounded too.
func TestRunListingBoundsNameBytes(t *testing.T) {
	l := &runListing{maxNames: 10000}
	name := strings.Repeat("a", 4000)
	require.NoError(t, l.add(name))
	require.NoError(t, l.add(name))
	require.ErrorContains(t, l.add(name), "MiB of file names")
	require.Equal(t, 2, l.Entries)
	require.False(t, l.VgpuMgr)
	require.NoError(t, l.add("./usr/bin/nvidia-vgpu-mgr"))
	require.True(t, l.VgpuMgr)
}
