//go:build e2e

// End-to-end tests of `gpuprep check` against a real Debian kernel booted under QEMU/TCG with an
// emulated Intel (intel-iommu) or AMD (amd-iommu) IOMMU. See e2e/qemu/testbed.sh for the guest.
//
//	go test -tags e2e -v -timeout 20m ./e2e/
//
// GPUPREP_E2E_DIR sets the testbed's cache dir (default /var/tmp/gpuprep-e2e; serial logs land in
// its logs/ subdir), GPUPREP_E2E_BIN a prebuilt static gpuprep to test instead of building ./cmd/gpuprep.
//
// The guest has no shared file system and no network: gpuprep's output is printed on the serial
// console between marker lines and extracted from the serial log here. The guest also prints its own
// ground truth (T_PCI lines from sysfs, see e2e/qemu/diag.sh), which the assertions compare gpuprep's
// claims with.
package e2e

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpuprep/gpuprep/internal/testrun"
)

// ---------------------------------------------------------------------------------------- gpuprep JSON

type report struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Host       struct {
		Name   string `json:"name"`
		OS     string `json:"os"`
		Kernel string `json:"kernel"`
	} `json:"host"`
	Mode     string                `json:"mode"`
	Ready    bool                  `json:"ready"`
	Modes    map[string]modeStatus `json:"modes"`
	GPUs     []gpu                 `json:"gpus"`
	Findings []finding             `json:"findings"`
	Summary  map[string]int        `json:"summary"`
}

type modeStatus struct {
	Ready    bool     `json:"ready"`
	Blockers []string `json:"blockers"`
}

type gpu struct {
	Address           string          `json:"address"`
	VendorID          string          `json:"vendorID"`
	DeviceID          string          `json:"deviceID"`
	Name              string          `json:"name"`
	Driver            string          `json:"driver"`
	IOMMUGroup        json.RawMessage `json:"iommuGroup"` // number or string: compared as text
	PassthroughViable bool            `json:"passthroughViable"`
	GroupDevices      []groupDevice   `json:"groupDevices"`
}

type groupDevice struct {
	Address string `json:"address"`
	Class   string `json:"class"`
	Driver  string `json:"driver"`
}

type finding struct {
	Check   string `json:"check"`
	Status  string `json:"status"`
	Subject string `json:"subject"`
	Message string `json:"message"`
	Remedy  string `json:"remedy"`
	Fixable bool   `json:"fixable"`
}

func (r *report) findings(check, subject string) []finding {
	var out []finding
	for _, f := range r.Findings {
		if f.Check == check && (subject == "" || f.Subject == subject) {
			out = append(out, f)
		}
	}
	return out
}

func (r *report) gpu(addr string) *gpu {
	for i := range r.GPUs {
		if r.GPUs[i].Address == addr {
			return &r.GPUs[i]
		}
	}
	return nil
}

func (g *gpu) group() string { return strings.Trim(string(g.IOMMUGroup), `"`) }

func hexID(s string) string { return strings.TrimPrefix(strings.ToLower(s), "0x") }

// --------------------------------------------------------------------------------------- environment

var tb struct {
	root, script, workDir, bin string
	skip                       string
	err                        error
}

var keepPayloads = flag.Bool("e2e.keep", false, "keep the payload directories (printed in the log)")

// TestMain: testrun kills the QEMU guests (every process the tests start:
// they carry testrun's owner in their environment), removes the sshd
// users and the directories on every exit path, an interrupt, a panic and
// -timeout included.
func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(testrun.MainFunc(func() int { return runMain(m) }))
}

