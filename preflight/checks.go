package preflight

// All returns every check, in report order. IDs are stable: scripts use
// them with --skip and --ignore, and reports carry them. Each check's Doc,
// ChangedBy, Beyond and Remedies are what `gpuprep checks` and
// docs/checks.md show, and what a plan reads to tell which fails it cannot
// fix.
func All() []Check {
	return []Check{
		{ID: "gpu.present", Title: "NVIDIA GPUs present", Modes: Modes, Run: checkGPUPresent, Beyond: BeyondPlan,
			Doc: Doc{
				Verifies: "NVIDIA GPUs (and NVSwitches) are found among the selected PCI devices; their names come from the host's `pci.ids`, else an embedded copy. A GPU that has fallen off the bus (NVIDIA Xid 79: its config space reads all ones while sysfs keeps its IDs) is a fail; one the kernel log says fell off earlier in this boot is a warn.",
				Reads:    "`/sys/bus/pci/devices` (vendor, device, class, driver and config space of each function), the host's `pci.ids`, the kernel log (dmesg).",
				Matters:  "every mode needs at least one GPU: without one nothing else can be judged.",
			},
			Remedies: []string{"check `--select`, and that the GPUs are seated and powered (`lspci -nn -d 10de:`)"}},
		{ID: "cpu.virtualization", Title: "CPU virtualization (VT-x / AMD-V) enabled in firmware", Modes: VMModes, Run: checkCPUVirt, Beyond: BeyondPlan,
			Doc: Doc{
				Verifies: "VT-x / AMD-V enabled in firmware: `vmx`/`svm` flags **and** MSR `0x3A` (Intel IA32_FEATURE_CONTROL: locked with VMX-outside-SMX clear = disabled by BIOS) or `0xC0010114` (AMD VM_CR: SVMDIS) when readable; a `hypervisor` flag is a warn (the node is itself a VM). arm64 (GH200, GB200): KVM at EL2 — `/dev/kvm` with `/sys/class/misc/kvm` or the kernel log's `kvm [1]: … mode initialized successfully`; `HYP mode not available`, CPUs started at EL1 or `kvm-arm.mode=none` fail; `/dev/kvm` alone or an unreadable kernel log (dmesg restricted) is a warn.",
				Reads:    "`/proc/cpuinfo`, `/dev/cpu/N/msr`, `/dev/kvm`, `/sys/class/misc/kvm`, the kernel log (dmesg).",
				Matters:  "KVM runs VMs only with hardware virtualization, which firmware can disable.",
			},
			Remedies: []string{"enable Intel VT-x / AMD SVM in the BIOS/UEFI setup"}},
		{ID: "kvm.device", Title: "KVM available (/dev/kvm)", Modes: VMModes, Run: checkKVM, Beyond: BeyondPlan,
			Doc: Doc{
				Verifies: "`/dev/kvm` present, kvm modules loaded (built in on arm64).",
				Reads:    "`/dev/kvm`, `/sys/module/kvm*`.",
				Matters:  "KubeVirt's virt-launcher starts VMs through `/dev/kvm`.",
			},
			Remedies: []string{"modprobe kvm_intel (or kvm_amd), after enabling virtualization in firmware"}},
		{ID: "iommu.firmware", Title: "IOMMU described by firmware (ACPI DMAR/IVRS)", Modes: VMModes, Run: checkIOMMUFirmware, Beyond: BeyondPlan,
			Doc: Doc{
				Verifies: "ACPI `DMAR` (Intel VT-d) or `IVRS` (AMD-Vi) table; on arm64 an ACPI `IORT` with SMMU nodes (an unreadable one counts with `smmu3.*` units), a device tree with SMMU units (without: a warn).",
				Reads:    "`/sys/firmware/acpi/tables`, `/sys/class/iommu`.",
				Matters:  "the kernel enables an IOMMU only where firmware describes one; VFIO needs it to give a device to a VM.",
			},
			Remedies: []string{"enable VT-d / AMD-Vi (IOMMU) in the BIOS/UEFI setup"}},
		{ID: "iommu.kernel", Title: "IOMMU active in the running kernel", Modes: VMModes, Run: checkIOMMUKernel,
			ChangedBy: []string{stepKernelArgs, stepReboot}, Beyond: BeyondUnlessReboot,
			Doc: Doc{
				Verifies: "IOMMU active: units in `/sys/class/iommu` and groups in `/sys/kernel/iommu_groups` (the command line alone proves nothing).",
				Reads:    "`/sys/class/iommu`, `/sys/kernel/iommu_groups`, `/proc/cmdline`, the kernel's `/boot/config-*`.",
				Matters:  "without an active IOMMU there are no IOMMU groups, and VFIO cannot pass a GPU (or its vGPUs) to a VM.",
			},
			Remedies: []string{"gpuprep grub ensure --mode MODE, then reboot (gpuprep apply does both)"}},
		{ID: "iommu.cmdline", Title: "IOMMU kernel arguments: wanted, configured, running", Modes: VMModes, Run: checkIOMMUCmdline,
			ChangedBy: []string{stepKernelArgs, stepReboot},
			Doc: Doc{
				Verifies: "each wanted argument (Intel: `intel_iommu=on iommu=pt`; AMD: `iommu=pt` — `amd_iommu=on` is not a valid value; arm64: `iommu.passthrough=1`, as x86's `intel_iommu=`/`amd_iommu=`/`iommu=` do nothing there) in the running `/proc/cmdline` vs the bootloader configuration: ok, missing, *configured, reboot pending*, configured but not effective; arguments that turn the IOMMU off, running (a fail) or only configured for the next boot (a warn naming the file and line: the node works now and the next boot breaks it).",
				Reads:    "`/proc/cmdline`; `/etc/default/grub` + `grub.d/*.cfg` as the shell sources them, a BLS entry, or `/etc/kernel/cmdline`.",
				Matters:  "the kernel arguments decide whether the IOMMU is on and in pass-through mode, now and at the next boot.",
			},
			Remedies: []string{"gpuprep grub ensure --mode MODE, then reboot"}},
		{ID: "iommu.interrupt-remapping", Title: "Interrupt remapping enabled", Modes: VMModes, Run: checkInterruptRemapping,
			ChangedBy: []string{stepKernelArgs, stepReboot}, Beyond: BeyondUnlessReboot,
			Doc: Doc{
				Verifies: "remapped IRQ chips (`IR-…`) in `/proc/interrupts` (arm64: MSIs through the GICv3 ITS, chips `ITS-…`, the only MSI controller whose irq domain is `IRQ_DOMAIN_FLAG_ISOLATED_MSI`, which VFIO requires; other MSI chips fail, none yet warns); Intel ecap IR bit; `allow_unsafe_interrupts` is a warn; `intremap=off`/`nointremap` configured for the next boot and not running is a warn naming the file and line.",
				Reads:    "`/proc/interrupts`, `/sys/class/iommu`, `/sys/module/vfio_iommu_type1/parameters/allow_unsafe_interrupts`, `/proc/cmdline` and the bootloader configuration.",
				Matters:  "VFIO type1 refuses a device whose interrupts are not remapped (isolated), unless told to accept unsafe interrupts.",
			}},
		{ID: "iommu.groups", Title: "Each GPU's IOMMU group can be passed through whole", Modes: []Mode{VMPassthrough}, Run: checkIOMMUGroups,
			ChangedBy: []string{stepKernelArgs, stepReboot}, Beyond: BeyondUnlessReboot,
			Doc: Doc{
				Verifies: "per GPU: its IOMMU group can be given to a VM whole. Bridges and the GPU's own functions (audio, USB, UCSI) are fine; another selected GPU is a warn (same VM); any other endpoint is a fail that names it, and gpuprep reads the ACS capability (PCIe extended capability `0x000D`) of every port above the GPU to name the one that does not isolate it (or the PCIe-to-PCI bridge that makes devices share a requester ID). The remedy suggests selecting the other endpoints too only where `vfio bind` takes them (another GPU); where they are the host's storage, network or USB controllers it says to give the GPU a group of its own (a CPU root port with ACS, or ACS in the BIOS). A group of its own on a kernel booted with `pcie_acs_override=` (the ACS override patch of Proxmox VE's kernel), below a port with no ACS of its own, is a warn: the group may be the override's, not the hardware's.",
				Reads:    "`/sys/kernel/iommu_groups/*/devices`, each device's PCI config space under `/sys/bus/pci/devices`, `/proc/cmdline` (`pcie_acs_override=`), the kernel log where readable.",
				Matters:  "VFIO gives a VM whole IOMMU groups only: a GPU sharing its group with the host's devices cannot be passed through.",
			}},
		{ID: "driver.nouveau", Title: "nouveau does not hold the GPUs", Modes: Modes, Run: checkNouveau,
			ChangedBy: []string{stepNouveau, stepVFIOBind, stepVFIOUnbind, stepVGPUInstall, stepKernelArgs, stepReboot},
			Doc: Doc{
				Verifies: "nouveau does not drive a selected GPU, and whether the next boot loads it for one: where nouveau is a module the next kernel ships and its `modules.alias` matches a selected GPU, a stage that loads it and does not blacklist it (the initramfs the next boot loads, with its own modprobe.d; the root, with the root's) is a warn, as are what cannot be read to tell; kept off by a blacklist there, `modprobe.blacklist=` or `module_blacklist=` on the next command line, `modeset=0` (or `nomodeset`), or a kernel without nouveau, it passes, naming which.",
				Reads:    "each GPU's driver and modalias, `/sys/module/nouveau`, `/sys/bus/pci/drivers/nouveau`, modprobe.d (`/etc`, `/run`, `/lib`, `/usr/lib`), `/proc/cmdline` and the next boot's command line, the next boot's kernel (its `modules.builtin`, `modules.dep`, `modules.alias`) and initramfs image.",
				Matters:  "a GPU on nouveau is taken by neither the GPU Operator's driver, vfio-pci nor the vGPU manager.",
			},
			Remedies: []string{"gpuprep apply --mode MODE (blacklists nouveau, regenerates the initramfs, unloads it or reboots)"}},
		{ID: "vfio.modules", Title: "VFIO modules present for the running and the next boot's kernel", Modes: []Mode{VMPassthrough}, Run: checkVFIOModules, Beyond: BeyondPlan,
			Doc: Doc{
				Verifies: "`vfio`, `vfio_iommu_type1`, `vfio_pci` present for the running kernel (loaded, built in, or a module file), and, where the bootloader boots another kernel next, for that one too (both named; lacking there is a warn: vfio-pci cannot load after the reboot).",
				Reads:    "`/proc/sys/kernel/osrelease`, `/sys/module`, `/lib/modules/RELEASE/modules.dep` and `modules.builtin` of the running and the next kernel, the bootloader's next entry.",
				Matters:  "vfio-pci is the driver a passed-through GPU is bound to.",
			},
			Remedies: []string{"install the running kernel's extra modules package (e.g. linux-modules-extra-RELEASE)"}},
		{ID: "vfio.binding", Title: "GPU driver binding fits the mode", Modes: Modes, Run: withDriverFacts(checkVFIOBinding),
			ChangedBy: []string{stepVFIOBind, stepVFIOUnbind, stepNouveau, stepVGPUInstall, stepVGPUDevices},
			Doc: Doc{
				Verifies: "per GPU: on a VFIO driver for vm-passthrough (every endpoint function of the card), and what keeps it there at the next boot, named by file and line (IDs in modprobe.d, on the kernel command line or an `/etc/initramfs-tools/modules` line, with vfio-pci built in or loaded early by initramfs-tools, dracut's `force_drivers`/`rd.driver.pre=`, mkinitcpio's `MODULES`, modules-load.d (only where udev's coldplug, which systemd runs alongside it, loads no other driver for the device) or a softdep on a module that loads; what looks like it and is not, such as a softdep on a blacklisted or absent module, `options vfio-pci ids=` on a built-in vfio-pci, or initramfs configuration where the next boot loads no initramfs, is named with why); `module_blacklist=` on the command line naming a module a mode needs (nvidia for the driver container, vfio_pci) is a fail, or a warn when only the next boot has it; on the NVIDIA driver for containers (unbound only while the NVIDIA driver is not loaded yet and no `driver_override` names another driver: a loaded driver does not take a device unbound later), on the nvidia driver for vm-vgpu (a GPU on vfio-pci, nouveau or no driver hosts no vGPU); a selected non-NVIDIA device fails container and vm-vgpu; for vm-passthrough, NVSwitches not on a VFIO driver are a warn (a VM given the GPUs gets their NVLink fabric only with them, or from a Fabric Manager on the host); for containers and vm-vgpu, NVSwitches on a VFIO driver, or unbound while `nvidia-nvswitch` is loaded, fail (the host's Fabric Manager cannot reach them, and CUDA on an NVSwitch system does not start until it has trained the fabric: error 802). Each GPU's finding carries the driver it is on (`facts.driver`).",
				Reads:    "each device's driver and `driver_override`, `/sys/bus/pci/drivers`, modprobe.d, modules-load.d, the initramfs configuration and image, `/proc/cmdline` and the next boot's command line.",
				Matters:  "each mode needs the GPU on a different driver: vfio-pci for passthrough, the NVIDIA driver for containers, the vGPU manager's nvidia driver for vGPUs.",
			},
			Remedies: []string{"gpuprep vfio bind --persist (vm-passthrough)", "gpuprep vfio unbind (container, vm-vgpu)"}},
		{ID: "vgpu.manager", Title: "NVIDIA vGPU manager installed", Modes: []Mode{VMVGPU}, Run: checkVGPUManager,
			ChangedBy: []string{stepVGPUInstall},
			Doc: Doc{
				Verifies: "NVIDIA vGPU manager installed (module, daemons, mdev bus; for SR-IOV GPUs on kernel ≥ 6.8, where vGPU 17+ uses the vendor-specific VFIO framework and no mdev, the evidence named is the daemons and `sriov-manage`) and its `nvidia-vgpu-mgr` daemon running (from `/proc`). An installed manager's finding carries what shows it, the files it has on the host, and its version with the record it was read from (`facts.vgpuManager`).",
				Reads:    "`/sys/module/nvidia_vgpu_vfio`, `/usr/bin/nvidia-vgpu-mgr`, `/usr/bin/nvidia-vgpud`, `/usr/lib/nvidia/sriov-manage`, `/sys/class/mdev_bus`, `/proc/*/comm`, `/sys/module/nvidia/version`, nvidia-installer's `/var/lib/nvidia/log`, dpkg's records.",
				Matters:  "vGPUs exist only with NVIDIA's licensed vGPU manager, and VMs start them only through its nvidia-vgpu-mgr daemon.",
			},
			Remedies: []string{"gpuprep vgpu install --driver NVIDIA-Linux-x86_64-VER-vgpu-kvm.run", "let the GPU Operator deploy it (vgpuManager.enabled=true with your private image)"}},
		{ID: "vgpu.types", Title: "vGPU types offered by each GPU", Modes: []Mode{VMVGPU}, Run: checkVGPUTypes,
			ChangedBy: []string{stepVGPUInstall, stepVGPUDevices},
			Doc: Doc{
				Verifies: "per GPU: vGPU types offered, through mdev or the vendor-specific VFIO framework (SR-IOV VFs with `nvidia/creatable_vgpu_types`); fewer VFs enabled than `sriov_totalvfs` is a warn; a VF on vfio-pci is a fail (the VFs stay on nvidia, their VFIO provider); on the vendor-specific VFIO interface no vGPU on any VF (every `current_vgpu_type` 0) is a fail, since nothing in NVIDIA's stack creates them there (`gpuprep vgpu apply` does); on mdev, no mdev yet is a pass (the GPU Operator's vgpu-device-manager creates them from `nvidia.com/vgpu.config`). vGPUs on VFs of the vendor-specific interface, which are lost at every reboot, are created again at boot (subject `/etc/systemd/system/gpuprep-vgpu-apply.service`): a pass only when that unit is a regular file, enabled (a link in its `WantedBy=` target's `.wants` directory), runs the root-owned `/usr/local/libexec/gpuprep/gpuprep vgpu apply -f FILE -c NAME` whose config asks for at least the vGPUs there are, and `gpuprep-vgpu-sriov.service` (enabling the VFs first) is there; else a warn naming what is missing (`gpuprep vgpu apply --persist` or `apply --mode vm-vgpu` installs it).",
				Reads:    "each GPU's `mdev_supported_types`, `sriov_totalvfs`/`sriov_numvfs`, its VFs' `nvidia/creatable_vgpu_types` and `current_vgpu_type`, `/sys/bus/mdev/devices`, the systemd units under `/etc/systemd/system`.",
				Matters:  "KubeVirt allocates vGPUs of the types a GPU offers; on the vendor-specific interface only vGPUs that exist can be allocated.",
			},
			Remedies: []string{"gpuprep vgpu apply -f vgpu-config.yaml -c NAME --persist"}},
		{ID: "vgpu.support", Title: "GPU, kernel and vGPU interface are a supported combination", Modes: []Mode{VMVGPU}, Run: checkVGPUSupport, Beyond: BeyondPlan,
			Doc: Doc{
				Verifies: "per GPU: the vGPU interface and kernel are a combination the KubeVirt tooling supports (mdev: the GPU Operator's path needs a kernel < 6.0; vendor-specific VFIO: NVIDIA's sandbox device plugin cannot advertise it yet, KubeVirt ≥ 1.9 can) — a warn otherwise; a consumer GeForce or TITAN board (told by its pci.ids name) is a fail: NVIDIA vGPU does not run on it, and `vgpu.manager` then does not suggest installing the licensed manager.",
				Reads:    "each GPU's name (pci.ids) and vGPU interface (sysfs), the running kernel's release.",
				Matters:  "NVIDIA vGPU runs on data-center and RTX professional boards only, and each interface is served by different parts of the stack.",
			},
			Remedies: []string{"give a GPU NVIDIA vGPU does not support to one VM whole (gpuprep check --mode vm-passthrough)"}},
		{ID: "node.label", Title: "Workload label configured for the kubelet", Modes: Modes, Run: checkNodeLabel,
			ChangedBy: []string{stepLabel},
			Doc: Doc{
				Verifies: "the `nvidia.com/gpu.workload.config` label configured for the kubelet (`--node-labels`), if any, matches the mode and the host's real state (GPUs on a VFIO driver for `vm-passthrough`, a vGPU manager for `vm-vgpu`, neither for `container`), or a fail that says what disagrees; an invalid value is a fail (the operator would silently treat it as `container`); no label yet is not a blocker. A label put into the kubelet's files after the kubelet registered the Node (its first client certificate in `/var/lib/kubelet/pki`, or `/etc/kubernetes/kubelet.conf`) is a warn unless gpuprep label set it on the Node since: the kubelet applies `--node-labels` only when it creates the Node.",
				Reads:    "the kubelet's systemd unit, its drop-ins and the environment files they name (`/etc/default/kubelet`, `/var/lib/kubelet/kubeadm-flags.env`, …), as the kubelet reads its flags; `/var/lib/kubelet/pki`, `/etc/kubernetes/kubelet.conf`, gpuprep's journal.",
				Matters:  "the GPU Operator chooses what to deploy on a node from this label.",
			},
			Remedies: []string{"gpuprep label --mode MODE (or --before-join)"}},
	}
}

// vmMode is the mode named in fix commands for VM-only findings.
func (e *Env) vmMode() Mode {
	if e.Mode == VMVGPU {
		return VMVGPU
	}
	return VMPassthrough
}
