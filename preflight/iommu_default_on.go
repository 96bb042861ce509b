package preflight

// Which IOMMUs the kernel turns on without a kernel argument. The AMD
// IOMMU driver initialises every IOMMU the ACPI IVRS table describes
// unless told not to (drivers/iommu/amd/init.c: amd_iommu_detect returns
// early only for no_iommu, iommu=off, or amd_iommu_disabled, amd_iommu=off),
// and amd_iommu= has no "on" (Documentation/admin-guide/
// kernel-parameters.txt lists fullflush, off, force_enable,
// force_isolation, pgtbl_v1, pgtbl_v2, irtcachedis, nohugepages,
// v2_pgsizes_only). The Intel one starts disabled (dmar_disabled =
// !IS_ENABLED(CONFIG_INTEL_IOMMU_DEFAULT_ON), drivers/iommu/intel/iommu.c)
// unless the kernel is built to enable it (intelDefault). iommu=pt only
// chooses the default domain type of an IOMMU that is on.

// onByDefault says why no kernel argument gpuprep sets can turn this
// node's IOMMU on ("" where intel_iommu=on would): it is on unless turned
// off, and nothing on the running command line turned it off.
func onByDefault(e *Env, vendor string) string {
	switch vendor {
	case "amd":
		return "the AMD IOMMU is on whenever firmware describes it (IVRS), and iommu=pt does not turn it on"
	case "intel":
		if d := intelIOMMUDefault(e, e.Host.Kernel); d.State == "on" {
			return "the kernel enables the Intel IOMMU by default (" + d.Says() + "), so intel_iommu=on changes nothing"
		}
	}
	return ""
}
