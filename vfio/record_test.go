package vfio

import (
	"context"
	"path"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/internal/journal"
	"github.com/gpuprep/gpuprep/internal/pci"
)

// intentFirst is the kernel simulator that, at every sysfs write, checks
// that the journal already holds an intent of command for the device the
// write changes.
type intentFirst struct {
	*fixture.Kernel
	command string
	mu      sync.Mutex
	missing []string
}

func (s *intentFirst) WriteAttr(p, v string) error {
	dev := strings.TrimSpace(v) // bind, unbind: the device is the value
	if strings.HasPrefix(p, "/sys/bus/pci/devices/") {
		dev = strings.Split(strings.TrimPrefix(p, "/sys/bus/pci/devices/"), "/")[0]
	}
	ents, err := journal.Read(s.Root)
	found := false
	for _, e := range ents {
		found = found || e.Kind == journal.KindDriverIntent && e.Command == s.command && e.Device == dev
	}
	if err != nil || !found {
		s.mu.Lock()
		s.missing = append(s.missing, path.Base(p)+" of "+dev)
		s.mu.Unlock()
	}
	return s.Kernel.WriteAttr(p, v)
}

// Bind and Unbind journal each device's intent before the first write
// that changes its driver.
func TestBindAndUnbindJournalTheIntentFirst(t *testing.T) {
	t.Parallel()
	k := sim(t, "turing-multifunction")
	s := &intentFirst{Kernel: k, command: "vfio bind"}
	e := env(k)
	e.Sysfs = s
	inv, p := plan(t, k, opts())
	_, err := Bind(context.Background(), e, inv, p, opts())
	require.NoError(t, err)
	require.Empty(t, s.missing, "sysfs writes made before their intent was journalled")
	require.NotEmpty(t, k.Writes)

	s.command = "vfio unbind"
	_, err = Unbind(context.Background(), e, inventory(t, k), pci.Selector{}, opts())
	require.NoError(t, err)
	require.Empty(t, s.missing, "sysfs writes made before their intent was journalled")
	require.Equal(t, turingNative, drivers(k, turing))
}

func TestDriverBefore(t *testing.T) {
	const a = "0000:41:00.0"
	intent := func(cmd, before, after string) journal.Entry {
		return journal.Entry{Command: cmd, Kind: journal.KindDriverIntent, Device: a, Before: before, After: after}
	}
	done := func(cmd, before, after string) journal.Entry {
		return journal.Entry{Command: cmd, Kind: journal.KindDriver, Device: a, Before: before, After: after}
	}
	other := journal.Entry{Command: "vfio bind", Kind: journal.KindDriver, Device: "0000:42:00.0", Before: "ast", After: "vfio-pci"}
	for _, c := range []struct {
		name    string
		entries []journal.Entry
		before  string
		known   bool
		pending bool
	}{
		{name: "none", entries: []journal.Entry{other}},
		{name: "bind done", entries: []journal.Entry{intent("vfio bind", "nvidia", "vfio-pci"), done("vfio bind", "nvidia", "vfio-pci")}, before: "nvidia", known: true},
		{name: "bind killed after its intent", entries: []journal.Entry{intent("vfio bind", "nvidia", "vfio-pci")}, before: "nvidia", known: true},
		{name: "apply's intent, vfio bind's records", entries: []journal.Entry{intent("apply", "nvidia", "vfio-pci"), intent("vfio bind", "nvidia", "vfio-pci"), done("vfio bind", "nvidia", "vfio-pci")}, before: "nvidia", known: true},
		{name: "killed half-way, bound by the next run from unbound", entries: []journal.Entry{intent("vfio bind", "nvidia", "vfio-pci"), intent("vfio bind", "", "vfio-pci"), done("vfio bind", "", "vfio-pci")}, before: "nvidia", known: true},
		{name: "bind rolled back", entries: []journal.Entry{intent("vfio bind", "nvidia", "vfio-pci"), done("vfio bind (rolled back)", "vfio-pci", "nvidia")}, before: "vfio-pci"},
		{name: "unbind killed after its intent", entries: []journal.Entry{intent("vfio bind", "nvidia", "vfio-pci"), done("vfio bind", "nvidia", "vfio-pci"), intent("vfio unbind", "vfio-pci", "nvidia")}, before: "nvidia", known: true, pending: true},
		{name: "unbind done", entries: []journal.Entry{done("vfio bind", "nvidia", "vfio-pci"), intent("vfio unbind", "vfio-pci", "nvidia"), done("vfio unbind", "vfio-pci", "nvidia")}, before: "vfio-pci"},
		{name: "bound again after an unbind", entries: []journal.Entry{done("vfio bind", "nvidia", "vfio-pci"), done("vfio unbind", "vfio-pci", ""), intent("vfio bind", "", "vfio-pci"), done("vfio bind", "", "vfio-pci")}, before: "", known: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			es := append([]journal.Entry{other}, c.entries...)
			before, known := DriverBefore(es, a)
			require.Equal(t, c.known, known)
			if known {
				require.Equal(t, c.before, before)
			}
			require.Equal(t, c.pending, unbindPending(es, a))
		})
	}
}
