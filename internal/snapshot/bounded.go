package snapshot

import (
	"errors"
	"fmt"
	"io"
)

// errStreamTooLong is what a boundedReader returns past its bound.
var errStreamTooLong = errors.New("decompressed stream too long")

// boundedReader reads r until left bytes are read, then fails unless r ends there.
type boundedReader struct {
	r    io.Reader
	left int64
}

func (b *boundedReader) Read(p []byte) (int, error) {
	if b.left <= 0 {
		var one [1]byte
		if n, err := b.r.Read(one[:]); n == 0 && err != nil {
			return 0, err // the stream ends at the bound
		}
		return 0, fmt.Errorf("%w: more than %d MiB (MaxUnpackStream)", errStreamTooLong, MaxUnpackStream>>20)
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	return n, err
}
