package preflight

import (
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/gpuprep/gpuprep/internal/pci"
	"github.com/gpuprep/gpuprep/internal/pciids"
	"github.com/gpuprep/gpuprep/internal/plural"
	"github.com/gpuprep/gpuprep/vfio"
	"github.com/gpuprep/gpuprep/vgpu"
)

func checkVGPUManager(e *Env) []Finding {
	m := e.Manager()
	if m.Installed {
		msg := "installed: " + strings.Join(m.Evidence, ", ")
		facts := vgpuManagerFacts(e, m)
		running, known := vgpu.RunningDaemons(e.Root)
		switch {
		case !known:
			// installed is not running: VMs start vGPUs only through
			// nvidia-vgpu-mgr, and nothing here says whether it runs
			return []Finding{{Status: Warn, Subject: "nvidia vGPU manager", Message: msg + "; no process list under /proc to tell whether its nvidia-vgpu-mgr daemon runs, without which VMs cannot start vGPUs",
				Remedy: "on the node: systemctl status nvidia-vgpu-mgr (enable it with systemctl enable --now nvidia-vgpu-mgr); or run gpuprep on the node itself, or give --root a root with /proc", Facts: facts}}
		case !running["nvidia-vgpu-mgr"]:
			return []Finding{{Status: Fail, Subject: "nvidia-vgpu-mgr", Message: msg + ", but the nvidia-vgpu-mgr daemon is not running: VMs cannot start vGPUs",
				Remedy: "systemctl enable --now nvidia-vgpu-mgr (and nvidia-vgpud where the build has it); see journalctl -u nvidia-vgpu-mgr", Facts: facts}}
		}
		return []Finding{{Status: Pass, Subject: "nvidia vGPU manager", Message: msg + "; nvidia-vgpu-mgr running", Facts: facts}}
	}
	var onVFIO, consumer []string
	nvidia := 0
	for _, g := range e.GPUs {
		if pci.DriverIsVFIO(g.Driver) {
			onVFIO = append(onVFIO, g.Address)
		}
		if g.VendorID == pci.VendorNVIDIA {
			nvidia++
			if board, ok := consumerBoard(g); ok {
				consumer = append(consumer, g.Address+" ("+board+")")
			}
		}
	}
	msg := "no NVIDIA vGPU manager: " + noManagerEvidence(e)
	if len(onVFIO) > 0 {
		msg += "; GPUs " + strings.Join(onVFIO, ", ") + " are on vfio-pci, which the vGPU manager cannot use"
	}
	if len(consumer) > 0 {
		msg += "; " + strings.Join(consumer, ", ") + ": " + plural.Word(len(consumer), "consumer GeForce/TITAN board") + ", which NVIDIA vGPU does not support (see vgpu.support)"
	}
	if len(consumer) > 0 && len(consumer) == nvidia {
		// The licensed vGPU manager would not help: no remedy sends
		// the user to buy one for a board it does not run on.
		return []Finding{{Status: Fail, Subject: "nvidia vGPU manager", Message: msg, Facts: noManagerFacts(),
			Remedy: "none on these GPUs: NVIDIA vGPU runs on data-center and RTX professional boards only; give each GPU to one VM whole instead (gpuprep check --mode vm-passthrough), or use a GPU NVIDIA vGPU supports"}}
	}
	return []Finding{{Status: Fail, Subject: "nvidia vGPU manager", Message: msg, Facts: noManagerFacts(),
		Fixable: true, FixCommand: "gpuprep vgpu install --driver " + e.vgpuInstaller(),
		Remedy: "install the licensed NVIDIA vGPU manager (gpuprep vgpu install --driver " + e.vgpuInstaller() + "), or let the GPU Operator deploy it (vgpuManager.enabled=true with your private image)"}}
}

// vendorVFIO reports whether the GPU g hosts vGPUs through the
// vendor-specific VFIO framework (SR-IOV VFs with nvidia/creatable_vgpu_types)
// rather than mdev: what its sysfs shows once the manager has set it up,
// else what applies to it — vGPU 17+ on kernel ≥ 6.8 uses that framework on
// GPUs whose vGPUs are SR-IOV VFs (vgpu.UsesSRIOV: not a T4, which reports
// VFs but uses mdev).
func vendorVFIO(e *Env, g *pci.Device) bool {
	if s := e.VGPU(g.Address); s.Interface != "" {
		return s.Interface == "sriov"
	}
	return kernelAtLeast(e.Host.Kernel, 6, 8) && vgpu.UsesSRIOV(e.Root, vgpu.GPUInfo{Address: g.Address, DeviceID: g.DeviceID})
}

