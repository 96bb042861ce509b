package preflight

import (
	"strings"
	"sync"
	"time"

	"github.com/gpuprep/gpuprep/grub"
	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/kargs"
	"github.com/gpuprep/gpuprep/internal/kernelrelease"
	"github.com/gpuprep/gpuprep/internal/pci"
	"github.com/gpuprep/gpuprep/iommu"
	"github.com/gpuprep/gpuprep/vgpu"
)

// CPUInfo is what /proc/cpuinfo says about the processors.
type CPUInfo struct {
	Vendor string // GenuineIntel, AuthenticAMD
	Model  string
	Count  int
	Flags  map[string]bool
	// VMXFeatures: the first CPU has a "vmx flags" line, which the kernel
	// prints only after its feat_ctl.c found VMX enabled (see vmxFlagVerdict)
	VMXFeatures bool
	// Implementer and Part are an Arm CPU's "CPU implementer" and "CPU
	// part" lines (arch/arm64/kernel/cpuinfo.c; 0x41 and 0xd4f on Grace:
	// Arm Neoverse V2)
	Implementer, Part string
	Read              bool // /proc/cpuinfo could be read
}

// Intel and AMD report whether the CPU vendor is known.
func (c CPUInfo) Intel() bool { return c.Vendor == "GenuineIntel" }

// AMD reports an AMD (or Hygon) processor.
func (c CPUInfo) AMD() bool { return c.Vendor == "AuthenticAMD" || c.Vendor == "HygonGenuine" }

// HostInfo identifies the host in reports.
type HostInfo struct {
	Name   string `json:"name"`
	OS     string `json:"os"`
	Kernel string `json:"kernel"`
}

// Env is everything the checks read, gathered once.
type Env struct {
	Root       *host.Root
	Runner     host.Runner
	Mode       Mode
	Host       HostInfo
	Cmdline    []kargs.Param
	CmdlineRaw string
	CmdlineErr error
	BootTime   time.Time // zero when unknown
	CPU        CPUInfo
	Inv        *pci.Inventory
	GPUs       []*pci.Device
	NVSwitches []*pci.Device
	Selector   pci.Selector
	IOMMU      iommu.Kernel
	Firmware   iommu.Firmware
	// Arch is the kernel's machine ("x86_64", "aarch64"; see readArch).
	Arch string
	// KernelLog reads the running kernel's log (dmesg), for the checks that
	// can use it as evidence; NewEnv sets it, tests may replace it.
	KernelLog func() ([]byte, error)

	// mu guards what is read lazily, once per check, by several checks
	mu         sync.Mutex
	vgpus      map[string]vgpu.GPU
	manager    func() vgpu.Manager
	vgpuIfaces func() [2]bool // mdev, vendor-specific VFIO (vgpuInterfaces)
	configured func() (*grub.Source, error)
	boot       func() (*grub.Boot, error)
	klog       func() kernelLog
}

// Manager is the vGPU manager's state (vgpu.ReadManager), read once.
func (e *Env) Manager() vgpu.Manager {
	e.mu.Lock()
	if e.manager == nil {
		e.manager = sync.OnceValue(func() vgpu.Manager { return vgpu.ReadManager(e.Root) })
	}
	f := e.manager
	e.mu.Unlock()
	return f()
}

// Configured is grub.Configured for the next boot's kernel (the kernel command
// line of the next boot), read once: the kernel-argument checks and the
// VFIO binding's view of the next boot each want it.
func (e *Env) Configured() (*grub.Source, error) {
	e.mu.Lock()
	if e.configured == nil {
		e.configured = sync.OnceValues(func() (*grub.Source, error) { return grub.Configured(e.Root, grub.NextRelease(e.Root, e.Host.Kernel)) })
	}
	f := e.configured
	e.mu.Unlock()
	return f()
}

