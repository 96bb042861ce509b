package report

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuprep/gpuprep/preflight"
	"github.com/stretchr/testify/require"
)

// A saved report whose aligned fields are past what gpuprep writes is
// refused: rendered as text, every row would be padded to the widest.
func TestParseBoundsColumns(t *testing.T) {
	f := &FleetReport{Mode: "container"}
	for range 2000 {
		f.Hosts = append(f.Hosts, FleetHost{Name: "h", Status: "evaluated", Outcome: OutcomeReady})
	}
	f.Hosts[1].Name = strings.Repeat("x", 100000)
	f.Finish()
	var b bytes.Buffer
	require.NoError(t, FleetJSON(&b, f))
	_, err := Parse("big.json", b.Bytes())
	require.EqualError(t, err, "big.json: hosts[1].name: 100000 bytes, more than 253: not a report gpuprep wrote")

	r := &Report{APIVersion: APIVersion, Kind: Kind, Findings: []preflight.Finding{{Check: "iommu"}, {Check: strings.Repeat("c", 65)}}}
	j, err := json.Marshal(r)
	require.NoError(t, err)
	_, err = Parse("host.json", j)
	require.EqualError(t, err, "host.json: findings[1].check: 65 bytes, more than 64: not a report gpuprep wrote")

	// The reports gpuprep wrote on a real host read.
	paths, _ := filepath.Glob("../testdata/device/*/*.json")
	read := 0
	for _, p := range paths {
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		var head struct{ Kind string }
		if json.Unmarshal(b, &head) != nil || head.Kind != Kind && head.Kind != FleetKind {
			continue // vfio status, lists and the like
		}
		_, err = Parse(p, b)
		require.NoError(t, err)
		read++
	}
	require.NotZero(t, read)
}
