package fleet

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// hashCacheRig is a hash cache in a directory of the test's own for which
// every file is old enough to be recorded (the race window is tested on
// its own).
func hashCacheRig(t *testing.T) hashCache {
	return hashCache{dir: filepath.Join(t.TempDir(), "sha256"), window: -time.Hour, local: localFS}
}

func sha(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

func cacheEntries(t *testing.T, dir string) []string {
	es, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

func TestLoadFileHashCache(t *testing.T) {
	c := hashCacheRig(t)
	dir := c.dir
	p := filepath.Join(t.TempDir(), "installer.run")
	content := []byte("driver installer, version 1\n")
	require.NoError(t, os.WriteFile(p, content, 0o644))

	f, err := loadFile(p, c)
	require.NoError(t, err)
	assert.Equal(t, sha(content), f.SHA256)
	entries := cacheEntries(t, dir)
	require.Len(t, entries, 1, "the hash is recorded")
	entry := filepath.Join(dir, entries[0])

	// The next load reads the entry: one whose hash was replaced answers
	// with that hash (which shows the file was not hashed again).
	b, err := os.ReadFile(entry)
	require.NoError(t, err)
	id, _, _ := strings.Cut(string(b), "\n")
	fake := strings.Repeat("ab", sha256.Size)
	require.NoError(t, os.WriteFile(entry, []byte(id+"\n"+fake+"\n"), 0o600))
	f, err = loadFile(p, c)
	require.NoError(t, err)
	assert.Equal(t, fake, f.SHA256, "the cached hash is used while the identity holds")

	// Any change to the file changes its identity (ctime): the same size,
	// the modification time put back, still hashed again.
	fi, err := os.Stat(p)
	require.NoError(t, err)
	changed := []byte("driver installer, version 2\n")
	require.Len(t, changed, len(content))
	require.NoError(t, os.WriteFile(p, changed, 0o644))
	require.NoError(t, os.Chtimes(p, fi.ModTime(), fi.ModTime()))
	f, err = loadFile(p, c)
	require.NoError(t, err)
	assert.Equal(t, sha(changed), f.SHA256)
	// and a chmod alone too
	require.NoError(t, os.WriteFile(entry, []byte(id+"\n"+fake+"\n"), 0o600))
	require.NoError(t, os.Chmod(p, 0o600))
	f, err = loadFile(p, c)
	require.NoError(t, err)
	assert.Equal(t, sha(changed), f.SHA256)
}

func TestHashCacheBadEntries(t *testing.T) {
	c := hashCacheRig(t)
	dir := c.dir
	p := filepath.Join(t.TempDir(), "file")
	content := []byte("content\n")
	require.NoError(t, os.WriteFile(p, content, 0o644))
	_, err := loadFile(p, c)
	require.NoError(t, err)
	entries := cacheEntries(t, dir)
	require.Len(t, entries, 1)
	entry := filepath.Join(dir, entries[0])
	b, err := os.ReadFile(entry)
	require.NoError(t, err)
	id, _, _ := strings.Cut(string(b), "\n")
	for name, bad := range map[string]string{
		"empty":           "",
		"no hash":         id + "\n",
		"short hash":      id + "\nabcd\n",
		"not hex":         id + "\n" + strings.Repeat("zz", sha256.Size) + "\n",
		"upper case":      id + "\n" + strings.Repeat("AB", sha256.Size) + "\n",
		"other identity":  strings.Replace(id, "size=", "size=1", 1) + "\n" + strings.Repeat("ab", sha256.Size) + "\n",
		"another version": strings.Replace(id, hashCacheVersion, "gpuprep-hash/0", 1) + "\n" + strings.Repeat("ab", sha256.Size) + "\n",
	} {
		require.NoError(t, os.WriteFile(entry, []byte(bad), 0o600))
		f, err := loadFile(p, c)
		require.NoError(t, err, name)
		assert.Equal(t, sha(content), f.SHA256, name)
	}
}

// A file whose status changed within the race window is hashed and not
// recorded: a second change in the same tick of the file system's clock
// could keep its identity.
func TestHashCacheRaceWindow(t *testing.T) {
	c := hashCacheRig(t)
	dir := c.dir
	c.window = time.Hour
	p := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(p, []byte("new\n"), 0o644))
	f, err := loadFile(p, c)
	require.NoError(t, err)
	assert.Equal(t, sha([]byte("new\n")), f.SHA256)
	assert.Empty(t, cacheEntries(t, dir))
}

// No cache directory, or one that cannot be written: the hash all the same.
func TestHashCacheUnusable(t *testing.T) {
	p := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(p, []byte("x\n"), 0o644))
	blocker := filepath.Join(t.TempDir(), "not-a-dir")
	require.NoError(t, os.WriteFile(blocker, nil, 0o644))
	c := hashCacheRig(t)
	c.dir = filepath.Join(blocker, "gpuprep", "sha256") // cannot be made under a file
	f, err := loadFile(p, c)
	require.NoError(t, err)
	assert.Equal(t, sha([]byte("x\n")), f.SHA256)
	// the user's cache directory not absolute: no cache
	t.Setenv("XDG_CACHE_HOME", "relative/dir")
	t.Setenv("HOME", "")
	c = userHashCache()
	require.Empty(t, c.dir)
	c.window = -time.Hour
	f, err = loadFile(p, c)
	require.NoError(t, err)
	assert.Equal(t, sha([]byte("x\n")), f.SHA256)
	_, err = os.Stat("relative")
	assert.True(t, os.IsNotExist(err), "nothing written relative to the working directory")
}

func TestLoadBinaryHashCache(t *testing.T) {
	c := hashCacheRig(t)
	dir := c.dir
	self, err := os.Executable()
	require.NoError(t, err)
	b1, err := loadBinary(self, c)
	require.NoError(t, err)
	content, err := os.ReadFile(self)
	require.NoError(t, err)
	assert.Equal(t, sha(content), b1.SHA256)
	require.Len(t, cacheEntries(t, dir), 1)
	b2, err := loadBinary(self, c)
	require.NoError(t, err)
	assert.Equal(t, b1, b2)
}

// On a file system the cache does not trust (NFS, SMB, FUSE: the server
// stamps the times, by its own clock) nothing is read from the cache or
// written to it.
func TestHashCacheOnlyOnLocalFileSystems(t *testing.T) {
	c := hashCacheRig(t)
	dir := c.dir
	p := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(p, []byte("x\n"), 0o644))
	_, err := loadFile(p, c)
	require.NoError(t, err)
	entries := cacheEntries(t, dir)
	require.Len(t, entries, 1)
	entry := filepath.Join(dir, entries[0])
	b, err := os.ReadFile(entry)
	require.NoError(t, err)
	id, _, _ := strings.Cut(string(b), "\n")
	require.NoError(t, os.WriteFile(entry, []byte(id+"\n"+strings.Repeat("ab", sha256.Size)+"\n"), 0o600))

	c.local = func(uint64) bool { return false } // as if the file were on NFS
	f, err := loadFile(p, c)
	require.NoError(t, err)
	assert.Equal(t, sha([]byte("x\n")), f.SHA256, "the entry is not read")
	require.NoError(t, os.Remove(entry))
	_, err = loadFile(p, c)
	require.NoError(t, err)
	assert.Empty(t, cacheEntries(t, dir), "nor written")
}