// vgpuInterfaces says which vGPU interfaces apply to the selected GPUs
// (worked out once per check).
func vgpuInterfaces(e *Env) (mdev, vendor bool) {
	e.mu.Lock()
	if e.vgpuIfaces == nil {
		e.vgpuIfaces = sync.OnceValue(func() [2]bool {
			m, v := readVGPUInterfaces(e)
			return [2]bool{m, v}
		})
	}
	f := e.vgpuIfaces
	e.mu.Unlock()
	r := f()
	return r[0], r[1]
}

func readVGPUInterfaces(e *Env) (mdev, vendor bool) {
	for _, g := range e.GPUs {
		if g.VendorID != pci.VendorNVIDIA {
			continue
		}
		if vendorVFIO(e, g) {
			vendor = true
		} else {
			mdev = true
		}
	}
	return mdev, vendor || !mdev && kernelAtLeast(e.Host.Kernel, 6, 8)
}

// Where each interface shows its vGPU types: subjects of host-wide findings.
const (
	mdevSubject   = "/sys/class/mdev_bus"
	vendorSubject = "/sys/bus/pci/devices/*/nvidia/creatable_vgpu_types"
)

// vgpuSubject is the place that shows the selected GPUs' vGPU types.
func vgpuSubject(e *Env) string {
	if mdev, vendor := vgpuInterfaces(e); vendor && !mdev {
		return vendorSubject
	}
	return mdevSubject
}

// noManagerEvidence says what shows there is no vGPU manager, for the
// interface that applies: mdev (its module and bus), or the vendor-specific
// VFIO framework of kernel ≥ 6.8 (nvidia.ko is the VFIO provider there: no
// nvidia_vgpu_vfio, no mdev bus; sriov-manage and the VFs' nvidia/ dirs).
func noManagerEvidence(e *Env) string {
	mdev, vendor := vgpuInterfaces(e)
	var parts []string
	if mdev || !vendor {
		parts = append(parts, "module nvidia_vgpu_vfio not loaded")
	}
	parts = append(parts, "no nvidia-vgpu-mgr")
	if vendor {
		parts = append(parts, "no "+vgpu.SRIOVManage)
	}
	if mdev || !vendor {
		parts = append(parts, mdevSubject+" empty")
	}
	msg := strings.Join(parts, ", ")
	if vendor {
		msg += fmt.Sprintf(" (on kernel %s the vGPU manager, vGPU 17+, serves SR-IOV GPUs through the vendor-specific VFIO framework: VFs with nvidia/creatable_vgpu_types, not mdev)", e.Host.Kernel)
	}
	return msg
}

