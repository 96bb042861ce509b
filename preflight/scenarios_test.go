package preflight_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/pci"
	"github.com/gpuprep/gpuprep/preflight"
)

// run builds scenario name and runs every check against it.
func run(t *testing.T, name string, selector ...string) (*preflight.Env, *preflight.Result) {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, fixture.Build(name, dir))
	return runRoot(t, dir, selector...)
}

// runRoot runs every check against the root dir.
func runRoot(t *testing.T, dir string, selector ...string) (*preflight.Env, *preflight.Result) {
	t.Helper()
	root, err := host.NewRoot(dir)
	require.NoError(t, err)
	sel, err := pci.ParseSelector(selector)
	require.NoError(t, err)
	env, err := preflight.NewEnv(root, host.NoRunner{}, sel, "")
	require.NoError(t, err)
	res, err := preflight.Run(env, preflight.All(), preflight.Options{})
	require.NoError(t, err)
	return env, res
}

// want is one expected finding: check, subject and status, for one mode
// ("" = any mode the finding counts for).
type want struct {
	check, subject string
	status         preflight.Status
	mode           preflight.Mode
}

func find(res *preflight.Result, w want) []preflight.Finding {
	var out []preflight.Finding
	for _, f := range res.Findings {
		if f.Check == w.check && f.Subject == w.subject && (w.mode == "" || f.AppliesTo(w.mode)) {
			out = append(out, f)
		}
	}
	return out
}