func runMain(m *testing.M) int {
	tb.root = repoRoot()
	tb.script = filepath.Join(tb.root, "e2e", "qemu", "testbed.sh")
	tb.workDir = os.Getenv("GPUPREP_E2E_DIR")
	if tb.workDir == "" {
		tb.workDir = "/var/tmp/gpuprep-e2e"
	}
	tmp, err := testrun.TempDir("e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(tmp)

	t0 := time.Now()
	cmd := exec.Command(tb.script, "setup")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		if _, lerr := exec.LookPath("qemu-system-x86_64"); lerr != nil {
			tb.skip = fmt.Sprintf("qemu-system-x86_64 is missing and `testbed.sh setup` could not install it: %v", err)
		} else {
			tb.err = fmt.Errorf("testbed.sh setup: %v", err)
		}
		return m.Run()
	}
	fmt.Fprintf(os.Stderr, "e2e: testbed setup took %.1fs\n", time.Since(t0).Seconds())

	if bin := os.Getenv("GPUPREP_E2E_BIN"); bin != "" { // a prebuilt static binary instead of building one
		tb.bin = bin
		return m.Run()
	}
	t0 = time.Now()
	tb.bin = filepath.Join(tmp, "gpuprep")
	build := exec.Command(goTool(), "build", "-o", tb.bin, "./cmd/gpuprep")
	build.Dir = tb.root
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		tb.err = fmt.Errorf("CGO_ENABLED=0 go build ./cmd/gpuprep: %v\n%s", err, out)
		return m.Run()
	}
	fmt.Fprintf(os.Stderr, "e2e: static gpuprep build took %.1fs\n", time.Since(t0).Seconds())
	return m.Run()
}

func repoRoot() string {
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		return filepath.Dir(filepath.Dir(file))
	}
	wd, _ := os.Getwd() // go test runs in the package directory, e2e/
	return filepath.Dir(wd)
}

func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	if r := os.Getenv("GOROOT"); r != "" {
		return filepath.Join(r, "bin", "go")
	}
	return filepath.Join(runtime.GOROOT(), "bin", "go") //nolint:staticcheck // a test binary runs where it was built: its GOROOT is the go that built it
}

func requireTestbed(t *testing.T) {
	t.Helper()
	if tb.skip != "" {
		t.Skip(tb.skip)
	}
	if tb.err != nil {
		t.Fatal(tb.err)
	}
}

// ------------------------------------------------------------------------------------------ the boot

// invocation is one gpuprep run inside the guest; its stdout, stderr and exit code are reported on the
// serial console under name.
type invocation struct {
	name string
	args []string
}

type pciDev struct {
	addr, id, class, driver, group string
}

type boot struct {
	log    string // serial log path
	wall   time.Duration
	out    map[string]string
	stderr map[string]string
	rc     map[string]int
	secs   map[string]string // guest seconds per invocation
	pci    map[string]pciDev
	kernel string
	uptime map[string]string // T_INIT_START / T_EXIT guest uptimes
	lines  []string
}

var shellSafe = regexp.MustCompile(`^[A-Za-z0-9_.,:/=+-]+$`)

func quote(s string) string {
	if shellSafe.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// runScript is /test/run: the guest's ground truth first, then each gpuprep invocation. stdout and
// stderr go to files first so that they cannot interleave on the console.
func runScript(invs []invocation) string {
	var b strings.Builder
	b.WriteString(`#!/bin/sh
# generated by e2e/check_e2e_test.go
up() { cut -d' ' -f1 /proc/uptime; }
inv() {
  name=$1; shift
  echo "T_CMD $name gpuprep $*"
  t0=$(up)
  /test/gpuprep "$@" >/tmp/out.$name 2>/tmp/err.$name
  rc=$?
  t1=$(up)
  echo "T_OUT_BEGIN $name"
  cat /tmp/out.$name
  echo
  echo "T_OUT_END $name"
  sed "s/^/T_STDERR $name: /" /tmp/err.$name
  echo "T_RC $name $rc $(awk -v a=$t0 -v b=$t1 'BEGIN{printf "%.2f", b-a}')"
}
sh /e2e/diag.sh
`)
	for _, in := range invs {
		b.WriteString("inv " + in.name)
		for _, a := range in.args {
			b.WriteString(" " + quote(a))
		}
		b.WriteString("\n")
	}
	b.WriteString("exit 0\n")
	return b.String()
}

func bootGuest(t *testing.T, name, iommu string, kargs []string, invs []invocation) *boot {
	t.Helper()
	names := make([]string, len(invs))
	for i, in := range invs {
		names[i] = in.name
	}
	return bootScript(t, name, iommu, kargs, runScript(invs), names)
}

func copyFile(src, dst string, mode os.FileMode) error {
	if err := os.Link(src, dst); err == nil {
		return nil
	}
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, data, mode)
}

