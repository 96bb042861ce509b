//go:build e2e

// End-to-end test of `gpuprep plan`, `apply` and `rollback` against a real kernel (see
// check_e2e_test.go for the testbed, vfio_e2e_test.go for the snapshots): one boot with the IOMMU
// arguments already on the kernel command line and no bootloader configuration in the guest, so the
// plan has no kernel-args and no reboot step; apply binds the "GPU" (1234:1111 and its HDA function)
// to vfio-pci persistently and labels the node in /etc/default/kubelet, a re-run changes nothing,
// rollback puts everything back and a second rollback changes nothing.
package e2e

import (
	"encoding/json"
	"strings"
	"testing"
)

type applyOutput struct {
	Plan struct {
		Steps []struct {
			ID string `json:"id"`
		} `json:"steps"`
		Notes []string `json:"notes"`
	} `json:"plan"`
	Outcome struct {
		Steps []struct {
			ID     string `json:"id"`
			Status string `json:"status"`
		} `json:"steps"`
		Reboot bool `json:"rebootRequired"`
	} `json:"outcome"`
	Error  string  `json:"error"`
	Report *report `json:"report"`
}

func kubeletProbe(step string) string {
	return `if [ -e /etc/default/kubelet ]; then echo "T_KUBELET ` + step + ` $(cat /etc/default/kubelet)"; else echo "T_KUBELET ` + step + ` absent"; fi`
}