func checkVGPUTypes(e *Env) []Finding {
	if len(e.GPUs) == 0 {
		return []Finding{{Status: Skip, Subject: vgpuSubject(e), Message: "no GPU selected"}}
	}
	if !e.Manager().Installed {
		return []Finding{{Status: Skip, Subject: vgpuSubject(e), Message: "no vGPU manager (see vgpu.manager): no types to list"}}
	}
	var out []Finding
	live := map[string][]vgpu.Instance{} // vendor-specific VFIO vGPUs, by GPU
	for _, g := range e.GPUs {
		s := e.VGPU(g.Address)
		if s.Interface == "sriov" {
			for _, x := range vgpu.Existing(e.Root, g.Address) {
				if strings.Contains(x.Device, ":") {
					live[g.Address] = append(live[g.Address], x)
				}
			}
		}
		f := Finding{Subject: g.Address}
		sriov := vgpu.UsesSRIOV(e.Root, vgpu.GPUInfo{Address: g.Address, DeviceID: g.DeviceID})
		switch {
		case len(s.Types) == 0 && g.Driver != "nvidia":
			// Only the vGPU manager's nvidia driver offers types (on the
			// PF for mdev, on the VFs it enables for SR-IOV).
			f.Status = Fail
			f.Message = "no vGPU types offered: the GPU is on " + driverOr(g.Driver) + ", not on the vGPU manager's nvidia driver (see vfio.binding)"
			f.Remedy = vgpuDriverRemedy(e, g.Address, g.Driver)
		case len(s.Types) > 0:
			f.Status = Pass
			names := make([]string, 0, 4)
			for i, t := range s.Types {
				if i == 3 {
					names = append(names, fmt.Sprintf("… %d in all", len(s.Types)))
					break
				}
				names = append(names, t.Name)
			}
			iface := "mdev (mdev_supported_types)"
			if s.Interface == "sriov" {
				iface = fmt.Sprintf("vendor-specific VFIO, %d/%d VFs enabled (nvidia/creatable_vgpu_types)", s.NumVFs, s.TotalVFs)
			}
			f.Message = iface + ": " + strings.Join(names, ", ")
			partial := sriov && s.NumVFs > 0 && s.NumVFs < s.TotalVFs
			if partial {
				// sriov-manage -e enables every VF, and has exited 0
				// on failure: verify sriov_numvfs == sriov_totalvfs.
				f.Status = Warn
				f.Message += fmt.Sprintf("; only %d of %d SR-IOV VFs are enabled: sriov-manage -e enables every VF, so it likely failed part way (it has exited 0 on failure), and vGPUs can be created on the enabled VFs only", s.NumVFs, s.TotalVFs)
				f.Remedy = "/usr/lib/nvidia/sriov-manage -e " + g.Address + ", then check that sriov_numvfs equals sriov_totalvfs (gpuprep vgpu install --driver FILE --select " + g.Address + " does both, retrying)"
			}
			switch n := len(vgpu.Existing(e.Root, g.Address)); {
			case n > 0:
				f.Message += "; " + plural.N(n, "vGPU") + exist(n)
			case s.Interface == "sriov":
				// Nothing in NVIDIA's stack writes current_vgpu_type:
				// the GPU Operator's vgpu-device-manager creates mdevs
				// only (v0.5.0 pkg/vgpu/config.go, through go-nvlib
				// nvmdev; the VFIO backend of its PR #195 is not
				// merged), and the GPU Operator's vgpu-manager container
				// only enables the VFs (gpu-driver-container
				// vgpu-manager/ubuntu24.04/nvidia-driver: sriov-manage
				// -e ALL). With no vGPU on any VF, KubeVirt has nothing
				// to allocate, and nothing will create one.
				f.Status = Fail
				f.Message += "; no vGPU exists (every VF's nvidia/current_vgpu_type is 0): on the vendor-specific VFIO interface nothing in NVIDIA's stack creates vGPUs (the GPU Operator's vgpu-device-manager creates mdevs only), so KubeVirt has none to allocate"
				fix := "gpuprep vgpu apply -f vgpu-config.yaml -c NAME --persist"
				f.Fixable, f.FixCommand = true, fix
				remedy := "create them: " + fix + " (writes a type id to free VFs' current_vgpu_type, and again at boot: VFs and their vGPUs do not survive a reboot), or gpuprep apply --mode vm-vgpu --vgpu-config-file vgpu-config.yaml --vgpu-config NAME"
				if partial {
					remedy = "enable every VF first (/usr/lib/nvidia/sriov-manage -e " + g.Address + ", until sriov_numvfs equals sriov_totalvfs), then " + remedy
				}
				f.Remedy = remedy
			default:
				// mdev: the GPU Operator's vgpu-device-manager creates
				// the mdevs of the node's nvidia.com/vgpu.config.
				f.Message += "; no mdev exists yet: the GPU Operator's vgpu-device-manager creates them from the node's nvidia.com/vgpu.config label (or gpuprep vgpu apply)"
			}
		case len(vgpu.Existing(e.Root, g.Address)) > 0:
			// Every VF holds a vGPU (a VF given a type offers no more
			// types), or every mdev instance is taken: the GPU is set up.
			ex := vgpu.Existing(e.Root, g.Address)
			count := map[string]int{}
			var order []string
			for _, x := range ex {
				if count[x.Type] == 0 {
					order = append(order, x.Type)
				}
				count[x.Type]++
			}
			var have []string
			for _, t := range order {
				have = append(have, fmt.Sprintf("%d× %s", count[t], t))
			}
			f.Status = Pass
			f.Message = fmt.Sprintf("%s%s (%s); no type is free to create more", plural.N(len(ex), "vGPU"), exist(len(ex)), strings.Join(have, ", "))
		case sriov && s.NumVFs <= 0:
			// sriov_totalvfs > 0 alone is no proof: a T4 reports 16 and
			// uses mdev on the PF. UsesSRIOV also weighs the device ID.
			fix := "gpuprep vgpu install --driver " + e.vgpuInstaller() + " --select " + g.Address
			f.Status = Fail
			f.Message = fmt.Sprintf("SR-IOV GPU with 0 of %d VFs enabled: vGPUs are created on VFs", s.TotalVFs)
			f.Remedy = "/usr/lib/nvidia/sriov-manage -e " + g.Address + " (or " + fix + ", which enables and verifies the VFs)"
			f.Fixable, f.FixCommand = true, fix
		default:
			f.Status = Fail
			f.Message = "no vGPU types offered: no mdev_supported_types and no VF with nvidia/creatable_vgpu_types"
			f.Remedy = "check that this GPU supports vGPU and that the vGPU manager version supports this GPU and kernel"
		}
		out = append(out, f)
		if sriov {
			out = append(out, vfsOffNvidia(e, g.Address)...)
		}
	}
	return append(out, checkVGPUBoot(e, live)...)
}