var (
	rePCI    = regexp.MustCompile(`^T_PCI (\S+) (\S+) class=(\S+) driver=(\S+) group=(\S+)`)
	reUptime = regexp.MustCompile(`^(T_INIT_START|T_EXIT) .*uptime=([0-9.]+)`)
)

func (b *boot) parse(raw string) {
	b.out, b.stderr, b.rc, b.secs = map[string]string{}, map[string]string{}, map[string]int{}, map[string]string{}
	b.pci, b.uptime = map[string]pciDev{}, map[string]string{}
	var cur string
	var buf strings.Builder
	sc := bufio.NewScanner(strings.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		b.lines = append(b.lines, line)
		if cur != "" {
			if line == "T_OUT_END "+cur {
				b.out[cur] = buf.String()
				cur = ""
				buf.Reset()
				continue
			}
			buf.WriteString(line)
			buf.WriteByte('\n')
			continue
		}
		switch f := strings.Fields(line); {
		case len(f) == 2 && f[0] == "T_OUT_BEGIN":
			cur = f[1]
		case len(f) >= 3 && f[0] == "T_RC":
			b.rc[f[1]], _ = strconv.Atoi(f[2])
			if len(f) >= 4 {
				b.secs[f[1]] = f[3]
			}
		case len(f) >= 2 && f[0] == "T_STDERR":
			n := strings.TrimSuffix(f[1], ":")
			b.stderr[n] += strings.TrimPrefix(line, "T_STDERR "+f[1]+" ") + "\n"
		case len(f) >= 2 && f[0] == "T_DIAG" && strings.HasPrefix(f[1], "kernel="):
			b.kernel = strings.TrimPrefix(f[1], "kernel=")
		}
		if m := rePCI.FindStringSubmatch(line); m != nil {
			b.pci[m[1]] = pciDev{addr: m[1], id: m[2], class: m[3], driver: m[4], group: m[5]}
		}
		if m := reUptime.FindStringSubmatch(line); m != nil {
			b.uptime[m[1]] = m[2]
		}
	}
}

func (b *boot) rcOf(name string) int {
	if rc, ok := b.rc[name]; ok {
		return rc
	}
	return -1
}

func (b *boot) tail(n int) string {
	l := b.lines
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

// grep returns the serial lines with one of the prefixes: the guest's own view, for failure messages.
func (b *boot) grep(prefixes ...string) string {
	var out []string
	for _, l := range b.lines {
		for _, p := range prefixes {
			if strings.HasPrefix(l, p) {
				out = append(out, l)
				break
			}
		}
	}
	return strings.Join(out, "\n")
}

// groundTruth is what the guest's sysfs says, printed next to gpuprep's claims when they disagree.
func (b *boot) groundTruth() string {
	return "guest sysfs/proc (from the serial log " + b.log + "):\n" +
		b.grep("T_IOMMU", "T_PCI", "T_GROUP", "T_IRQ", "T_DIAG", "T_MOD", "T_DMESG")
}

// devices returns the guest's PCI devices with the vendor:device id, sorted by address.
func (b *boot) devices(id string) []pciDev {
	var out []pciDev
	for _, d := range b.pci {
		if d.id == id {
			out = append(out, d)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].addr < out[j].addr })
	return out
}

