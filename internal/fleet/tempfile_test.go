package fleet

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// discardTemp keeps the write's error and adds the removal's, but not the
// removal of a temporary file the write never made.
func TestDiscardTemp(t *testing.T) {
	werr := errors.New("write failed")
	dir := t.TempDir()

	assert.Same(t, werr, discardTemp(werr, filepath.Join(dir, "never-made")))

	made := filepath.Join(dir, "made")
	require.NoError(t, os.WriteFile(made, nil, 0o600))
	assert.Same(t, werr, discardTemp(werr, made))
	_, err := os.Stat(made)
	assert.ErrorIs(t, err, fs.ErrNotExist, "removed")

	// a directory with an entry: os.Remove refuses it
	busy := filepath.Join(dir, "busy")
	require.NoError(t, os.MkdirAll(filepath.Join(busy, "entry"), 0o700))
	err = discardTemp(werr, busy)
	assert.ErrorIs(t, err, werr)
	assert.ErrorContains(t, err, busy)
}
