package snapshot

import (
	"archive/tar"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The hostile tarballs in testdata/hostile are refused, and none writes
// outside the directory it is unpacked into (their targets: a file beside
// that directory, and /tmp through a relative and an absolute link).
func TestUnpackHostile(t *testing.T) {
	for name, want := range map[string]string{
		"dotdot.tar.gz":       `entry "sys/../../gpuprep-hostile-escaped" leaves the root`,
		"link-out.tar.gz":     `entry "sys/x/gpuprep-hostile-escaped": `,
		"abs-link-out.tar.gz": `entry "tmp/gpuprep-hostile-escaped": `,
		"device.tar.gz":       `entry "dev/mem": type '3' not supported`,
	} {
		parent := t.TempDir()
		err := Unpack(filepath.Join("testdata", "hostile", name), filepath.Join(parent, "root", "r"))
		require.ErrorContains(t, err, want, name)
		for _, p := range []string{filepath.Join(parent, "gpuprep-hostile-escaped"), filepath.Join(parent, "root", "gpuprep-hostile-escaped"), "/tmp/gpuprep-hostile-escaped"} {
			_, err := os.Lstat(p)
			require.ErrorIs(t, err, os.ErrNotExist, "%s wrote %s", name, p)
		}
	}
}

// Entries that unpack to nothing but carry large PAX records are bounded by
// the decompressed stream, not only by their sizes and count.
func TestUnpackStreamBounded(t *testing.T) {
	defer func(s int64) { MaxUnpackStream = s }(MaxUnpackStream)
	MaxUnpackStream = 1 << 20
	var hs []tar.Header
	for i := range 4 {
		hs = append(hs, tar.Header{Name: "d" + strings.Repeat("x", i) + "/", Typeflag: tar.TypeDir, Mode: 0o755,
			Format: tar.FormatPAX, PAXRecords: map[string]string{"comment": strings.Repeat("z", 400<<10)}})
	}
	err := Unpack(tarball(t, hs, ""), filepath.Join(t.TempDir(), "r"))
	require.ErrorContains(t, err, "decompressed stream too long: more than 1 MiB")
	require.NoError(t, Unpack(tarball(t, hs[:2], ""), filepath.Join(t.TempDir(), "r")), "under the bound")
}