// report parses invocation name's JSON output and checks that it ran with the wanted exit code.
func (b *boot) report(t *testing.T, name string, wantRC int) *report {
	t.Helper()
	if rc := b.rcOf(name); rc != wantRC {
		t.Errorf("%s: gpuprep exit code %d, want %d\nstderr:\n%s\nstdout:\n%s", name, rc, wantRC, b.stderr[name], b.out[name])
	}
	var r report
	dec := json.NewDecoder(strings.NewReader(b.out[name]))
	if err := dec.Decode(&r); err != nil {
		t.Fatalf("%s: gpuprep output is not the JSON report: %v\nstdout:\n%s\nstderr:\n%s", name, err, b.out[name], b.stderr[name])
	}
	if r.APIVersion != "gpuprep/v1" || r.Kind != "ReadinessReport" {
		t.Errorf("%s: apiVersion/kind = %q/%q, want gpuprep/v1/ReadinessReport", name, r.APIVersion, r.Kind)
	}
	if b.kernel != "" && !strings.Contains(r.Host.Kernel, b.kernel) {
		t.Errorf("%s: host.kernel = %q, the guest runs %q", name, r.Host.Kernel, b.kernel)
	}
	return &r
}

func describe(fs []finding) string {
	if len(fs) == 0 {
		return "(none)"
	}
	j, _ := json.MarshalIndent(fs, "", "  ")
	return string(j)
}

func allFindings(r *report) string {
	var s []string
	for _, f := range r.Findings {
		s = append(s, fmt.Sprintf("  %-28s %-5s %-14s %s", f.Check, f.Status, f.Subject, f.Message))
	}
	return strings.Join(s, "\n")
}

// wantFinding asserts exactly one finding check/subject with the status and returns it.
func wantFinding(t *testing.T, b *boot, r *report, name, check, subject, status string) *finding {
	t.Helper()
	fs := r.findings(check, subject)
	if len(fs) != 1 {
		t.Errorf("%s: want one %s finding (subject %q), got %d: %s\nall findings:\n%s\n%s",
			name, check, subject, len(fs), describe(fs), allFindings(r), b.groundTruth())
		if len(fs) == 0 {
			return nil
		}
	}
	if fs[0].Status != status {
		t.Errorf("%s: %s finding (subject %q) status %q, want %q: %s\n%s",
			name, check, subject, fs[0].Status, status, describe(fs), b.groundTruth())
	}
	return &fs[0]
}

// checkAgainstSysfs compares each reported GPU with the guest's sysfs: id, IOMMU group and group members.
func checkAgainstSysfs(t *testing.T, b *boot, r *report, name string) {
	t.Helper()
	for _, g := range r.GPUs {
		d, ok := b.pci[g.Address]
		if !ok {
			t.Errorf("%s: gpu %s is not a PCI device of the guest\n%s", name, g.Address, b.groundTruth())
			continue
		}
		if got := hexID(g.VendorID) + ":" + hexID(g.DeviceID); got != d.id {
			t.Errorf("%s: gpu %s id %s, sysfs says %s", name, g.Address, got, d.id)
		}
		if g.group() != d.group {
			t.Errorf("%s: gpu %s iommuGroup %s, sysfs says group %s\n%s", name, g.Address, g.IOMMUGroup, d.group, b.groundTruth())
		}
		for _, m := range g.GroupDevices {
			if md, ok := b.pci[m.Address]; !ok || md.group != d.group {
				t.Errorf("%s: gpu %s groupDevices has %s, which sysfs puts in group %q (gpu's group %s)\n%s",
					name, g.Address, m.Address, md.group, d.group, b.groundTruth())
			}
		}
	}
}

// -------------------------------------------------------------------------------------- the scenarios

var reFunc0 = regexp.MustCompile(`^0000:[0-9a-f]{2}:00\.0$`)

