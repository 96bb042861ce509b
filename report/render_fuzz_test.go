package report

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzRender reads fuzzed report JSON as `gpuprep render` does. What Parse
// accepts renders in every format, and JSON is a fixed point: the JSON
// written reads back and writes the same bytes.
//
//	go test ./report -run '^$' -fuzz FuzzRender -fuzztime 20s
func FuzzRender(f *testing.F) {
	paths, _ := filepath.Glob("../testdata/device/*/*.json")
	for _, p := range paths {
		b, err := os.ReadFile(p)
		require.NoError(f, err)
		if len(b) < 256<<10 {
			f.Add(b)
		}
	}
	fleet := &FleetReport{Mode: "vm-passthrough", Rollout: &Rollout{Canary: 1, Batch: 2, Failures: 1, Stopped: "canary gpu-1 failed"},
		Hosts: []FleetHost{{Name: "gpu-1", Status: "evaluated", Phase: "canary", Outcome: OutcomeRolledBack, Error: "apply failed"}}}
	fleet.Finish()
	var b bytes.Buffer
	require.NoError(f, Render(&b, &Document{Fleet: fleet}, "json"))
	f.Add(b.Bytes())
	f.Fuzz(func(t *testing.T, in []byte) {
		d, err := Parse("in.json", in)
		if err != nil {
			return
		}
		for _, format := range Formats {
			var out bytes.Buffer
			require.NoError(t, Render(&out, d, format), format)
		}
		var once, twice bytes.Buffer
		require.NoError(t, Render(&once, d, "json"))
		d2, err := Parse("once.json", once.Bytes())
		require.NoError(t, err, "%s", once.Bytes())
		require.NoError(t, Render(&twice, d2, "json"))
		require.Equal(t, once.String(), twice.String())
	})
}
