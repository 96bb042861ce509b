package fleet

import (
	"errors"
	"io/fs"
	"os"
)

// discardTemp removes tmp, the temporary file a failed write-then-rename
// leaves behind, and returns err joined with what the removal could not
// do (a tmp the write never made is no error).
func discardTemp(err error, tmp string) error {
	if rerr := removeIfThere(tmp); rerr != nil {
		return errors.Join(err, rerr)
	}
	return err
}

// removeIfThere removes the file name; one already gone is no error.
func removeIfThere(name string) error {
	if err := os.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