// assertGPUPair: `check -o json --select 1234:1111` sees the VGA 1234:1111 + HDA 8086:293e pair as one
// viable group, with the IOMMU and interrupt remapping on.
func assertGPUPair(t *testing.T, b *boot, name string) {
	r := b.report(t, name, 3) // no --mode and no workload label: nothing judged
	wantFinding(t, b, r, name, "iommu.kernel", "", "pass")
	wantFinding(t, b, r, name, "iommu.interrupt-remapping", "", "pass")
	checkAgainstSysfs(t, b, r, name)
	if len(r.GPUs) != 1 {
		t.Fatalf("%s: want 1 gpu, got %d: %+v\n%s", name, len(r.GPUs), r.GPUs, b.groundTruth())
	}
	g := r.GPUs[0]
	if !reFunc0.MatchString(g.Address) || hexID(g.VendorID) != "1234" || hexID(g.DeviceID) != "1111" {
		t.Errorf("%s: gpu = %s %s:%s, want 0000:..:00.0 1234:1111", name, g.Address, g.VendorID, g.DeviceID)
	}
	if !g.PassthroughViable {
		t.Errorf("%s: gpu %s passthroughViable false, want true\nfindings:\n%s\n%s", name, g.Address, allFindings(r), b.groundTruth())
	}
	hda := strings.TrimSuffix(g.Address, ".0") + ".1"
	found := false
	for _, m := range g.GroupDevices {
		found = found || m.Address == hda
	}
	if !found {
		t.Errorf("%s: gpu %s groupDevices %+v lack the HDA function %s (sysfs: %+v)\n%s", name, g.Address, g.GroupDevices, hda, b.pci[hda], b.groundTruth())
	}
	if d := b.pci[hda]; d.id != "8086:293e" {
		t.Errorf("%s: guest function %s is %q, want the ICH9 HDA 8086:293e (topology changed?)", name, hda, d.id)
	}
	wantFinding(t, b, r, name, "iommu.groups", g.Address, "pass")
	t.Logf("%s: gpu %s group %s viable=%v groupDevices=%+v; summary %v", name, g.Address, g.group(), g.PassthroughViable, g.GroupDevices, r.Summary)
}

// assertBridge: `check -o json --select 1234:11e8` selects both edu devices; the one behind the
// PCIe-to-PCI bridge shares its group with a pci-testdev (1b36:0005) and is not viable.
func assertBridge(t *testing.T, b *boot, name string) {
	r := b.report(t, name, 3) // no --mode and no workload label: nothing judged
	checkAgainstSysfs(t, b, r, name)
	edus := b.devices("1234:11e8")
	if len(edus) != 2 {
		t.Fatalf("%s: the guest has %d edu devices, want 2 (topology changed?)\n%s", name, len(edus), b.groundTruth())
	}
	if len(r.GPUs) != 2 {
		t.Errorf("%s: want 2 selected devices (the two edu), got %d: %+v\n%s", name, len(r.GPUs), r.GPUs, b.groundTruth())
	}
	for _, e := range edus {
		g := r.gpu(e.addr)
		if g == nil {
			t.Errorf("%s: edu %s (group %s) missing from gpus", name, e.addr, e.group)
			continue
		}
		onBus0 := strings.HasPrefix(e.addr, "0000:00:")
		if onBus0 {
			if !g.PassthroughViable {
				t.Errorf("%s: edu %s on bus 00 (alone in group %s) passthroughViable false, want true\nfindings:\n%s\n%s", name, e.addr, e.group, allFindings(r), b.groundTruth())
			}
			wantFinding(t, b, r, name, "iommu.groups", e.addr, "pass")
			continue
		}
		var foreign []string
		for _, d := range b.pci {
			if d.group == e.group && d.id == "1b36:0005" {
				foreign = append(foreign, d.addr)
			}
		}
		if len(foreign) != 1 {
			t.Fatalf("%s: want one pci-testdev in edu %s's group %s, sysfs has %v\n%s", name, e.addr, e.group, foreign, b.groundTruth())
		}
		if g.PassthroughViable {
			t.Errorf("%s: edu %s behind the PCIe-to-PCI bridge passthroughViable true, want false (shares group %s with %s)\n%s", name, e.addr, e.group, foreign[0], b.groundTruth())
		}
		if f := wantFinding(t, b, r, name, "iommu.groups", e.addr, "fail"); f != nil && !strings.Contains(f.Message, foreign[0]) {
			t.Errorf("%s: iommu.groups message for %s does not name the pci-testdev %s sharing the group: %q", name, e.addr, foreign[0], f.Message)
		}
		t.Logf("%s: edu %s group %s viable=%v groupDevices=%+v", name, e.addr, g.group(), g.PassthroughViable, g.GroupDevices)
	}
}

