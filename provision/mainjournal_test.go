package provision_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/effect"
	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/internal/journal"
	"github.com/gpuprep/gpuprep/preflight"
	"github.com/gpuprep/gpuprep/provision"
)

// node is a fixture root (internal/fixture's scenario) with its kernel
// simulator as sysfs and runner, and a clock that ticks a second a call:
// the journal's times and the backups' names come out the same each run.
type node struct {
	dir string
	k   *fixture.Kernel
	env effect.Effector
}

func newNode(t *testing.T, scenario string) *node {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, fixture.Build(scenario, dir))
	k, err := fixture.NewKernel(dir)
	require.NoError(t, err)
	var mu sync.Mutex
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	clock := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		now = now.Add(time.Second)
		return now
	}
	return &node{dir: dir, k: k, env: effect.Effector{Root: k.Root, Sysfs: k, Runner: k, Clock: clock}}
}

func (n *node) plan(t *testing.T, mode preflight.Mode) *provision.Plan {
	t.Helper()
	p, err := provision.NewPlan(context.Background(), n.k.Root, provision.Options{Mode: mode, Runner: n.k})
	require.NoError(t, err)
	return p
}

func (n *node) apply(t *testing.T, mode preflight.Mode) *provision.Outcome {
	t.Helper()
	oc, err := provision.Apply(context.Background(), n.env, n.plan(t, mode), provision.ApplyOptions{})
	require.NoError(t, err)
	return oc
}

func (n *node) journalPath() string { return filepath.Join(n.dir, journal.Path) }

// tree is every regular file and link under the root but the journal, with
// the sha256 of its content (a link: its target), sorted: what a rollback
// leaves.
func (n *node) tree(t *testing.T) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(n.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(p, n.dir)
		switch {
		case rel == journal.Path:
			return nil
		case d.Type()&fs.ModeSymlink != 0:
			to, err := os.Readlink(p)
			if err != nil {
				return err
			}
			out = append(out, rel+" -> "+to)
		case d.IsDir():
			out = append(out, rel+"/")
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			h := sha256.Sum256(b)
			out = append(out, rel+" "+hex.EncodeToString(h[:8]))
		}
		return nil
	})
	require.NoError(t, err)
	sort.Strings(out)
	return out
}

// mainJournals are the flows whose journals testdata/main-journal-*.jsonl
// hold as main's gpuprep wrote them (commit c1dcee8, before journal records
// had a version), with what main's Rollback did with each
// (testdata/main-rollback-*.json: its result and the tree it left).
// Regenerate them from that commit only:
//
//	git worktree add /tmp/m c1dcee8 && cp provision/mainjournal_test.go /tmp/m/provision/ &&
//	(cd /tmp/m && GPUPREP_WRITE_MAIN_JOURNAL=1 go test ./provision -run TestMainJournal)
//
// then copy /tmp/m/provision/testdata/main-* here.
var mainJournals = []struct {
	name, scenario string
	mode           preflight.Mode
}{
	{"container-vfio-bound", "vfio-bound", preflight.Container},
	{"passthrough-iommu-off", "iommu-off-kernel", preflight.VMPassthrough},
}

type mainRollback struct {
	Result *provision.RollbackResult `json:"result"`
	Error  string                    `json:"error,omitempty"`
	Tree   []string                  `json:"tree"`
}

// TestMainJournal rolls back journals main's gpuprep wrote (version-less
// records): on the root as apply left it, Rollback must do what main's did,
// to the byte of each file it leaves.
func TestMainJournal(t *testing.T) {
	write := os.Getenv("GPUPREP_WRITE_MAIN_JOURNAL") != ""
	for _, c := range mainJournals {
		t.Run(c.name, func(t *testing.T) {
			n := newNode(t, c.scenario)
			n.apply(t, c.mode)
			jfile := filepath.Join("testdata", "main-journal-"+c.name+".jsonl")
			rfile := filepath.Join("testdata", "main-rollback-"+c.name+".json")
			if write {
				b, err := os.ReadFile(n.journalPath())
				require.NoError(t, err)
				require.NoError(t, os.WriteFile(jfile, b, 0o644))
			} else {
				// main's journal in place of the one this apply wrote
				b, err := os.ReadFile(jfile)
				require.NoError(t, err)
				require.NoError(t, os.WriteFile(n.journalPath(), b, 0o600))
			}
			res, err := provision.Rollback(context.Background(), n.env, provision.RollbackOptions{})
			got := mainRollback{Result: res, Tree: n.tree(t)}
			if err != nil {
				got.Error = err.Error()
			}
			gb, jerr := json.MarshalIndent(got, "", "  ")
			require.NoError(t, jerr)
			if write {
				require.NoError(t, os.WriteFile(rfile, append(gb, '\n'), 0o644))
				return
			}
			want, rerr := os.ReadFile(rfile)
			require.NoError(t, rerr)
			require.Equal(t, string(want), string(gb)+"\n")
		})
	}
}
