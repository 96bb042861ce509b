package preflight_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/preflight"
)

// cpuVirt builds scenario, changes it with edit, and returns its one
// cpu.virtualization finding on subject.
func cpuVirt(t *testing.T, scenario, subject string, edit func(b *fixture.Builder)) preflight.Finding {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, fixture.Build(scenario, dir))
	b := fixture.New(dir)
	edit(b)
	require.NoError(t, b.Err())
	_, res := runRoot(t, dir)
	f := find(res, want{"cpu.virtualization", subject, "", ""})
	require.Len(t, f, 1, "findings: %+v", res.Findings)
	return f[0]
}

// On a kernel older than 5.6 the vmx flag stays when the BIOS disables
// VT-x (feat_ctl.c, which clears it, came with 5.6): with MSR 0x3A not
// readable, the flag alone is no pass; kvm_intel's /dev/kvm or the
// kernel's "vmx flags" line decide.
func TestVMXFlagOnAKernelOlderThan56(t *testing.T) {
	intel := fixture.CPU{Vendor: "GenuineIntel", Model: "Intel(R) Xeon(R) Gold 6338", Count: 2, Flags: []string{"fpu", "msr", "vmx", "smx"}}
	withVMXFlags := intel
	withVMXFlags.VMXFlags = []string{"vnmi", "preemption_timer", "invvpid", "ept_x_only", "ept_ad", "ept_1gb", "flexpriority", "tsc_offset", "vtpr", "mtf", "vapic", "ept", "vpid", "unrestricted_guest"}
	for _, c := range []struct {
		name   string
		edit   func(b *fixture.Builder)
		status preflight.Status
		text   string
	}{
		{"BIOS off, nothing else to go by", func(*fixture.Builder) {}, preflight.Warn, "kernel " + fixture.OldKernel + " is older than 5.6"},
		{"kernel release unknown", func(b *fixture.Builder) { b.Remove("/proc/sys/kernel/osrelease") }, preflight.Warn, "kernel release is unknown"},
		{"kvm_intel built in, its init failed: no /dev/kvm", func(b *fixture.Builder) { b.BuiltinModule("kvm_intel") }, preflight.Warn, "no /dev/kvm"},
		{"kvm_intel loaded with /dev/kvm", func(b *fixture.Builder) { b.Module("kvm_intel", nil).File("/dev/kvm", "") }, preflight.Pass, "kvm_intel loaded and /dev/kvm present"},
		{"a vmx flags line", func(b *fixture.Builder) { b.CPUs(withVMXFlags) }, preflight.Pass, `"vmx flags" line`},
		{"kernel 5.15 clears the flag itself", func(b *fixture.Builder) {
			b.Host("jammy", "Ubuntu 22.04.4 LTS", "5.15.0-91-generic", "ro")
		}, preflight.Pass, "(≥ 5.6) clears vmx"},
	} {
		f := cpuVirt(t, "vtx-disabled-old-kernel", "cpu flag vmx", func(b *fixture.Builder) { b.CPUs(intel); c.edit(b) })
		require.Equal(t, c.status, f.Status, "%s: %s", c.name, f.Message)
		require.Contains(t, f.Message, c.text, c.name)
		if f.Status != preflight.Pass {
			require.Contains(t, f.Message, "MSR 0x3A not readable", c.name)
			require.Contains(t, f.Remedy, "modprobe msr", c.name)
			require.Contains(t, f.Remedy, "modprobe kvm_intel", c.name)
		}
	}
}

// The AMD branch takes the same evidence: a kvm_amd built in whose init
// failed keeps /sys/module/kvm_amd but registers no /dev/kvm.
func TestSVMFlagNeedsKVMAMDsDevKVM(t *testing.T) {
	f := cpuVirt(t, "amd-svm-disabled", "cpu flag svm", func(b *fixture.Builder) {
		b.Remove("/dev/cpu").BuiltinModule("kvm_amd")
	})
	require.Equal(t, preflight.Warn, f.Status, f.Message)
	require.Contains(t, f.Message, "no /dev/kvm")
	f = cpuVirt(t, "amd-svm-disabled", "cpu flag svm", func(b *fixture.Builder) {
		b.Remove("/dev/cpu").Module("kvm_amd", nil).File("/dev/kvm", "")
	})
	require.Equal(t, preflight.Pass, f.Status, f.Message)
	require.Contains(t, f.Message, "kvm_amd loaded and /dev/kvm present")
}