// vfsOffNvidia fails each SR-IOV VF of the GPU at pf that a VFIO driver
// holds: the VFs stay on nvidia, their VFIO provider (a vGPU's VF is handed
// to the VM through nvidia's own VFIO device), and vfio-pci cannot drive
// them (its probe of such a VF fails, or it took the VF before nvidia).
func vfsOffNvidia(e *Env, pf string) []Finding {
	dev := "/sys/bus/pci/devices/" + pf
	var out []Finding
	for _, n := range e.Root.Names(dev) {
		if !strings.HasPrefix(n, "virtfn") {
			continue
		}
		vf := e.Root.LinkBase(dev + "/" + n)
		drv := e.Root.LinkBase("/sys/bus/pci/devices/" + vf + "/driver")
		if vf == "" || !pci.DriverIsVFIO(drv) {
			continue
		}
		out = append(out, Finding{Status: Fail, Subject: vf,
			Message: fmt.Sprintf("SR-IOV VF of %s on %s: the VFs stay on nvidia, which is their VFIO provider for vGPUs; a VF on %s hosts no vGPU", pf, drv, drv),
			Remedy:  fmt.Sprintf("remove what binds it to %s (a driver_override, vfio-pci ids= in /etc/modprobe.d), then /usr/lib/nvidia/sriov-manage -d %s and -e %s: the VFs made anew bind to nvidia", drv, pf, pf)})
	}
	return out
}

// kernelMajor returns the major version of a kernel release ("6.8.0-45" → 6).
func kernelMajor(release string) int {
	n := 0
	for _, c := range release {
		if c < '0' || c > '9' {
			break
		}
		n = n*10 + int(c-'0')
	}
	return n
}

// kernelAtLeast reports whether a kernel release ("6.8.0-45-generic") is
// major.minor or later; false when it cannot be read.
func kernelAtLeast(release string, major, minor int) bool {
	maj, rest, ok := strings.Cut(release, ".")
	if !ok {
		return false
	}
	var min string
	for _, c := range rest {
		if c < '0' || c > '9' {
			break
		}
		min += string(c)
	}
	a, err1 := strconv.Atoi(maj)
	b, err2 := strconv.Atoi(min)
	if err1 != nil || err2 != nil {
		return false
	}
	return a > major || a == major && b >= minor
}

// checkVGPUSupport says whether the GPU, kernel and vGPU interface together
// are a combination the KubeVirt tooling supports.
func checkVGPUSupport(e *Env) []Finding {
	var out []Finding
	for _, g := range e.GPUs {
		if board, ok := consumerBoard(g); ok {
			out = append(out, Finding{Status: Fail, Subject: g.Address,
				Message: fmt.Sprintf("%s (%s:%s) is a consumer GeForce/TITAN board: NVIDIA vGPU does not support it, whatever the driver or license", board, g.VendorID, g.DeviceID),
				Remedy:  "use a GPU that NVIDIA vGPU supports (data-center and RTX professional boards), or give this one to a VM whole (gpuprep check --mode vm-passthrough)"})
			continue
		}
		s := e.VGPU(g.Address)
		f := Finding{Subject: g.Address}
		switch {
		case s.Interface == "":
			continue
		case s.Interface == "mdev" && kernelMajor(e.Host.Kernel) >= 6:
			f.Status = Warn
			f.Message = fmt.Sprintf("mdev vGPU on kernel %s: NVIDIA supports GPU Operator-managed KubeVirt vGPU only on kernels < 6.0", e.Host.Kernel)
			f.Remedy = "run a kernel < 6.0 for the operator's mdev path, or vGPU 17+ on kernel ≥ 6.8 with KubeVirt ≥ 1.9"
		case s.Interface == "mdev":
			f.Status = Pass
			f.Message = fmt.Sprintf("mdev vGPU on kernel %s: the GPU Operator's supported KubeVirt path", e.Host.Kernel)
		case s.Interface == "sriov":
			f.Status = Warn
			f.Message = fmt.Sprintf("vendor-specific VFIO vGPU (SR-IOV VFs, kernel %s): NVIDIA's sandbox device plugin cannot advertise these vGPUs yet; KubeVirt ≥ 1.9 has built-in support", e.Host.Kernel)
			f.Remedy = "use KubeVirt ≥ 1.9 and create vGPUs with gpuprep vgpu apply (no NVIDIA tool writes current_vgpu_type yet)"
		}
		out = append(out, f)
	}
	if len(out) == 0 {
		out = append(out, Finding{Status: Skip, Subject: vgpuSubject(e), Message: "no GPU with a vGPU interface set up (see vgpu.types)"})
	}
	return out
}

