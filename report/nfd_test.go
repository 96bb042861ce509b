package report

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/gpuprep/gpuprep/preflight"
)

// nfdParse reads a feature file gpuprep wrote, stricter than NFD's local
// source (restated in full, and held against NFD's own tests, in
// cmd/gpuprep/nfd_local_test.go): comments skipped, the expiry-time
// directive parsed as RFC 3339, every other line key=value with the key in
// feature.node.kubernetes.io; the name and value must pass the checks NFD's
// worker drops a label on (pkg/nfd-worker/nfd-worker.go GetFeatureLabels at
// v0.19.0): k8s.io/apimachinery's validation.IsQualifiedName and
// IsValidLabelValue, the functions NFD calls.
func nfdParse(t *testing.T, s string) (map[string]string, time.Time) {
	t.Helper()
	labels := map[string]string{}
	var expiry time.Time
	for _, l := range strings.Split(s, "\n") {
		l = strings.TrimSpace(l)
		if v, ok := strings.CutPrefix(l, "# +expiry-time="); ok {
			e, err := time.Parse(time.RFC3339, v)
			require.NoError(t, err)
			expiry = e
			continue
		}
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		k, v, ok := strings.Cut(l, "=")
		require.True(t, ok, l)
		ns, _, ok := strings.Cut(k, "/")
		require.True(t, ok, "unprefixed %q", k)
		require.Equal(t, "feature.node.kubernetes.io", ns)
		require.Empty(t, validation.IsQualifiedName(k), k)
		require.Empty(t, validation.IsValidLabelValue(v), v)
		require.False(t, strings.HasPrefix(v, "@"), "nfd-master takes %q for a dynamic value", v)
		labels[k] = v
	}
	return labels, expiry
}

func nfdReport() *Report {
	return &Report{Modes: map[preflight.Mode]*preflight.ModeResult{
		preflight.Container:     {Ready: true, Blockers: []string{}},
		preflight.VMPassthrough: {Blockers: []string{"iommu.cmdline"}, Unknown: []string{"cpu.virtualization"}},
		preflight.VMVGPU:        {Blockers: []string{"iommu.cmdline"}, Skipped: []string{"vgpu.types"}},
	}}
}

func TestNFDFeatureFile(t *testing.T) {
	exp := time.Date(2026, 12, 2, 3, 4, 5, 0, time.FixedZone("x", 3600))
	var b bytes.Buffer
	require.NoError(t, NFD(&b, nfdReport(), NFDOptions{Version: "v1.2.0-3-gabc", Expiry: exp}))
	labels, e := nfdParse(t, b.String())
	require.True(t, e.Equal(exp))
	require.Contains(t, b.String(), "# +expiry-time=2026-12-02T02:04:05Z\n")
	require.Equal(t, map[string]string{
		"feature.node.kubernetes.io/gpuprep.ready.container":          "true",
		"feature.node.kubernetes.io/gpuprep.ready.vm-passthrough":     "false",
		"feature.node.kubernetes.io/gpuprep.ready.vm-vgpu":            "false",
		"feature.node.kubernetes.io/gpuprep.check.iommu.cmdline":      "fail",
		"feature.node.kubernetes.io/gpuprep.check.cpu.virtualization": "error",
		"feature.node.kubernetes.io/gpuprep.check.vgpu.types":         "skip",
		"feature.node.kubernetes.io/gpuprep.version":                  "v1.2.0-3-gabc",
	}, labels)
	// the expiry directive comes before every label it must expire
	require.Less(t, strings.Index(b.String(), "+expiry-time"), strings.Index(b.String(), "gpuprep.ready"))
}

// Only the modes evaluated (check --mode) get a ready label.
func TestNFDOneMode(t *testing.T) {
	r := &Report{Modes: map[preflight.Mode]*preflight.ModeResult{preflight.VMPassthrough: {Ready: true, Blockers: []string{}}}}
	var b bytes.Buffer
	require.NoError(t, NFD(&b, r, NFDOptions{Version: "dev"}))
	labels, e := nfdParse(t, b.String())
	require.True(t, e.IsZero())
	require.Equal(t, map[string]string{NFDReadyLabel(preflight.VMPassthrough): "true", NFDPrefix + "gpuprep.version": "dev"}, labels)
}

// Hostile check IDs and versions become valid label names and values,
// bounded in length and in number.
func TestNFDSanitizes(t *testing.T) {
	var ids []string
	for i := 0; i < 300; i++ {
		ids = append(ids, strings.Repeat("x", i%90)+"/é\n"+string(rune('a'+i%26))+strings.Repeat("y", i))
	}
	ids = append(ids, "", "...", "-a b-")
	r := &Report{Modes: map[preflight.Mode]*preflight.ModeResult{preflight.Container: {Blockers: ids}}}
	var b bytes.Buffer
	require.NoError(t, NFD(&b, r, NFDOptions{Version: "dev build (dirty)/" + strings.Repeat("9", 100)}))
	labels, _ := nfdParse(t, b.String())
	require.LessOrEqual(t, len(labels), nfdMaxChecks+2)
	v := labels[NFDPrefix+"gpuprep.version"]
	require.Len(t, v, 63)
	require.True(t, strings.HasPrefix(v, "dev_build__dirty__999"), v)
	require.Less(t, b.Len(), NFDMaxFile)
}

func TestLabelValue(t *testing.T) {
	for in, want := range map[string]string{
		"v0.3.1": "v0.3.1", "": "", "-x-": "x", "a b": "a_b", "é": "", strings.Repeat("a", 62) + "-b": strings.Repeat("a", 62),
	} {
		require.Equal(t, want, LabelValue(in), in)
		require.Empty(t, validation.IsValidLabelValue(LabelValue(in)), in)
	}
}

func TestRenderNFD(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, Render(&b, &Document{Host: nfdReport()}, "nfd"))
	labels, e := nfdParse(t, b.String())
	require.Equal(t, "false", labels[NFDReadyLabel(preflight.VMVGPU)])
	require.WithinDuration(t, time.Now().Add(NFDTTL), e, time.Minute)
	require.Error(t, Render(&b, &Document{Fleet: &FleetReport{}}, "nfd"))
}

// A check's worst status over the modes wins, whatever the modes' order.
func TestFailingChecksWorstStatus(t *testing.T) {
	r := &Report{Modes: map[preflight.Mode]*preflight.ModeResult{
		preflight.Container:     {Skipped: []string{"a"}, Unknown: []string{"b"}},
		preflight.VMPassthrough: {Unknown: []string{"a"}, Blockers: []string{"b"}},
		preflight.VMVGPU:        {Skipped: []string{"c"}},
	}}
	require.Equal(t, map[string]preflight.Status{"a": preflight.Error, "b": preflight.Fail, "c": preflight.Skip}, FailingChecks(r))
}
