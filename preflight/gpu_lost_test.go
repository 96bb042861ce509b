package preflight_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/pci"
	"github.com/gpuprep/gpuprep/preflight"
)

// A GPU fallen off the bus (config space all ones, sysfs still holding its
// cached IDs) is a fail of gpu.present saying so and what to do, and no
// mode is ready (gpu.present counted it as a present H100 and vfio-bound's
// vm-passthrough was ready).
func TestGPUFallenOffTheBusFails(t *testing.T) {
	_, res := run(t, "gpu-fallen-off-bus")
	f := one(t, res, "gpu.present", "0000:21:00.0", preflight.VMPassthrough)
	require.Equal(t, preflight.Fail, f.Status, f.Message)
	require.Contains(t, f.Message, "has fallen off the bus (NVIDIA Xid 79): its config space reads all ones (vendor ffff, device ffff in /sys/bus/pci/devices/0000:21:00.0/config, where sysfs still has 10de:2331)")
	require.Contains(t, f.Remedy, "power-cycle")
	other := one(t, res, "gpu.present", "0000:11:00.0", preflight.VMPassthrough)
	require.Equal(t, preflight.Pass, other.Status, other.Message)
	for _, m := range preflight.Modes {
		require.False(t, res.Modes[m].Ready, m)
		require.Contains(t, res.Modes[m].Blockers, "gpu.present", m)
	}
}

// Where only the kernel log says the GPU fell off the bus this boot (it
// answers again, after a slot reset or a rescan), gpu.present warns with
// the driver's line; the Xid line names domain:bus:device only.
func TestGPUFellOffEarlierWarns(t *testing.T) {
	for name, line := range map[string]string{
		"xid":  "[6781741.548779] NVRM: Xid (PCI:0000:21:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
		"nvrm": "[6781741.548783] NVRM: GPU 0000:21:00.0: GPU has fallen off the bus.",
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			require.NoError(t, fixture.Build("vfio-bound", dir))
			root, err := host.NewRoot(dir)
			require.NoError(t, err)
			sel, _ := pci.ParseSelector(nil)
			env, err := preflight.NewEnv(root, host.NoRunner{}, sel, "")
			require.NoError(t, err)
			env.KernelLog = func() ([]byte, error) {
				return []byte("[    1.0] pci 0000:21:00.0: [10de:2331] type 00 class 0x030200\n" + line + "\n"), nil
			}
			res, err := preflight.Run(env, preflight.All(), preflight.Options{})
			require.NoError(t, err)
			f := one(t, res, "gpu.present", "0000:21:00.0", preflight.VMPassthrough)
			require.Equal(t, preflight.Warn, f.Status, f.Message)
			require.Contains(t, f.Message, "it fell off the bus earlier in this boot (the kernel log says so: NVRM:")
			require.Equal(t, preflight.Pass, one(t, res, "gpu.present", "0000:11:00.0", preflight.VMPassthrough).Status)
		})
	}
}
