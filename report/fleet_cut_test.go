package report

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A fleet report file cut anywhere while its run went on (the run killed
// after 3 of 5 hosts) parses: the hosts whose entries are whole, marked
// interrupted, and how many of the planned it holds.
func TestCutFleetReportParses(t *testing.T) {
	f := sample()
	f.Hosts = append(f.Hosts, FleetHost{Name: "e", Status: "timeout", Error: "no answer"})
	path := filepath.Join(t.TempDir(), "fleet.json")
	st, err := NewFleetStream(path, &FleetReport{Mode: f.Mode}, len(f.Hosts))
	require.NoError(t, err)
	var ends []int // the file's size after each host
	for i := range 3 {
		h := f.Hosts[i]
		require.NoError(t, st.Add(i, &h))
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		ends = append(ends, len(b))
	}
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	start := bytes.Index(b, []byte(`"hosts": [`)) + len(`"hosts": [`)
	for n := start; n <= len(b); n++ {
		d, err := Parse("fleet.json", b[:n])
		require.NoError(t, err, "cut at %d", n)
		require.NotNil(t, d.Cut, "cut at %d", n)
		whole := 0
		for _, e := range ends {
			if n >= e {
				whole++
			}
		}
		assert.Equal(t, whole, d.Cut.Hosts, "cut at %d", n)
		assert.Equal(t, 5, d.Cut.Of)
		assert.Len(t, d.Fleet.Hosts, whole)
		assert.True(t, d.Fleet.Interrupted)
		assert.Equal(t, whole, d.Fleet.Summary.Hosts)
	}
	d, _ := Parse("fleet.json", b)
	assert.Equal(t, "incomplete: 3 of 5 hosts, cut off", d.Cut.String())

	// cut before the hosts, or not a fleet report: the error it was
	_, err = Parse("fleet.json", b[:start-3])
	assert.ErrorContains(t, err, "not JSON")
	_, err = Parse("x.json", []byte(`{"apiVersion":"gpuprep/v1","kind":"ReadinessReport","findings":[`))
	assert.ErrorContains(t, err, "not JSON")

	// finished, the file has no planned count and no cut
	for i := 3; i < 5; i++ {
		h := f.Hosts[i]
		require.NoError(t, st.Add(i, &h))
	}
	require.NoError(t, st.Close(false))
	b, err = os.ReadFile(path)
	require.NoError(t, err)
	assert.NotContains(t, string(b), "planned")
	d, err = Parse("fleet.json", b)
	require.NoError(t, err)
	assert.Nil(t, d.Cut)
}