// vgpuOnNvidia is vfio.binding's message for a GPU on nvidia in vm-vgpu:
// what nvidia does for its vGPUs, given the manager and the board.
func vgpuOnNvidia(e *Env, g *pci.Device) string {
	if _, ok := consumerBoard(g); ok {
		return "on driver nvidia (a GeForce/TITAN board hosts no vGPU: see vgpu.support)"
	}
	if e.Manager().Installed {
		return "on driver nvidia, where the installed vGPU manager hosts vGPUs (see vgpu.types)"
	}
	return "on driver nvidia, which hosts vGPUs once the vGPU manager is installed (see vgpu.manager)"
}

// consumerBoard reports whether the NVIDIA GPU g is a consumer GeForce or
// TITAN board (vgpu.ConsumerBoard), named from pci.ids: the host's, else
// the embedded copy when the host's does not know the device.
// allConsumer reports whether every selected GPU is a consumer GeForce or
// TITAN board (none can host vGPU: no vGPU manager install helps).
func allConsumer(e *Env) bool {
	for _, g := range e.GPUs {
		if _, ok := consumerBoard(g); !ok {
			return false
		}
	}
	return len(e.GPUs) > 0
}

func consumerBoard(g *pci.Device) (string, bool) {
	if g.VendorID != pci.VendorNVIDIA {
		return "", false
	}
	name := g.Name
	if name == "" {
		id := pciids.ID{Vendor: g.VendorID, Device: g.DeviceID}
		name = pciids.Embedded([]pciids.ID{id}).Devices[id]
	}
	return vgpu.ConsumerBoard(name)
}

// vgpuDriverRemedy says how a GPU that is not on the nvidia driver gets to
// the vGPU manager's nvidia driver.
func vgpuDriverRemedy(e *Env, addr, driver string) string {
	switch {
	case pci.DriverIsVFIO(driver):
		return "gpuprep vfio unbind --select " + addr + " (returns it to the driver it had and removes gpuprep's persistent VFIO binding; remove any other vfio-pci ids= or driver_override configuration for it by hand); if it is left unbound, bind it to nvidia (echo " + addr + " > /sys/bus/pci/drivers/nvidia/bind)"
	case driver == "nouveau" && vfio.NouveauBuiltin(e.Root):
		return "see driver.nouveau: nouveau is built into the kernel, so only " + vfio.NouveauOff.String() + " on the kernel command line (and a reboot) lets the vGPU manager's nvidia driver take it"
	case driver == "nouveau":
		return "see driver.nouveau: blacklist nouveau so that the vGPU manager's nvidia driver takes it"
	case !e.Manager().Installed:
		return "install the vGPU manager (gpuprep vgpu install --driver " + e.vgpuInstaller() + "); its nvidia driver takes the GPU"
	case driver == "":
		return "bind it to the vGPU manager's driver: modprobe nvidia; echo " + addr + " > /sys/bus/pci/drivers/nvidia/bind"
	}
	return "unbind it from " + driver + " (echo " + addr + " > /sys/bus/pci/devices/" + addr + "/driver/unbind) and bind it to nvidia (echo " + addr + " > /sys/bus/pci/drivers/nvidia/bind)"
}

// exist is " exists" after one thing, " exist" after more or none.
func exist(n int) string {
	if n == 1 {
		return " exists"
	}
	return " exist"
}