func TestScenarios(t *testing.T) {
	const (
		C  = preflight.Container
		PT = preflight.VMPassthrough
		VG = preflight.VMVGPU
	)
	cases := []struct {
		scenario string
		ready    map[preflight.Mode]bool
		blockers map[preflight.Mode][]string
		findings []want
	}{
		{
			scenario: "hgx-h200",
			ready:    map[preflight.Mode]bool{C: true, PT: false, VG: false},
			blockers: map[preflight.Mode][]string{PT: {"vfio.binding"}, VG: {"vgpu.manager"}},
			findings: []want{
				{"cpu.virtualization", "cpu flag vmx", preflight.Pass, ""},
				{"iommu.kernel", "/sys/class/iommu", preflight.Pass, ""},
				{"iommu.cmdline", "intel_iommu=on", preflight.Pass, ""},
				{"iommu.interrupt-remapping", "/proc/interrupts", preflight.Pass, ""},
				{"iommu.groups", "0000:13:00.0", preflight.Pass, ""},
				{"iommu.groups", "0000:83:00.0", preflight.Pass, ""},
				{"vfio.binding", "0000:13:00.0", preflight.Fail, PT},
				{"vfio.binding", "0000:13:00.0", preflight.Pass, C},
				{"gpu.present", "0000:91:00.0,0000:93:00.0,0000:95:00.0,0000:97:00.0", preflight.Pass, ""},
			},
		},
		{
			scenario: "consumer-shared-group",
			blockers: map[preflight.Mode][]string{PT: {"iommu.groups", "vfio.binding"}},
			findings: []want{{"iommu.groups", "0000:02:00.0", preflight.Fail, ""}},
		},
		{
			scenario: "turing-multifunction",
			blockers: map[preflight.Mode][]string{PT: {"vfio.binding"}},
			findings: []want{{"iommu.groups", "0000:01:00.0", preflight.Pass, ""}},
		},
		{
			scenario: "two-gpus-one-group",
			blockers: map[preflight.Mode][]string{PT: {"vfio.binding"}},
			findings: []want{{"iommu.groups", "0000:03:00.0", preflight.Warn, ""}, {"iommu.groups", "0000:04:00.0", preflight.Warn, ""}},
		},
		{
			scenario: "vtx-disabled",
			ready:    map[preflight.Mode]bool{C: true, PT: false},
			blockers: map[preflight.Mode][]string{PT: {"cpu.virtualization", "kvm.device", "vfio.binding"}},
			findings: []want{{"cpu.virtualization", "MSR 0x3A (IA32_FEATURE_CONTROL)", preflight.Fail, ""}, {"kvm.device", "/dev/kvm", preflight.Fail, ""}},
		},
		{
			scenario: "vtx-disabled-old-kernel",
			blockers: map[preflight.Mode][]string{PT: {"kvm.device", "vfio.binding"}},
			findings: []want{{"cpu.virtualization", "cpu flag vmx", preflight.Warn, ""}, {"kvm.device", "/dev/kvm", preflight.Fail, ""}},
		},
		{
			scenario: "capture-no-modules",
			ready:    map[preflight.Mode]bool{C: true, PT: false},
			blockers: map[preflight.Mode][]string{PT: {"vfio.binding"}},
			findings: []want{{"vfio.modules", "/proc/sys/kernel/osrelease", preflight.Error, ""}},
		},
		{
			scenario: "iommu-off-kernel",
			blockers: map[preflight.Mode][]string{PT: {"iommu.kernel", "iommu.cmdline", "iommu.groups", "vfio.binding"}},
			findings: []want{
				{"iommu.firmware", "/sys/firmware/acpi/tables/DMAR", preflight.Pass, ""},
				{"iommu.kernel", "/sys/class/iommu", preflight.Fail, ""},
				{"iommu.cmdline", "intel_iommu=on", preflight.Fail, ""},
				{"iommu.cmdline", "iommu=pt", preflight.Warn, ""},
				{"iommu.interrupt-remapping", "/proc/interrupts", preflight.Skip, ""},
				{"iommu.groups", "0000:17:00.0", preflight.Fail, ""},
			},
		},
		{
			scenario: "reboot-pending",
			findings: []want{{"iommu.cmdline", "intel_iommu=on", preflight.Fail, ""}},
		},
		{
			scenario: "no-gpu",
			ready:    map[preflight.Mode]bool{C: false, PT: false, VG: false},
			findings: []want{{"gpu.present", "/sys/bus/pci/devices", preflight.Fail, ""}},
		},
		{
			scenario: "vfio-bound",
			ready:    map[preflight.Mode]bool{C: false, PT: true, VG: false},
			blockers: map[preflight.Mode][]string{C: {"vfio.binding", "node.label"}, PT: {}},
			findings: []want{
				{"vfio.binding", "0000:11:00.0", preflight.Warn, PT}, // bound live: nothing binds it at boot
				{"vfio.binding", "0000:11:00.0", preflight.Fail, C},
				{"node.label", "nvidia.com/gpu.workload.config=vm-passthrough", preflight.Pass, PT},
				{"node.label", "nvidia.com/gpu.workload.config=vm-passthrough", preflight.Fail, VG},
			},
		},
		{
			scenario: "mdev-vgpu",
			ready:    map[preflight.Mode]bool{VG: true},
			findings: []want{{"vgpu.manager", "nvidia vGPU manager", preflight.Pass, ""}, {"vgpu.types", "0000:21:00.0", preflight.Pass, ""},
				{"vgpu.support", "0000:21:00.0", preflight.Pass, ""}},
		},
		{
			// no VF holds a vGPU, and nothing but gpuprep creates one
			// on the vendor-specific VFIO interface
			scenario: "sriov-vgpu",
			ready:    map[preflight.Mode]bool{VG: false},
			blockers: map[preflight.Mode][]string{VG: {"vgpu.types"}},
			findings: []want{{"vgpu.types", "0000:41:00.0", preflight.Fail, ""}, {"vgpu.support", "0000:41:00.0", preflight.Warn, ""}},
		},
		{
			scenario: "amd-svm-disabled",
			findings: []want{{"cpu.virtualization", "MSR 0xC0010114 (VM_CR)", preflight.Fail, ""}},
		},
		{
			scenario: "amd-ready",
			ready:    map[preflight.Mode]bool{PT: true},
			findings: []want{
				{"cpu.virtualization", "cpu flag svm", preflight.Pass, ""},
				{"iommu.cmdline", "iommu=pt", preflight.Warn, ""}, // /etc/default/grub lacks it: kernels installed later
				{"iommu.interrupt-remapping", "/proc/interrupts", preflight.Pass, ""},
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.scenario, func(t *testing.T) {
			t.Parallel()
			_, res := run(t, tc.scenario)
			for m, r := range tc.ready {
				require.Equal(t, r, res.Modes[m].Ready, "%s readiness", m)
			}
			for m, b := range tc.blockers {
				require.ElementsMatch(t, b, res.Modes[m].Blockers, "%s blockers", m)
			}
			for _, w := range tc.findings {
				got := find(res, w)
				require.NotEmpty(t, got, "no %s finding for %s (mode %q); findings: %+v", w.check, w.subject, w.mode, res.Findings)
				for _, f := range got {
					require.Equal(t, w.status, f.Status, "%s %s: %s", w.check, w.subject, f.Message)
				}
			}
			for _, f := range res.Findings {
				require.NotEmpty(t, f.Subject, "%s has no subject", f.Check)
				require.NotEmpty(t, f.Message, "%s has no message", f.Check)
				if f.Status == preflight.Fail {
					require.NotEmpty(t, f.Remedy, "%s %s fails without a remedy", f.Check, f.Subject)
				}
				if f.Fixable {
					require.Contains(t, f.FixCommand, "gpuprep ", "%s fixable without a command", f.Check)
				}
			}
		})
	}
}

func TestACSEvidenceNamesThePortWithoutACS(t *testing.T) {
	_, res := run(t, "consumer-shared-group")
	f := find(res, want{"iommu.groups", "0000:02:00.0", preflight.Fail, ""})
	require.Len(t, f, 1)
	require.Contains(t, f[0].Message, "0000:00:14.0 (USB 8086:7ae0, driver xhci_hcd)")
	require.Contains(t, f[0].Message, "0000:00:1c.0 (root port) has no ACS capability")
}

func TestSelectingTheForeignDevicesMakesTheGroupViable(t *testing.T) {
	_, res := run(t, "consumer-shared-group", "10de", "0000:00:14.0", "0000:00:17.0", "0000:03:00.0")
	f := find(res, want{"iommu.groups", "0000:02:00.0", preflight.Warn, ""})
	require.Len(t, f, 1, "%+v", res.Findings)
	require.Contains(t, f[0].Message, "must be assigned to the same VM")
}

func TestMultifunctionSiblingOnHostDriverFailsBinding(t *testing.T) {
	dir := t.TempDir()
	b := fixture.New(dir)
	fixture.TuringMultifunction(b)
	// The GPU is on vfio-pci but its audio function stayed on snd_hda_intel.
	b.Remove("/sys/bus/pci/drivers/nvidia").Remove(b.DevPath("0000:01:00.0") + "/driver")
	b.Mkdir("/sys/bus/pci/drivers/vfio-pci").Link(b.DevPath("0000:01:00.0")+"/driver", "/sys/bus/pci/drivers/vfio-pci")
	require.NoError(t, b.Err())
	_, res := runRoot(t, dir)
	f := find(res, want{"vfio.binding", "0000:01:00.0", "", preflight.VMPassthrough})
	require.Len(t, f, 1)
	require.Equal(t, preflight.Fail, f[0].Status)
	require.Contains(t, f[0].Message, "0000:01:00.1 (audio, driver snd_hda_intel)")
}

func TestIgnoreDemotesAndSkipSays(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, fixture.Build("iommu-off-kernel", dir))
	root, _ := host.NewRoot(dir)
	env, err := preflight.NewEnv(root, host.NoRunner{}, pci.Selector{}, preflight.VMPassthrough)
	require.NoError(t, err)
	res, err := preflight.Run(env, preflight.All(), preflight.Options{Mode: preflight.VMPassthrough,
		Ignore: map[string]bool{"iommu.kernel": true}, Skip: map[string]bool{"iommu.groups": true}})
	require.NoError(t, err)
	skipped := 0
	for _, f := range res.Findings {
		if f.Check == "iommu.groups" {
			// not run, and said: one skip finding, never a verdict
			require.Equal(t, preflight.Skip, f.Status)
			require.Equal(t, "--skip iommu.groups", f.Subject)
			skipped++
		}
		if f.Check == "iommu.kernel" {
			require.Equal(t, preflight.Warn, f.Status)
			require.True(t, f.Ignored)
		}
		require.True(t, f.AppliesTo(preflight.VMPassthrough), "%s leaked into the run for one mode", f.Check)
	}
	require.Equal(t, 1, skipped)
	require.NotContains(t, res.Modes[preflight.VMPassthrough].Blockers, "iommu.kernel")
	require.NotContains(t, res.Modes[preflight.VMPassthrough].Blockers, "iommu.groups")
	// a skipped check leaves the mode not ready: its readiness is not established
	require.Equal(t, []string{"iommu.groups"}, res.Modes[preflight.VMPassthrough].Skipped)
	require.False(t, res.Modes[preflight.VMPassthrough].Ready)
	require.Empty(t, res.Modes[preflight.Container].Skipped, "not a container check, nor judged in this run")
	_, err = preflight.Run(env, preflight.All(), preflight.Options{Skip: map[string]bool{"iommu.nope": true}})
	require.ErrorContains(t, err, "--skip iommu.nope: no such check")
}

