package preflight

// All returns every check, in report order. IDs are stable: scripts use
// them with --skip and --ignore, and reports carry them.
func All() []Check {
	return []Check{
		{ID: "gpu.present", Title: "NVIDIA GPUs present", Modes: Modes, Run: checkGPUPresent},
		{ID: "cpu.virtualization", Title: "CPU virtualization (VT-x / AMD-V) enabled in firmware", Modes: VMModes, Run: checkCPUVirt},
		{ID: "kvm.device", Title: "KVM available (/dev/kvm)", Modes: VMModes, Run: checkKVM},
		{ID: "iommu.firmware", Title: "IOMMU described by firmware (ACPI DMAR/IVRS)", Modes: VMModes, Run: checkIOMMUFirmware},
		{ID: "iommu.kernel", Title: "IOMMU active in the running kernel", Modes: VMModes, Run: checkIOMMUKernel},
		{ID: "iommu.cmdline", Title: "IOMMU kernel arguments: wanted, configured, running", Modes: VMModes, Run: checkIOMMUCmdline},
		{ID: "iommu.interrupt-remapping", Title: "Interrupt remapping enabled", Modes: VMModes, Run: checkInterruptRemapping},
		{ID: "iommu.groups", Title: "Each GPU's IOMMU group can be passed through whole", Modes: []Mode{VMPassthrough}, Run: checkIOMMUGroups},
		{ID: "driver.nouveau", Title: "nouveau does not hold the GPUs", Modes: Modes, Run: checkNouveau},
		{ID: "vfio.modules", Title: "VFIO modules present for the running kernel", Modes: []Mode{VMPassthrough}, Run: checkVFIOModules},
		{ID: "vfio.binding", Title: "GPU driver binding fits the mode", Modes: Modes, Run: checkVFIOBinding},
		{ID: "vgpu.manager", Title: "NVIDIA vGPU manager installed", Modes: []Mode{VMVGPU}, Run: checkVGPUManager},
		{ID: "vgpu.types", Title: "vGPU types offered by each GPU", Modes: []Mode{VMVGPU}, Run: checkVGPUTypes},
		{ID: "vgpu.support", Title: "GPU, kernel and vGPU interface are a supported combination", Modes: []Mode{VMVGPU}, Run: checkVGPUSupport},
		{ID: "node.label", Title: "Workload label configured for the kubelet", Modes: Modes, Run: checkNodeLabel},
	}
}

// vmMode is the mode named in fix commands for VM-only findings.
func (e *Env) vmMode() Mode {
	if e.Mode == VMVGPU {
		return VMVGPU
	}
	return VMPassthrough
}
