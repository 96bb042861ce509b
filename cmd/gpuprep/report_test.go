package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/report"
)

// fleetFile saves a two-host fleet report made of fixture hosts' reports.
func fleetFile(t *testing.T) string {
	t.Helper()
	f := &report.FleetReport{}
	for _, sc := range []string{"vfio-bound", "consumer-shared-group"} {
		out, _, _ := gpuprep(t, "check", "--root", fixtureRoot(t, sc), "-o", "json", "--mode", "vm-passthrough")
		r := &report.Report{}
		require.NoError(t, json.Unmarshal([]byte(out), r))
		f.Hosts = append(f.Hosts, report.FleetHost{Name: r.Host.Name, Address: "10.0.0." + string(rune('1'+len(f.Hosts))), Status: "evaluated", Mode: r.Mode, Report: r})
	}
	f.Hosts = append(f.Hosts, report.FleetHost{Name: "gpu-<script>", Address: "10.0.0.9", Status: "unreachable", Error: "dial tcp 10.0.0.9:22: connect: no route to host"})
	f.Finish()
	var b bytes.Buffer
	require.NoError(t, report.FleetJSON(&b, f))
	p := filepath.Join(t.TempDir(), "fleet.json")
	require.NoError(t, os.WriteFile(p, b.Bytes(), 0o644))
	return p
}

func TestReportRenderEveryFormat(t *testing.T) {
	t.Setenv("NO_COLOR", "1")
	fleet := fleetFile(t)
	for _, f := range report.Formats {
		out, stderr, code := gpuprep(t, "report", "render", fleet, "-o", f)
		require.Equal(t, 0, code, "%s: %s", f, stderr)
		require.Contains(t, out, "vfio-node", f)
	}
	out, _, _ := gpuprep(t, "report", "render", fleet, "-o", "html")
	golden(t, "fleet.html", out)
	require.NotContains(t, out, "<script>", "inventory values are escaped")
	require.NotContains(t, out, "http", "self-contained: no external resources")
	// a host report renders too, as a fleet of one for the CI formats
	host := reportFile(t, "hgx-h200")
	out, _, code := gpuprep(t, "report", "render", host, "-o", "junit")
	require.Equal(t, 0, code)
	require.Contains(t, out, "<testsuite")
	out, _, _ = gpuprep(t, "report", "render", host, "-o", "text")
	require.Contains(t, out, "Readiness")
	_, stderr, code := gpuprep(t, "report", "render", host, "-o", "pdf")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, `--output "pdf"`)
	_, _, code = gpuprep(t, "check", "--root", fixtureRoot(t, "hgx-h200"), "-o", "junit")
	require.Equal(t, exitUnknown, code, "no mode named or labelled: nothing judged")
}

// The HTML report is checked in a real headless browser: Chromium parses it
// (its serialised DOM has every host and the open/closed sections) and
// renders it to a PNG.
func TestHTMLReportInHeadlessChromium(t *testing.T) {
	browser, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("GPUPREP_REQUIRE_BROWSER") == "1" {
			t.Fatal("chromium not installed (apt-get install chromium)")
		}
		t.Skip("chromium not installed")
	}
	out, _, _ := gpuprep(t, "report", "render", fleetFile(t), "-o", "html")
	dir := t.TempDir()
	page := filepath.Join(dir, "report.html")
	require.NoError(t, os.WriteFile(page, []byte(out), 0o644))
	args := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--user-data-dir=" + filepath.Join(dir, "profile")}
	dom, err := exec.Command(browser, append(args, "--dump-dom", "file://"+page)...).Output()
	require.NoError(t, err)
	d := string(dom)
	for _, want := range []string{`<details id="host-0">`, `<details id="host-1" open="">`, `<details id="host-2" open="">`, "gpu-&lt;script&gt;", "vfio-node", "desktop"} {
		require.Contains(t, d, want)
	}
	require.Equal(t, 3, strings.Count(d, "<details"), "one section per host")
	shot := filepath.Join(dir, "report.png")
	_, err = exec.Command(browser, append(args, "--screenshot="+shot, "--window-size=1280,1600", "file://"+page)...).CombinedOutput()
	require.NoError(t, err)
	st, err := os.Stat(shot)
	require.NoError(t, err)
	require.Greater(t, st.Size(), int64(20_000), "a rendered page, not a blank one")
	if keep := os.Getenv("GPUPREP_KEEP_SCREENSHOT"); keep != "" {
		b, _ := os.ReadFile(shot)
		_ = os.WriteFile(keep, b, 0o644)
	}
}

// check --compact prints the -o json report on one line (what fleet check
// asks its hosts for), the same document; with another format it is a
// usage error.
func TestCheckCompactJSON(t *testing.T) {
	root := fixtureRoot(t, "hgx-h200")
	ind, _, code := gpuprep(t, "check", "--root", root, "-o", "json")
	require.Equal(t, exitUnknown, code, "no mode named or labelled: nothing judged")
	com, _, code := gpuprep(t, "check", "--root", root, "-o", "json", "--compact")
	require.Equal(t, exitUnknown, code)
	require.Equal(t, 1, strings.Count(com, "\n"))
	var want bytes.Buffer
	require.NoError(t, json.Compact(&want, []byte(ind)))
	require.Equal(t, want.String()+"\n", com)
	_, stderr, code := gpuprep(t, "check", "--root", root, "--compact")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "--compact is for -o json")
}