func TestCrashingCheckIsAnErrorNotAVerdict(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, fixture.Build("no-gpu", dir))
	root, _ := host.NewRoot(dir)
	env, err := preflight.NewEnv(root, host.NoRunner{}, pci.Selector{}, "")
	require.NoError(t, err)
	boom := preflight.Check{ID: "x.boom", Modes: preflight.Modes, Run: func(*preflight.Env) []preflight.Finding { panic("nil map") }}
	res, err := preflight.Run(env, []preflight.Check{boom}, preflight.Options{})
	require.NoError(t, err)
	require.Equal(t, preflight.Error, res.Findings[0].Status)
	require.False(t, res.Modes[preflight.Container].Ready)
	require.Equal(t, []string{"x.boom"}, res.Modes[preflight.Container].Unknown)
}

func TestWantedArgsFollowThePlatformIOMMUNotTheCPU(t *testing.T) {
	dir := t.TempDir()
	b := fixture.New(dir)
	fixture.IOMMUOffKernel(b)
	// An AMD CPU string on a platform with an Intel IOMMU (as QEMU's TCG "max" CPU shows).
	b.CPUs(fixture.CPU{Vendor: "AuthenticAMD", Count: 2, Flags: []string{"svm"}})
	require.NoError(t, b.Err())
	root, _ := host.NewRoot(dir)
	env, err := preflight.NewEnv(root, host.NoRunner{}, pci.Selector{}, "")
	require.NoError(t, err)
	require.Equal(t, "intel", env.IOMMUVendor())
	res, err := preflight.Run(env, preflight.All(), preflight.Options{})
	require.NoError(t, err)
	require.NotEmpty(t, find(res, want{"iommu.cmdline", "intel_iommu=on", preflight.Fail, ""}))
}