func logText(t *testing.T, b *boot, name string) {
	t.Logf("%s: gpuprep rc=%d, output:\n%s%s", name, b.rcOf(name), b.out[name], b.stderr[name])
}

func TestCheckIntelIOMMU(t *testing.T) {
	b := bootGuest(t, "intel", "intel", []string{"intel_iommu=on", "iommu=pt"}, []invocation{
		{"gpu", []string{"check", "-o", "json", "--select", "1234:1111"}},
		{"bridge", []string{"check", "-o", "json", "--select", "1234:11e8"}},
		{"text", []string{"check", "--select", "1234:1111"}},
		{"vmpt", []string{"check", "-o", "json", "--mode", "vm-passthrough", "--select", "1234:1111"}},
		{"snapshot", []string{"snapshot", "--select", "1234:1111", "/tmp/snap"}},
		{"snapcheck", []string{"--root", "/tmp/snap", "check", "-o", "json", "--select", "1234:1111"}},
	})
	t.Run("snapshot", func(t *testing.T) { assertSnapshot(t, b, "snapshot", "snapcheck", "gpu") })
	t.Run("gpu-pair", func(t *testing.T) { assertGPUPair(t, b, "gpu") })
	t.Run("bridge-group", func(t *testing.T) { assertBridge(t, b, "bridge") })
	t.Run("text", func(t *testing.T) {
		if rc := b.rcOf("text"); rc != 3 { // no --mode and no workload label: nothing judged
			t.Errorf("gpuprep check (text) exit code %d, want 3\n%s%s", rc, b.out["text"], b.stderr["text"])
		}
		logText(t, b, "text")
	})
	t.Run("vm-passthrough-info", func(t *testing.T) {
		// informational: readiness for vm-passthrough with the IOMMU on (not asserted: depends on more
		// than the IOMMU, e.g. the guest's /dev/kvm through TCG's emulated SVM)
		var r report
		if err := json.Unmarshal([]byte(b.out["vmpt"]), &r); err != nil {
			t.Fatalf("vm-passthrough output: %v\n%s%s", err, b.out["vmpt"], b.stderr["vmpt"])
		}
		t.Logf("--mode vm-passthrough: rc=%d ready=%v modes=%+v\nfindings:\n%s", b.rcOf("vmpt"), r.Ready, r.Modes, allFindings(&r))
	})
}

func TestCheckAMDIOMMU(t *testing.T) {
	b := bootGuest(t, "amd", "amd", []string{"iommu=pt"}, []invocation{
		{"gpu", []string{"check", "-o", "json", "--select", "1234:1111"}},
		{"bridge", []string{"check", "-o", "json", "--select", "1234:11e8"}},
		{"snapshot", []string{"snapshot", "--select", "1234:1111", "/tmp/snap"}},
		{"snapcheck", []string{"--root", "/tmp/snap", "check", "-o", "json", "--select", "1234:1111"}},
	})
	t.Run("snapshot", func(t *testing.T) { assertSnapshot(t, b, "snapshot", "snapcheck", "gpu") })
	t.Run("gpu-pair", func(t *testing.T) { assertGPUPair(t, b, "gpu") })
	t.Run("bridge-group", func(t *testing.T) { assertBridge(t, b, "bridge") })
}

// assertSnapshot: gpuprep snapshot inside the guest (a real kernel's sysfs, IOMMU groups, ACPI tables) says it
// reproduced the read-only commands, and check against the snapshot prints what check printed on the guest.
func assertSnapshot(t *testing.T, b *boot, snap, snapcheck, live string) {
	if rc := b.rcOf(snap); rc != 0 || !strings.Contains(b.out[snap], "Reproduced:") {
		t.Fatalf("gpuprep snapshot: rc=%d\n%s%s", rc, b.out[snap], b.stderr[snap])
	}
	t.Logf("snapshot: %s", b.out[snap])
	if b.out[snapcheck] != b.out[live] || b.rcOf(snapcheck) != b.rcOf(live) {
		t.Errorf("check --root SNAPSHOT (rc %d) differs from check on the guest (rc %d):\n%s\n---\n%s", b.rcOf(snapcheck), b.rcOf(live), b.out[snapcheck], b.out[live])
	}
}

