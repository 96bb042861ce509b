package vgpu

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/require"
	"github.com/ulikunitz/xz"

	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/vgpu/vgputest"
)

// tarOf is an uncompressed tar of empty files named names.
func tarOf(t *testing.T, names ...string) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, n := range names {
		require.NoError(t, tw.WriteHeader(&tar.Header{Name: n, Mode: 0o644, Typeflag: tar.TypeReg}))
	}
	require.NoError(t, tw.Close())
	return buf.Bytes()
}

// makeselfRun writes a .run laid out as makeself lays one out: body (the
// script, whose text may hold LINES for its own line count and SIZES for
// filesizes) and then the payloads (makeself-header.sh of
// github.com/megastep/makeself: the payloads follow the header's first
// LINES lines, each as long as its filesizes entry).
func makeselfRun(t *testing.T, name, body string, payloads ...[]byte) string {
	t.Helper()
	var sizes []string
	for _, p := range payloads {
		sizes = append(sizes, fmt.Sprint(len(p)))
	}
	body = strings.Replace(body, "SIZES", strings.Join(sizes, " "), 1)
	body = strings.Replace(body, "LINES", fmt.Sprint(strings.Count(body, "\n")), 1)
	f := filepath.Join(t.TempDir(), name)
	data := []byte(body)
	for _, p := range payloads {
		data = append(data, p...)
	}
	require.NoError(t, os.WriteFile(f, data, 0o755))
	return f
}

const kvmRun = "NVIDIA-Linux-x86_64-550.90.05-vgpu-kvm.run"

// A forged header that passes every check InspectDriver makes before the
// listing, and whose --list (and anything else) runs code: reading the
// driver, dry run or not, must run none of it.
func TestInspectDriverRunsNothingFromTheFile(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "pwned")
	payload, err := vgputest.TarGz([]string{"./nvidia-installer", "./nvidia-vgpu-mgr"})
	require.NoError(t, err)
	run := makeselfRun(t, kvmRun, `#!/bin/sh
# This script was generated using Makeself 2.1.5
: > `+marker+`
echo ./nvidia-vgpu-mgr
label="NVIDIA Accelerated Graphics Driver for Linux-x86_64 550.90.05"
targetdir="NVIDIA-Linux-x86_64-550.90.05-vgpu-kvm"
filesizes="SIZES"
offset=`+"`head -n LINES \"$0\" | wc -c | tr -d \" \"`"+`
exit 0
`, payload)
	for _, r := range []host.Runner{host.ExecRunner{}, host.NoRunner{}} {
		d, err := InspectDriver(context.Background(), run, r)
		require.NoError(t, err)
		require.True(t, d.Listed)
		require.NoFileExists(t, marker, "the driver file was run to read it")
	}

	// a header whose listing would say nvidia-vgpu-mgr, over a payload
	// without it: the payload decides
	empty, err := vgputest.TarGz([]string{"./nvidia-installer"})
	require.NoError(t, err)
	liar := makeselfRun(t, kvmRun, "#!/bin/sh\necho ./nvidia-vgpu-mgr\ntargetdir=\"NVIDIA-Linux-x86_64-550.90.05-vgpu-kvm\"\nfilesizes=\"SIZES\"\noffset=`head -n LINES \"$0\" | wc -c`\nexit 0\n", empty)
	_, err = InspectDriver(context.Background(), liar, host.ExecRunner{})
	require.ErrorContains(t, err, "the archive holds no nvidia-vgpu-mgr")
}

// makeself 2.4 and later keep the line count in skip=, and NVIDIA's
// newer files compress with xz; several payloads follow one another.
func TestMakeselfLayoutsAndCompressions(t *testing.T) {
	var xzb, zsb bytes.Buffer
	w, err := xz.NewWriter(&xzb)
	require.NoError(t, err)
	_, err = w.Write(tarOf(t, "./nvidia-vgpu-mgr", "./kernel/nvidia.c"))
	require.NoError(t, err)
	require.NoError(t, w.Close())
	zw, err := zstd.NewWriter(&zsb)
	require.NoError(t, err)
	_, err = zw.Write(tarOf(t, "./extra/README"))
	require.NoError(t, err)
	require.NoError(t, zw.Close())

	body := "#!/bin/bash\n# This script was generated using Makeself 2.5.0\ntargetdir=\"NVIDIA-Linux-x86_64-550.90.05-vgpu-kvm\"\nfilesizes=\"SIZES\"\nskip=\"LINES\"\n\t--list)\n\toffset=`head -n \"$skip\" \"$0\" | wc -c | sed \"s/ //g\"`\nexit 0\n"
	run := makeselfRun(t, kvmRun, body, xzb.Bytes(), zsb.Bytes(), tarOf(t, "./plain"))
	f, err := os.Open(run)
	require.NoError(t, err)
	defer f.Close()
	st, _ := f.Stat()
	head := make([]byte, st.Size())
	_, err = f.ReadAt(head, 0)
	require.NoError(t, err)
	h, err := parseRunHeader(head)
	require.NoError(t, err)
	require.Equal(t, []byte{0xfd, '7', 'z', 'X', 'Z', 0}, head[h.Offset:h.Offset+6], "the offset is where the first payload starts")
	l, err := listRun(f, st.Size(), h)
	require.NoError(t, err)
	require.Equal(t, 4, l.Entries, "./nvidia-vgpu-mgr, ./kernel/nvidia.c, ./extra/README, ./plain")
	require.True(t, l.VgpuMgr)

	d, err := InspectDriver(context.Background(), run, host.NoRunner{})
	require.NoError(t, err)
	require.Equal(t, "550.90.05", d.Version)
	require.Len(t, d.SHA256, 64)
}

func TestForgedMakeselfHeadersAreRefused(t *testing.T) {
	tgz, err := vgputest.TarGz([]string{"./nvidia-vgpu-mgr"})
	require.NoError(t, err)
	const top = "#!/bin/sh\ntargetdir=\"NVIDIA-Linux-x86_64-550.90.05-vgpu-kvm\"\n"
	for name, c := range map[string]struct {
		body    string
		payload []byte
		want    string
	}{
		"no offset":       {top + "filesizes=\"SIZES\"\n", tgz, "no makeself payload offset"},
		"unset skip":      {top + "filesizes=\"SIZES\"\noffset=`head -n \"$skip\" \"$0\" | wc -c`\n", tgz, "does not set"},
		"no filesizes":    {top + "offset=`head -n LINES \"$0\" | wc -c`\n", tgz, "no filesizes"},
		"sizes too large": {top + "filesizes=\"99999999\"\noffset=`head -n LINES \"$0\" | wc -c`\n", tgz, "truncated or forged"},
		"lines too many":  {top + "filesizes=\"SIZES\"\noffset=`head -n 100000 \"$0\" | wc -c`\n", tgz, "beyond the first 256 KiB"},
		"not compressed":  {top + "filesizes=\"SIZES\"\noffset=`head -n LINES \"$0\" | wc -c`\n", []byte(strings.Repeat("x", 600)), "not a gzip, xz, zstd or bzip2 stream, nor a tar"},
		"eval in sizes":   {top + "filesizes=\"$(reboot)\"\noffset=`head -n LINES \"$0\" | wc -c`\n", tgz, "no filesizes"},
	} {
		run := makeselfRun(t, kvmRun, c.body, c.payload)
		_, err := InspectDriver(context.Background(), run, host.NoRunner{})
		require.ErrorContains(t, err, c.want, name)
	}
}