func TestNodeLabelMustMatchTheHostsState(t *testing.T) {
	for _, c := range []struct {
		label, want string
		status      preflight.Status
	}{
		{"vm-passthrough", "the host's state agrees", preflight.Pass},
		{"container", "are on vfio-pci, which containers cannot use", preflight.Fail},
		{"vm-vgpu", "no vGPU manager is installed", preflight.Fail},
	} {
		dir := t.TempDir()
		b := fixture.New(dir)
		fixture.VFIOBound(b) // GPUs on vfio-pci
		b.File("/etc/default/kubelet", "KUBELET_EXTRA_ARGS=--node-labels=nvidia.com/gpu.workload.config="+c.label+"\n")
		require.NoError(t, b.Err())
		_, res := runRoot(t, dir)
		f := find(res, want{"node.label", "nvidia.com/gpu.workload.config=" + c.label, "", preflight.Mode(c.label)})
		require.Len(t, f, 1, c.label)
		require.Equal(t, c.status, f[0].Status, f[0].Message)
		require.Contains(t, f[0].Message, c.want)
	}
}

func TestVGPUManagerDaemonMustRun(t *testing.T) {
	dir := t.TempDir()
	b := fixture.New(dir)
	fixture.SRIOVVGPU(b)
	b.Remove("/proc/3120") // nvidia-vgpu-mgr stopped
	require.NoError(t, b.Err())
	_, res := runRoot(t, dir)
	f := find(res, want{"vgpu.manager", "nvidia-vgpu-mgr", preflight.Fail, ""})
	require.Len(t, f, 1, "%+v", res.Findings)
	require.Contains(t, f[0].Message, "daemon is not running")
	require.False(t, res.Modes[preflight.VMVGPU].Ready)
}