func TestApplyRollbackIntel(t *testing.T) {
	kargs := []string{"intel_iommu=on", "iommu=pt", "e2e_modules=kvm,e1000e", "no_timer_check"}
	sel := []string{"--mode", "vm-passthrough", "--select", "1234:1111"}
	steps := []string{
		"snap boot", kubeletProbe("boot"),
		inv("plan", append([]string{"plan", "-o", "json"}, sel...)...),
		inv("apply", append([]string{"apply", "--yes", "-o", "json"}, sel...)...),
		"snap apply", "openg apply", kubeletProbe("apply"),
		inv("reapply", append([]string{"apply", "--yes"}, sel...)...),
		"snap reapply",
		inv("rollback", "rollback"),
		"snap rollback", kubeletProbe("rollback"),
		inv("rerollback", "rollback"),
		"snap rerollback",
	}
	names := []string{"plan", "apply", "reapply", "rollback", "rerollback"}
	b := bootScript(t, "apply-intel", "intel", kargs, vfioScript(steps), names)
	if b.pci[vgaAddr].id != "1234:1111" || b.pci[hdaAddr].id != "8086:293e" {
		t.Fatalf("topology changed: %s=%+v %s=%+v", vgaAddr, b.pci[vgaAddr], hdaAddr, b.pci[hdaAddr])
	}
	group := b.pci[vgaAddr].group
	boot := b.snap("boot")
	if boot.driver[vgaAddr] != "" || boot.driver[hdaAddr] != "" || len(boot.files) != 0 {
		t.Fatalf("at boot: VGA %q, HDA %q, files %v; want unbound, no gpuprep files", boot.driver[vgaAddr], boot.driver[hdaAddr], boot.files)
	}
	kubelet := func(step string) string {
		return strings.TrimSpace(strings.TrimPrefix(b.grep("T_KUBELET "+step+" "), "T_KUBELET "+step+" "))
	}
	bootKubelet := kubelet("boot")

	t.Run("plan", func(t *testing.T) {
		wantRC(t, b, "plan", 0)
		var p struct {
			Steps []struct {
				ID string `json:"id"`
			} `json:"steps"`
			Notes []string `json:"notes"`
		}
		if err := json.Unmarshal([]byte(b.out["plan"]), &p); err != nil {
			t.Fatalf("plan: not JSON: %v\n%s%s", err, b.out["plan"], b.stderr["plan"])
		}
		var ids []string
		for _, s := range p.Steps {
			ids = append(ids, s.ID)
		}
		if strings.Join(ids, ",") != "vfio-bind,label" {
			t.Errorf("plan steps %v, want vfio-bind, label (the arguments are running: no kernel-args, no reboot)\n%s", ids, b.out["plan"])
		}
		if !strings.Contains(strings.Join(p.Notes, "\n"), "no bootloader configuration found, but the running kernel already has intel_iommu=on iommu=pt") {
			t.Errorf("plan does not say why there is no kernel-args step: %v", p.Notes)
		}
		if s := b.snap("boot"); s.driver[vgaAddr] != "" {
			t.Errorf("plan changed something")
		}
	})
	t.Run("apply", func(t *testing.T) {
		var a applyOutput
		if err := json.Unmarshal([]byte(b.out["apply"]), &a); err != nil {
			t.Fatalf("apply: not JSON: %v\n%s%s", err, b.out["apply"], b.stderr["apply"])
		}
		if a.Error != "" || a.Outcome.Reboot || a.Report == nil {
			t.Fatalf("apply: error %q, reboot %v, report %v\n%s%s", a.Error, a.Outcome.Reboot, a.Report != nil, b.out["apply"], b.stderr["apply"])
		}
		wantRC(t, b, "apply", 0)
		if !a.Report.Ready {
			t.Errorf("apply: the embedded check is not ready: %v\n%s", a.Report.Modes["vm-passthrough"].Blockers, allFindings(a.Report))
		}
		wantFinding(t, b, a.Report, "apply", "vfio.binding", vgaAddr, "pass")
		s := b.snap("apply")
		for _, addr := range []string{vgaAddr, hdaAddr} {
			if s.driver[addr] != "vfio-pci" {
				t.Errorf("after apply: %s on %q, want vfio-pci\n%s", addr, s.driver[addr], b.grep("T_SNAP apply "))
			}
		}
		if s.open != "ok" || s.group != group {
			t.Errorf("after apply: open /dev/vfio/%s: %q", group, s.open)
		}
		if _, ok := s.files["/etc/modprobe.d/gpuprep-vfio.conf"]; !ok {
			t.Errorf("after apply: no persistent configuration: %v", s.files)
		}
		if k := kubelet("apply"); !strings.Contains(k, "nvidia.com/gpu.workload.config=vm-passthrough") {
			t.Errorf("after apply: /etc/default/kubelet: %q", k)
		}
		if s.driver[nicAddr] != "e1000e" {
			t.Errorf("apply touched the NIC: %q", s.driver[nicAddr])
		}
	})
	t.Run("reapply-is-a-no-op", func(t *testing.T) {
		wantRC(t, b, "reapply", 0)
		if !strings.Contains(b.out["reapply"], "Nothing to do") || strings.Contains(b.out["reapply"], "->") {
			t.Errorf("second apply:\n%s%s", b.out["reapply"], b.stderr["reapply"])
		}
		wantDrivers(t, b, "reapply", map[string]string{vgaAddr: "vfio-pci", hdaAddr: "vfio-pci"})
	})
	t.Run("rollback", func(t *testing.T) {
		wantRC(t, b, "rollback", 0)
		s := b.snap("rollback")
		for _, addr := range []string{vgaAddr, hdaAddr} {
			if s.driver[addr] != "" || s.override[addr] != "" {
				t.Errorf("after rollback: %s driver %q override %q, want unbound as at boot\n%s", addr, s.driver[addr], s.override[addr], b.out["rollback"])
			}
		}
		if len(s.files) != 0 {
			t.Errorf("after rollback: gpuprep files remain: %v", s.files)
		}
		if s.hasVFIONode(group) {
			t.Errorf("after rollback: /dev/vfio/%s remains", group)
		}
		if k := kubelet("rollback"); k != bootKubelet {
			t.Errorf("after rollback: /etc/default/kubelet %q, at boot %q", k, bootKubelet)
		}
		t.Logf("rollback output:\n%s%s", b.out["rollback"], b.stderr["rollback"])
	})
	t.Run("rerollback-is-a-no-op", func(t *testing.T) {
		wantRC(t, b, "rerollback", 0)
		if !strings.Contains(b.out["rerollback"], "Nothing to roll back.") {
			t.Errorf("second rollback:\n%s%s", b.out["rerollback"], b.stderr["rerollback"])
		}
	})
}
