// Command fakeagent stands in for gpuprep on the loopback sshd hosts of
// the fleet apply tests (fleet_apply_test.go). The hosts of those tests are
// sshd servers on THIS machine: a real `gpuprep apply` there would change
// this machine's bootloader, drivers and kubelet configuration, so the
// per-host effect is simulated here while SSH, the upload, sudo, the
// canary/batch logic, rollback-on-failure and the report are real. The real
// apply is tested on fixture roots (apply_test.go) and on a real kernel in
// the QEMU guest (e2e/apply_e2e_test.go).
//
// It takes gpuprep's arguments: --root=DIR (the host variable
// gpuprep_root: one directory per simulated host), then apply or rollback.
// DIR/behaviour says what apply does: ready (exit 0 with DIR/report.json,
// a real gpuprep check report, embedded), not-ready (exit 1 with it),
// reboot (exit 4 at the reboot step) or fail (exit 1: a step failed);
// reboot-ok, reboot-drop, reboot-stuck and reboot-not-effective simulate
// one reboot as an older gpuprep reports it (no boot ID, no reason), and
// asks=… (see asks) a host that asks for a reboot in each of several
// boots, as gpuprep apply -o json reports it now.
// Every call is appended to DIR/calls.log, with the SHA-256 of the files
// given to --vgpu-config-file and --driver.
package main

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/gpuprep/gpuprep/provision"
)

