//go:build e2e

// A real kernel as a fleet host: the QEMU testbed guest (Intel IOMMU) boots with an SSH server
// (`testbed.sh ssh`: dropbear, user root, a host key generated once by `testbed.sh setup`) and is one host
// of a `gpuprep fleet check` run, next to a real OpenSSH sshd on loopback (internal/fleet/sshdtest) that
// runs gpuprep on a fixture root. The guest's report must carry the guest's own IOMMU verdicts, checked
// against the sysfs ground truth it printed on the serial console before starting dropbear.

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/internal/fleet/sshdtest"
)

type fleetReport struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Hosts      []struct {
		Name    string  `json:"name"`
		Address string  `json:"address"`
		Status  string  `json:"status"`
		Error   string  `json:"error"`
		Report  *report `json:"report"`
	} `json:"hosts"`
}

// sshGuest is a guest booted by `testbed.sh ssh`.
type sshGuest struct {
	port    int
	hostKey ssh.PublicKey // the pre-generated dropbear key
	log     string
	cmd     *exec.Cmd
	exited  chan struct{}
}

// bootSSHGuest boots the guest with dropbear on 127.0.0.1:port and returns once the guest printed
// T_SSHD_UP (connecting earlier hangs: slirp accepts the TCP connection itself and waits for the guest).
func bootSSHGuest(t *testing.T, name, iommu, authorizedKeys string, port int) *sshGuest {
	t.Helper()
	requireTestbed(t)
	if _, err := os.Stat("/usr/sbin/dropbear"); err != nil {
		t.Skipf("the ssh boot mode needs dropbear (Debian package dropbear-bin; `testbed.sh setup` installs it as root): %v", err)
	}
	pub, err := os.ReadFile(filepath.Join(tb.workDir, "ssh", "host_ed25519.pub"))
	if err != nil {
		t.Fatalf("the guest's host key (made by `testbed.sh setup`): %v", err)
	}
	hk, _, _, _, err := ssh.ParseAuthorizedKey(pub)
	if err != nil {
		t.Fatalf("guest host key %s: %v", pub, err)
	}
	g := &sshGuest{port: port, hostKey: hk, log: filepath.Join(tb.workDir, "logs", name+".log"), exited: make(chan struct{})}
	if err := os.MkdirAll(filepath.Dir(g.log), 0o755); err != nil {
		t.Fatal(err)
	}
	_ = os.Remove(g.log) // the last run's, if any
	g.cmd = exec.Command(tb.script, "ssh", authorizedKeys, fmt.Sprint(port), iommu)
	g.cmd.Env = append(os.Environ(), "GPUPREP_E2E_LOG="+g.log)
	g.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // qemu (timeout --foreground keeps it in the group) and tee go with it
	var stderr bytes.Buffer
	g.cmd.Stderr = &stderr
	t0 := time.Now()
	if err := g.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = g.cmd.Wait(); close(g.exited) }() // killed by the cleanup: its error says so
	t.Cleanup(func() {
		_ = syscall.Kill(-g.cmd.Process.Pid, syscall.SIGTERM) // exited already, or killed below
		select {
		case <-g.exited:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-g.cmd.Process.Pid, syscall.SIGKILL)
			<-g.exited
		}
	})
	deadline := time.After(4 * time.Minute)
	for {
		raw, _ := os.ReadFile(g.log)
		s := string(raw)
		switch {
		case strings.Contains(s, "T_SSHD_UP"):
			t.Logf("%s: guest sshd up %.1fs after qemu start (serial log %s)", name, time.Since(t0).Seconds(), g.log)
			return g
		case strings.Contains(s, "T_SSHD_FAIL"):
			t.Fatalf("%s: the guest could not start dropbear:\n%s", name, tailLines(s, 40))
		}
		select {
		case <-g.exited:
			t.Fatalf("%s: testbed.sh ssh exited before the guest's sshd was up: %v\n%s\nserial log tail:\n%s",
				name, g.cmd.ProcessState, stderr.String(), tailLines(s, 40))
		case <-deadline:
			t.Fatalf("%s: no T_SSHD_UP from the guest within 4 minutes\nserial log tail:\n%s", name, tailLines(s, 40))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// boot parses what the guest printed so far: its sysfs ground truth (diag.sh runs before dropbear).
func (g *sshGuest) boot(t *testing.T) *boot {
	raw, err := os.ReadFile(g.log)
	if err != nil {
		t.Fatal(err)
	}
	b := &boot{log: g.log}
	b.parse(string(raw))
	return b
}

func tailLines(s string, n int) string {
	var l []string
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		l = append(l, strings.TrimRight(sc.Text(), "\r"))
	}
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

// fleetCheck runs `gpuprep fleet check` (the static e2e build) and parses its JSON report.
func fleetCheck(t *testing.T, args ...string) (int, *fleetReport, string) {
	t.Helper()
	code, out, stderr := fleetGpuprep(t, append([]string{"fleet", "check", "-o", "json"}, args...)...)
	var fr fleetReport
	if err := json.Unmarshal(out, &fr); err != nil || fr.Kind != "FleetReport" {
		t.Fatalf("gpuprep fleet check printed no FleetReport (%v, kind %q):\n%s\n%s", err, fr.Kind, out, stderr)
	}
	return code, &fr, stderr
}

func TestFleetQEMUGuestAndLoopbackSSHD(t *testing.T) {
	requireTestbed(t)
	sshdtest.Skip(t) // root and OpenSSH's sshd, for the loopback host
	env := sshdtest.Shared(t, "e2e")
	t.Cleanup(sshdtest.Cleanup) // after the sshd servers' own cleanups (LIFO); testrun's at exit too

	// The guest accepts the same client key as the loopback sshd.
	port := sshdtest.FreePort(t, "127.0.0.1")
	g := bootSSHGuest(t, "fleet-intel", "intel", env.ClientKey+".pub", port)

	loop := env.Start(t, "127.0.5.1")
	root := filepath.Join(env.Dir, "root-hgx-h200")
	if err := fixture.Build("hgx-h200", root); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("chmod", "-R", "a+rX", root).CombinedOutput(); err != nil {
		t.Fatalf("chmod: %v %s", err, out)
	}

	dir := t.TempDir()
	guestAddr := knownhosts.Normalize(fmt.Sprintf("127.0.0.1:%d", port)) // [127.0.0.1]:PORT
	kh := filepath.Join(dir, "known_hosts")
	sshdtest.Trust(t, kh, false, loop)
	// the pre-generated dropbear key, hashed as `ssh-keygen -H` writes it
	line := knownhosts.Line([]string{knownhosts.HashHostname(guestAddr)}, g.hostKey) + "\n"
	if err := appendFile(kh, line); err != nil {
		t.Fatal(err)
	}

	// The guest has no NVIDIA GPU: its GPU is the VGA 1234:1111 (host variable gpuprep_select); the
	// loopback host keeps the default selection (the fixture's NVIDIA GPUs).
	inv := filepath.Join(dir, "fleet.yaml")
	if err := os.WriteFile(inv, []byte(fmt.Sprintf(`apiVersion: gpuprep/v1
kind: Inventory
hosts:
  - {name: qemu-intel, address: 127.0.0.1, port: %d, user: root, vars: {gpuprep_select: "1234:1111"}}
  - {name: loop-hgx, address: %s, port: %d, user: %s, vars: {gpuprep_root: %s}}
`, port, loop.Host, loop.Port, env.User, root)), 0o644); err != nil {
		t.Fatal(err)
	}
	common := []string{"-i", inv, "--identity", env.ClientKey, "--ssh-config", "none", "--timeout", "60s", "--command-timeout", "3m"}

	// Host-key verification with the dropbear key: a wrong key for the guest's address is refused and
	// the refusal names the guest's real key (the pre-generated one).
	wrong := filepath.Join(dir, "known_hosts.wrong")
	other := sshdtest.WriteKey(t, filepath.Join(dir, "other_host_key"), "")
	if err := os.WriteFile(wrong, []byte(knownhosts.Line([]string{guestAddr}, other)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, fr, _ := fleetCheck(t, append(common, "--known-hosts", wrong, "--limit", "qemu-intel")...)
	if code != 3 || len(fr.Hosts) != 1 || fr.Hosts[0].Status != "host-key-changed" ||
		!strings.Contains(fr.Hosts[0].Error, ssh.FingerprintSHA256(g.hostKey)) {
		t.Fatalf("a wrong known_hosts key for the guest: exit %d, hosts %+v; want exit 3, host-key-changed naming %s",
			code, fr.Hosts, ssh.FingerprintSHA256(g.hostKey))
	}

	// no --mode, no inventory mode, no workload label: every host evaluated and judged for no mode, so
	// each host's verdict is unknown and the fleet exits 3, as a local check without a mode does
	// (report.Verdict); the statuses below say every host was evaluated
	code, fr, stderr := fleetCheck(t, append(common, "--known-hosts", kh)...)
	if code != 3 || !strings.Contains(stderr, "judged: no mode on 2 hosts") {
		t.Errorf("fleet check exit %d, want 3 with \"judged: no mode on 2 hosts\" (every host evaluated, none judged)\n%s", code, stderr)
	}
	if len(fr.Hosts) != 2 {
		t.Fatalf("want 2 hosts in the report, got %+v", fr.Hosts)
	}
	for _, h := range fr.Hosts {
		if h.Status != "evaluated" || h.Report == nil {
			t.Fatalf("host %s: status %q (%s), want evaluated with a report\nguest serial log tail:\n%s",
				h.Name, h.Status, h.Error, tailLines(string(must(os.ReadFile(g.log))), 30))
		}
	}

	// The guest: the real kernel's verdicts, as a local check inside the guest gives them.
	b := g.boot(t)
	gr := fr.Hosts[0].Report
	const name = "fleet qemu-intel"
	if fr.Hosts[0].Name != "qemu-intel" {
		t.Fatalf("hosts out of inventory order: %s first", fr.Hosts[0].Name)
	}
	if b.kernel == "" || !strings.Contains(gr.Host.Kernel, b.kernel) {
		t.Errorf("%s: host.kernel %q, the guest runs %q", name, gr.Host.Kernel, b.kernel)
	}
	wantFinding(t, b, gr, name, "iommu.kernel", "", "pass")
	wantFinding(t, b, gr, name, "iommu.interrupt-remapping", "", "pass")
	checkAgainstSysfs(t, b, gr, name)
	if len(gr.GPUs) != 1 {
		t.Fatalf("%s: want 1 gpu, got %d: %+v\n%s", name, len(gr.GPUs), gr.GPUs, b.groundTruth())
	}
	gp := gr.GPUs[0]
	if !reFunc0.MatchString(gp.Address) || hexID(gp.VendorID) != "1234" || hexID(gp.DeviceID) != "1111" {
		t.Errorf("%s: gpu = %s %s:%s, want 0000:..:00.0 1234:1111", name, gp.Address, gp.VendorID, gp.DeviceID)
	}
	if !gp.PassthroughViable {
		t.Errorf("%s: gpu %s passthroughViable false, want true\nfindings:\n%s\n%s", name, gp.Address, allFindings(gr), b.groundTruth())
	}

	// The loopback host: the fixture's NVIDIA GPUs, not the guest's.
	lr := fr.Hosts[1].Report
	if len(lr.GPUs) == 0 || hexID(lr.GPUs[0].VendorID) != "10de" {
		t.Errorf("loop-hgx: want the fixture's NVIDIA GPUs, got %+v", lr.GPUs)
	}
	if lr.Host.Kernel == gr.Host.Kernel {
		t.Errorf("loop-hgx reports the guest's kernel %q", lr.Host.Kernel)
	}

	// fleet apply on the real kernel, over SSH, with the guest as the canary (its cached binary is
	// stamped now: this run takes the one-session path under busybox's shell): apply binds the GPU's
	// IOMMU group to vfio-pci persistently and labels the node; the check apply ends with verifies it.
	before := gp.Driver
	withKH := append(append([]string{}, common...), "--known-hosts", kh, "--limit", "qemu-intel")
	code, out, stderr := fleetGpuprep(t, append([]string{"fleet", "apply", "--mode", "vm-passthrough", "--yes", "-o", "json"}, withKH...)...)
	var ar struct {
		Kind  string `json:"kind"`
		Hosts []struct {
			Name, Status, Error, Phase, Outcome string
			Report                              *report `json:"report"`
		} `json:"hosts"`
	}
	if err := json.Unmarshal(out, &ar); err != nil || ar.Kind != "FleetReport" || len(ar.Hosts) != 1 {
		t.Fatalf("fleet apply: exit %d, no one-host FleetReport (%v):\n%s\n%s", code, err, out, stderr)
	}
	ah := ar.Hosts[0]
	if code != 0 || ah.Phase != "canary" || ah.Outcome != "ready" || ah.Report == nil || !ah.Report.Ready {
		t.Fatalf("fleet apply on the guest: exit %d, phase %q, outcome %q, error %q; want exit 0, a ready canary\n%s\nguest serial log tail:\n%s",
			code, ah.Phase, ah.Outcome, ah.Error, stderr, tailLines(string(must(os.ReadFile(g.log))), 30))
	}
	wantFinding(t, b, ah.Report, "fleet apply qemu-intel", "vfio.binding", gp.Address, "pass")
	if len(ah.Report.GPUs) != 1 || ah.Report.GPUs[0].Driver != "vfio-pci" {
		t.Errorf("fleet apply: the guest's GPU after apply: %+v, want it on vfio-pci", ah.Report.GPUs)
	}

	// Rollback through fleet run puts the driver back; a fleet check shows the guest as it was.
	code, out, stderr = fleetGpuprep(t, append(append([]string{"fleet", "run", "-o", "json"}, withKH...), "--", "rollback", "-o", "json")...)
	if code != 0 || !strings.Contains(string(out), `"status": "evaluated"`) {
		t.Fatalf("fleet run -- rollback: exit %d\n%s\n%s", code, out, stderr)
	}
	_, fr, _ = fleetCheck(t, withKH...)
	if len(fr.Hosts) != 1 || fr.Hosts[0].Report == nil || len(fr.Hosts[0].Report.GPUs) != 1 {
		t.Fatalf("fleet check after the rollback: %+v", fr.Hosts)
	}
	if got := fr.Hosts[0].Report.GPUs[0].Driver; got != before {
		t.Errorf("after fleet apply and rollback the guest's GPU is on %q, before it was on %q", got, before)
	}
}

// fleetGpuprep runs the static e2e build of gpuprep with args and returns its exit code, stdout
// and stderr.
func fleetGpuprep(t *testing.T, args ...string) (int, []byte, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, tb.bin, args...)
	cmd.Env = append(os.Environ(), "SSH_AUTH_SOCK=", "NO_COLOR=1")
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	t0 := time.Now()
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("gpuprep %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	t.Logf("gpuprep %s: exit %d in %.1fs\n%s", strings.Join(args, " "), code, time.Since(t0).Seconds(), stderr.String())
	return code, out.Bytes(), stderr.String()
}

func appendFile(name, s string) error {
	f, err := os.OpenFile(name, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(s); err != nil {
		_ = f.Close() // the error is the write's
		return err
	}
	return f.Close()
}

func must[T any](v T, _ error) T { return v }