// intelIOMMUDefaultOn reads the booted kernel's config from the testbed's unpacked kernel package
// (prepare_kernel in qemu/testbed.sh): drivers/iommu/intel/Kconfig's choice, DEFAULT_ON or
// DEFAULT_ON_INTGPU_OFF (on except for integrated graphics) against DEFAULT_OFF.
func intelIOMMUDefaultOn(t *testing.T, kernel string) bool {
	t.Helper()
	if kernel == "" {
		t.Fatal("the guest did not report its kernel release (T_DIAG kernel=)")
	}
	p := filepath.Join(tb.workDir, "kernel", kernel, "kroot", "boot", "config-"+kernel)
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("the booted kernel's config: %v", err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if line == "CONFIG_INTEL_IOMMU_DEFAULT_ON=y" || line == "CONFIG_INTEL_IOMMU_DEFAULT_ON_INTGPU_OFF=y" {
			t.Logf("%s: %s", p, line)
			return true
		}
	}
	return false
}

func TestCheckIntelIOMMUOff(t *testing.T) {
	b := bootGuest(t, "intel-off", "intel", []string{"intel_iommu=off", "iommu=pt"}, []invocation{
		{"off", []string{"check", "-o", "json", "--select", "1234:1111"}},
		{"mode", []string{"check", "--mode", "vm-passthrough", "--select", "1234:1111"}},
		{"modejson", []string{"check", "-o", "json", "--mode", "vm-passthrough", "--select", "1234:1111"}},
	})
	t.Run("iommu-kernel-fail", func(t *testing.T) {
		r := b.report(t, "off", 3) // no --mode and no workload label: nothing judged
		wantFinding(t, b, r, "off", "iommu.kernel", "", "fail")
		// The platform's IOMMU is Intel (DMAR) even though TCG's CPU says AMD: intel_iommu=off is named.
		// Whether intel_iommu=on is also wanted is the guest kernel's own decision: its Kconfig default
		// (Debian 12's 6.1 builds CONFIG_INTEL_IOMMU_DEFAULT_ON_INTGPU_OFF=y, on by default, so the
		// argument is "not needed" and removing intel_iommu=off is the fix). Read it from the kernel
		// package the guest booted, not from our model of it.
		onWant := "fail"
		if intelIOMMUDefaultOn(t, b.kernel) {
			onWant = "pass"
		}
		wantFinding(t, b, r, "off", "iommu.cmdline", "intel_iommu=on", onWant)
		wantFinding(t, b, r, "off", "iommu.cmdline", "intel_iommu=off", "fail")
		// Interrupt remapping stays on with DMA remapping off (DMAR-IR).
		wantFinding(t, b, r, "off", "iommu.interrupt-remapping", "", "pass")
		t.Logf("findings:\n%s", allFindings(r))
	})
	t.Run("mode-vm-passthrough-exit-1", func(t *testing.T) {
		if rc := b.rcOf("mode"); rc != 1 {
			t.Errorf("gpuprep check --mode vm-passthrough exit code %d, want 1\n%s%s\n%s", rc, b.out["mode"], b.stderr["mode"], b.groundTruth())
		}
		logText(t, b, "mode")
	})
	t.Run("mode-vm-passthrough-json", func(t *testing.T) {
		r := b.report(t, "modejson", 1)
		if r.Mode != "vm-passthrough" || r.Ready {
			t.Errorf("mode=%q ready=%v, want vm-passthrough, false", r.Mode, r.Ready)
		}
		ms, ok := r.Modes["vm-passthrough"]
		if !ok || ms.Ready {
			t.Errorf("modes[vm-passthrough] = %+v (present %v), want ready false", ms, ok)
		}
		has := false
		for _, id := range ms.Blockers {
			has = has || id == "iommu.kernel"
		}
		if !has {
			t.Errorf("modes[vm-passthrough].blockers = %v, want iommu.kernel among them", ms.Blockers)
		}
	})
}