func main() {
	args := os.Args[1:]
	root := ""
	if len(args) > 0 && strings.HasPrefix(args[0], "--root=") {
		root, args = strings.TrimPrefix(args[0], "--root="), args[1:]
	}
	if root == "" || len(args) == 0 {
		fmt.Fprintln(os.Stderr, "fakeagent: want --root=DIR apply|rollback …")
		os.Exit(2)
	}
	logf, err := os.OpenFile(filepath.Join(root, "calls.log"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o666)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakeagent:", err)
		os.Exit(3)
	}
	fmt.Fprintln(logf, strings.Join(args, " "))
	// The files apply was given (uploaded by fleet apply): their hashes, so
	// that a test can tell the host got the exact bytes.
	for i, a := range args {
		if (a == "--vgpu-config-file" || a == "--driver") && i+1 < len(args) {
			b, err := os.ReadFile(args[i+1])
			if err != nil {
				fmt.Fprintf(logf, "file %s: %v\n", a, err)
				continue
			}
			fmt.Fprintf(logf, "file %s sha256=%x\n", a, sha256.Sum256(b))
		}
	}
	logf.Close()
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	switch args[0] {
	case "rollback":
		enc.Encode(provision.RollbackResult{Undone: []provision.Undo{}, Notes: []string{"simulated rollback"}})
		if b, _ := os.ReadFile(filepath.Join(root, "behaviour")); strings.TrimSpace(string(b)) == "reboot-not-effective" {
			os.Exit(4) // it restored the kernel arguments: complete after a reboot
		}
		os.Exit(0)
	case "apply":
	default:
		fmt.Fprintf(os.Stderr, "fakeagent: unknown command %q\n", args[0])
		os.Exit(2)
	}
	b, err := os.ReadFile(filepath.Join(root, "behaviour"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakeagent:", err)
		os.Exit(3)
	}
	reboot := slices.Contains(args, "--reboot")
	var multi *provision.Outcome
	if behaviour := strings.TrimSpace(string(b)); strings.HasPrefix(behaviour, "asks=") {
		multi, b = asks(root, behaviour, reboot)
	}
	switch behaviour := strings.TrimSpace(string(b)); behaviour {
	case "reboot-ok", "reboot-drop", "reboot-stuck", "reboot-not-effective":
		// A node that needs a reboot: apply --reboot "reboots" it (the
		// node is back after a second); apply without --reboot stops at
		// the reboot step until then, and afterwards continues: ready, or
		// (reboot-not-effective) the diagnosis of arguments still missing.
		// reboot-stuck never comes back; reboot-drop's connection is cut as
		// apply reboots, as a real reboot cuts it.
		back := filepath.Join(root, "back-at")
		if reboot && behaviour != "reboot-stuck" {
			if _, err := os.Stat(back); err != nil {
				os.WriteFile(back, []byte(time.Now().Add(time.Second).Format(time.RFC3339Nano)), 0o644)
			}
			if behaviour == "reboot-drop" {
				killSSHSession()
			}
		}
		t, err := os.ReadFile(back)
		at, _ := time.Parse(time.RFC3339Nano, string(t))
		switch {
		case err != nil || time.Now().Before(at):
			b = []byte("reboot")
		case behaviour == "reboot-not-effective":
			b = []byte("not-effective")
		default:
			b = []byte("ready")
		}
	}
	mode := ""
	for i, a := range args {
		if a == "--mode" && i+1 < len(args) {
			mode = args[i+1]
		}
	}
	// The fields of gpuprep apply -o json (applyResult in apply.go).
	res := map[string]any{"apiVersion": "gpuprep/v1", "kind": "ApplyResult", "mode": mode, "plan": nil}
	code := 0
	switch strings.TrimSpace(string(b)) {
	case "ready", "not-ready":
		rep, err := os.ReadFile(filepath.Join(root, "report.json"))
		if err != nil {
			fmt.Fprintln(os.Stderr, "fakeagent:", err)
			os.Exit(3)
		}
		res["outcome"] = provision.Outcome{Steps: []provision.StepResult{{ID: "vfio-bind", Status: "done"}, {ID: "label", Status: "done"}}}
		if multi != nil {
			res["outcome"] = multi
		}
		res["report"] = json.RawMessage(rep)
		if strings.TrimSpace(string(b)) == "not-ready" {
			code = 1
		}
	case "reboot":
		status := "stopped"
		if reboot {
			status = "rebooting"
		}
		res["outcome"] = provision.Outcome{Steps: []provision.StepResult{{ID: "kernel-args", Status: "done"}, {ID: "reboot", Status: status}}, Reboot: true}
		if multi != nil {
			res["outcome"] = multi
			res["log"] = []string{"note: simulated: " + multi.RebootFor + " needs a reboot", "reboot required: reboot the node, then run gpuprep apply again to continue"}
		}
		code = 4
	case "not-effective":
		res["outcome"] = provision.Outcome{Steps: []provision.StepResult{{ID: "reboot", Status: "failed", Error: "rebooted, but the running kernel still lacks intel_iommu=on iommu=pt"}}}
		res["error"] = "the node rebooted since apply asked for it, but the running kernel still lacks intel_iommu=on iommu=pt"
		code = 1
	case "fail":
		res["outcome"] = provision.Outcome{Steps: []provision.StepResult{{ID: "vfio-bind", Status: "failed", Error: "0000:3b:00.0: write /sys/bus/pci/drivers/vfio-pci/bind: no such device"}}}
		res["error"] = "vfio-bind: 0000:3b:00.0: write /sys/bus/pci/drivers/vfio-pci/bind: no such device"
		fmt.Fprintln(os.Stderr, "gpuprep: vfio-bind: 0000:3b:00.0: write /sys/bus/pci/drivers/vfio-pci/bind: no such device (run gpuprep apply again to retry, or gpuprep rollback to undo)")
		code = 1
	default:
		fmt.Fprintf(os.Stderr, "fakeagent: behaviour %q\n", b)
		os.Exit(3)
	}
	enc.Encode(res)
	os.Exit(code)
}

// killSSHSession cuts this command's SSH connection, as a host going down
// for a reboot does: it kills the nearest ancestor that is an sshd process.
func killSSHSession() {
	pid := os.Getppid()
	for i := 0; i < 10 && pid > 1; i++ {
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if strings.HasPrefix(string(comm), "sshd") {
			syscall.Kill(pid, syscall.SIGKILL)
			time.Sleep(time.Second) // cut while running, as a reboot would
			return
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return
		}
		// pid (comm) state ppid …: comm may hold spaces, so parse after ')'
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(f) < 2 {
			return
		}
		fmt.Sscan(f[1], &pid)
	}
}

// asks simulates a host that, in its boot n (n reboots done), asks for a
// reboot for reason n of behaviour "asks=R0,R1,…[;boot=DURATION][;drop]",
// and is ready once every reason was served: apply -o json with the boot ID
// (boot-n), why it asks (rebootFor) and the earlier ask the node has
// rebooted since (rebootedFor), as gpuprep apply reports them. With
// --reboot, apply "reboots" the host: boot n+1 begins DURATION (default 1s)
// later, until then apply answers from boot n (asking again, as a real
// apply does before the node goes down); each systemctl reboot is logged to
// calls.log as "reboot boot-n for R", and drop cuts the SSH connection as
// a real reboot does. A reason repeated (asks=kernel-args,kernel-args) is
// a reboot that did not make its change effective and an apply that asks
// again instead of diagnosing it.
func asks(root, behaviour string, reboot bool) (*provision.Outcome, []byte) {
	opts := strings.Split(strings.TrimPrefix(behaviour, "asks="), ";")
	reasons := strings.Split(opts[0], ",")
	took, drop := time.Second, false
	for _, o := range opts[1:] {
		if d, ok := strings.CutPrefix(o, "boot="); ok {
			took, _ = time.ParseDuration(d)
		}
		drop = drop || o == "drop"
	}
	// the boots: when each reboot ends
	var ends []time.Time
	bf := filepath.Join(root, "boots")
	raw, _ := os.ReadFile(bf)
	for _, l := range strings.Fields(string(raw)) {
		t, _ := time.Parse(time.RFC3339Nano, l)
		ends = append(ends, t)
	}
	n, going := 0, false
	for _, t := range ends {
		if time.Now().Before(t) {
			going = true
		} else {
			n++
		}
	}
	o := &provision.Outcome{BootID: fmt.Sprintf("boot-%d", n)}
	// the last ask, "BOOT REASON", answered once the node booted since
	af := filepath.Join(root, "ask")
	if a, err := os.ReadFile(af); err == nil {
		if f := strings.Fields(string(a)); len(f) == 2 && f[0] != o.BootID {
			o.RebootedFor = []string{f[1]}
			os.Remove(af)
		}
	}
	if n >= len(reasons) {
		return o, []byte("ready")
	}
	o.RebootFor, o.Reboot = reasons[n], true
	os.WriteFile(af, []byte(o.BootID+" "+o.RebootFor+"\n"), 0o644)
	status := "stopped"
	if reboot {
		status = "rebooting"
		// every systemctl reboot is logged (a second one in a boot is a
		// host rebooted twice for one ask); one already going is not
		// started again
		lf, _ := os.OpenFile(filepath.Join(root, "calls.log"), os.O_APPEND|os.O_WRONLY, 0o666)
		fmt.Fprintf(lf, "reboot %s for %s\n", o.BootID, o.RebootFor)
		lf.Close()
		if !going {
			f, _ := os.OpenFile(bf, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
			fmt.Fprintln(f, time.Now().Add(took).Format(time.RFC3339Nano))
			f.Close()
		}
		if drop {
			killSSHSession()
		}
	}
	o.Steps = []provision.StepResult{{ID: "reboot", Status: status}}
	return o, []byte("reboot")
}