// A node that is itself a VM, without nested virtualization: the missing vmx/svm flag is the hypervisor's doing,
// not the BIOS's, and a /dev/kvm from a paravirtual backend (kvm_pvm, as on a real H200 cloud VM) is no
// hardware virtualization. With nested virtualization exposed, the flag passes again.
func TestGuestWithoutNestedVirtualization(t *testing.T) {
	for _, c := range []struct {
		name   string
		build  func(*fixture.Builder)
		cpu    fixture.CPU
		flag   string
		kvmMod string
		status map[string]preflight.Status // check + " " + subject → status
		text   map[string]string           // check → text its finding must hold
	}{
		{"intel guest, kvm_pvm", fixture.IOMMUOffKernel,
			fixture.CPU{Vendor: "GenuineIntel", Count: 2, Flags: []string{"fpu", "hypervisor"}}, "vmx", "kvm_pvm",
			map[string]preflight.Status{"cpu.virtualization cpu flag vmx": preflight.Fail, "kvm.device /dev/kvm": preflight.Warn},
			map[string]string{"cpu.virtualization": "its hypervisor does not expose VT-x (nested virtualization is off)", "kvm.device": "from neither kvm_intel nor kvm_amd (modules kvm_pvm, kvm)"}},
		{"amd guest", fixture.AMDReady,
			fixture.CPU{Vendor: "AuthenticAMD", Count: 2, Flags: []string{"fpu", "hypervisor"}}, "svm", "kvm_amd",
			map[string]preflight.Status{"cpu.virtualization cpu flag svm": preflight.Fail, "kvm.device /dev/kvm": preflight.Pass},
			map[string]string{"cpu.virtualization": "its hypervisor does not expose AMD-V (nested virtualization is off)"}},
		{"intel guest with nested virtualization", fixture.IOMMUOffKernel,
			fixture.CPU{Vendor: "GenuineIntel", Count: 2, Flags: []string{"vmx", "hypervisor"}}, "vmx", "kvm_intel",
			map[string]preflight.Status{"cpu.virtualization cpu flag vmx": preflight.Pass, "kvm.device /dev/kvm": preflight.Pass}, nil},
	} {
		dir := t.TempDir()
		b := fixture.New(dir)
		c.build(b)
		b.CPUs(c.cpu).Remove("/sys/module/kvm_intel").Remove("/sys/module/kvm_amd").Module(c.kvmMod, nil).Module("kvm", nil)
		b.File("/dev/kvm", "")
		require.NoError(t, b.Err())
		_, res := runRoot(t, dir)
		for k, st := range c.status {
			check, subject, _ := strings.Cut(k, " ")
			f := find(res, want{check, subject, "", ""})
			require.Len(t, f, 1, "%s: %s", c.name, k)
			require.Equal(t, st, f[0].Status, "%s: %s: %s", c.name, k, f[0].Message)
			if s := c.text[check]; s != "" {
				require.Contains(t, f[0].Message, s, c.name)
				require.NotContains(t, f[0].Message, "BIOS", c.name)
			}
		}
		require.NotEmpty(t, find(res, want{"cpu.virtualization", "cpu flag hypervisor", preflight.Warn, ""}), c.name)
	}
	// The firmware has no IOMMU table in a VM without a vIOMMU: the fix is on the hypervisor, not in a BIOS.
	dir := t.TempDir()
	b := fixture.New(dir)
	fixture.IOMMUOffKernel(b)
	b.CPUs(fixture.CPU{Vendor: "GenuineIntel", Count: 2, Flags: []string{"vmx", "hypervisor"}}).Remove("/sys/firmware/acpi/tables/DMAR")
	require.NoError(t, b.Err())
	_, res := runRoot(t, dir)
	f := find(res, want{"iommu.firmware", "/sys/firmware/acpi/tables", preflight.Fail, ""})
	require.Len(t, f, 1)
	require.Contains(t, f[0].Message, "its hypervisor gives it no virtual IOMMU")
	require.Contains(t, f[0].Remedy, "virtual IOMMU on its hypervisor")
	f = find(res, want{"iommu.kernel", "/sys/class/iommu", preflight.Fail, ""})
	require.Len(t, f, 1)
	require.Contains(t, f[0].Remedy, "give this VM a virtual IOMMU")
}
