package fleet

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// The SSH session fills its Stdout and Stderr with io.Copy: the bounds must
// hold through it (an embedded bytes.Buffer's ReadFrom bypassed them).
func TestOutputBuffersBoundedThroughCopy(t *testing.T) {
	calls := 0
	b := &boundedBuffer{max: 1000, over: func() { calls++ }}
	_, err := io.Copy(b, strings.NewReader(strings.Repeat("x", 5000)))
	var big *OutputLimitError
	assert.True(t, errors.As(err, &big), "%v", err)
	assert.Equal(t, 1000, len(b.Bytes()))
	assert.Equal(t, 1, calls)

	ok := &boundedBuffer{max: 1000}
	_, err = io.Copy(ok, strings.NewReader(strings.Repeat("y", 1000)))
	assert.NoError(t, err)
	assert.Equal(t, 1000, len(ok.Bytes()))

	l := &limitedBuffer{max: 100}
	_, err = io.Copy(l, strings.NewReader(strings.Repeat("z", 5000)))
	assert.NoError(t, err)
	assert.Equal(t, 100, len(l.Bytes()))
}
