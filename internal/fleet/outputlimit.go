package fleet

import (
	"bytes"
	"fmt"
)

// DefaultMaxStdout bounds what one remote command may print on stdout and
// the coordinator keep in memory (Exec.MaxStdout). gpuprep's own answers
// are small: a readiness report of an 8-GPU node is about 20 KiB, an apply
// result less; 16 MiB is some 800 times that, room for any subcommand
// fleet run may start, while 200 hosts at the bound still fit in the
// coordinator's memory (3.2 GiB) instead of one runaway host taking it all
// and losing the report and --rollback-on-failure with it.
const DefaultMaxStdout = 16 << 20

// OutputLimitError is a host's command printing more than the bound on
// stdout: the command was stopped and its output cut there.
type OutputLimitError struct {
	Host  string // the host's name, once known (Exec.Run adds it)
	Limit int
}

func (e *OutputLimitError) Error() string {
	who := "the remote command"
	if e.Host != "" {
		who = "gpuprep on host " + e.Host
	}
	return fmt.Sprintf("%s printed more than %s on stdout (a report is tens of KiB): stopped it and kept the first %s", who, sizeString(e.Limit), sizeString(e.Limit))
}

func sizeString(n int) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}

// boundedBuffer keeps at most max bytes; the first write past them calls
// over (which stops the command) and fails, as does every later one. The
// buffer is a field, not embedded: an embedded bytes.Buffer's ReadFrom
// would let io.Copy (the SSH session's) write around Write and its bound.
type boundedBuffer struct {
	buf      bytes.Buffer
	max      int
	overflow bool
	over     func()
}

func (b *boundedBuffer) Write(p []byte) (int, error) {
	if b.overflow {
		return 0, &OutputLimitError{Limit: b.max}
	}
	if room := b.max - b.buf.Len(); len(p) > room {
		b.buf.Write(p[:room])
		b.overflow = true
		if b.over != nil {
			b.over()
		}
		return room, &OutputLimitError{Limit: b.max}
	}
	return b.buf.Write(p)
}

func (b *boundedBuffer) Bytes() []byte { return b.buf.Bytes() }