// Boot is grub.Detect, read once.
func (e *Env) Boot() (*grub.Boot, error) {
	e.mu.Lock()
	if e.boot == nil {
		e.boot = sync.OnceValues(func() (*grub.Boot, error) { return grub.Detect(e.Root) })
	}
	f := e.boot
	e.mu.Unlock()
	return f()
}

// VGPU is vgpu.Read for the GPU at addr, read once per Env: two checks
// and the report each want every GPU's vGPU state.
func (e *Env) VGPU(addr string) vgpu.GPU {
	e.mu.Lock()
	defer e.mu.Unlock()
	if g, ok := e.vgpus[addr]; ok {
		return g
	}
	if e.vgpus == nil {
		e.vgpus = map[string]vgpu.GPU{}
	}
	g := vgpu.Read(e.Root, addr)
	e.vgpus[addr] = g
	return g
}

// NewEnv gathers the facts of the host under root. It fails when PCI
// discovery fails or the selection names devices that are not there.
func NewEnv(root *host.Root, runner host.Runner, sel pci.Selector, mode Mode) (*Env, error) {
	e := &Env{Root: root, Runner: runner, Selector: sel, Mode: mode}
	e.Host.Kernel, _ = kernelrelease.Running(root)
	e.Host.Name, _ = root.ReadString("/proc/sys/kernel/hostname")
	e.Host.OS = osName(root)
	e.CmdlineRaw, e.CmdlineErr = kargs.ReadString(root, "/proc/cmdline")
	e.Cmdline = kargs.Parse(e.CmdlineRaw)
	e.BootTime = bootTime(root)
	e.CPU = readCPU(root)
	e.Arch = readArch(root, e.CPU)
	e.KernelLog = liveKernelLog(root, runner)
	inv, err := pci.Discover(root)
	if err != nil {
		return nil, err
	}
	e.Inv = inv
	e.GPUs, err = sel.Select(inv)
	if err != nil {
		return nil, err
	}
	e.NVSwitches = pci.NVSwitches(inv)
	inv.Name(root, append(append([]*pci.Device{}, e.GPUs...), e.NVSwitches...))
	e.IOMMU = iommu.ReadKernel(root)
	e.Firmware = iommu.ReadFirmware(root)
	return e, nil
}

// Selected is the GPUs plus the NVSwitches that go to VMs with them.
func (e *Env) Selected() []*pci.Device {
	return append(append([]*pci.Device{}, e.GPUs...), e.NVSwitches...)
}

func osName(root *host.Root) string {
	b, err := root.ReadFile("/etc/os-release")
	if err != nil {
		return ""
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "PRETTY_NAME="); ok {
			return strings.Trim(v, `"'`)
		}
	}
	return ""
}

func bootTime(root *host.Root) time.Time {
	b, err := root.ReadFile("/proc/stat")
	if err != nil {
		return time.Time{}
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "btime "); ok {
			var sec int64
			for _, c := range strings.TrimSpace(v) {
				if c < '0' || c > '9' {
					return time.Time{}
				}
				sec = sec*10 + int64(c-'0')
			}
			return time.Unix(sec, 0)
		}
	}
	return time.Time{}
}

func readCPU(root *host.Root) CPUInfo {
	c := CPUInfo{Flags: map[string]bool{}}
	b, err := root.ReadFile("/proc/cpuinfo")
	if err != nil {
		return c
	}
	c.Read = true
	for _, l := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(l, ":")
		if !ok {
			continue
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch k {
		case "processor":
			c.Count++
		case "vendor_id":
			if c.Vendor == "" {
				c.Vendor = v
			}
		case "model name":
			if c.Model == "" {
				c.Model = v
			}
		case "CPU implementer":
			if c.Implementer == "" {
				c.Implementer = v
			}
		case "CPU part":
			if c.Part == "" {
				c.Part = v
			}
		case "vmx flags":
			if c.Count == 1 {
				c.VMXFeatures = v != ""
			}
		case "flags":
			if c.Count == 1 {
				for _, f := range strings.Fields(v) {
					c.Flags[f] = true
				}
			}
		}
	}
	return c
}
