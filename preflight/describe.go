package preflight

// Doc is what a check says about itself, for `gpuprep checks` and
// docs/checks.md (both generated from the registry).
type Doc struct {
	// Verifies is what the check establishes, and what each verdict means.
	Verifies string `json:"verifies"`
	// Reads is where its evidence comes from (files, commands).
	Reads string `json:"reads"`
	// Matters is why a node needs it for the modes it belongs to.
	Matters string `json:"matters"`
}

// Beyond says whether a check's fail is beyond what a plan (gpuprep apply)
// changes.
type Beyond string

// How far a plan reaches. The zero value: only the ChangedBy steps change
// the verdict (a fail with none of them planned stays after apply).
const (
	// BeyondPlan: no step changes it (the hardware, the firmware, the
	// kernel's build); a fail keeps the node from being ready whatever
	// apply does.
	BeyondPlan Beyond = "always"
	// BeyondUnlessReboot: the running kernel's IOMMU state, which only the
	// kernel arguments a pending reboot brings change.
	BeyondUnlessReboot Beyond = "unless-reboot"
)

// The provision step IDs checks name in ChangedBy (provision.Steps, which
// preflight cannot import; a provision test keeps the two the same).
const (
	stepKernelArgs  = "kernel-args"
	stepReboot      = "reboot"
	stepVFIOBind    = "vfio-bind"
	stepVFIOUnbind  = "vfio-unbind"
	stepNouveau     = "nouveau"
	stepVGPUInstall = "vgpu-install"
	stepVGPUDevices = "vgpu-devices"
	stepLabel       = "label"
)

// Lookup is the registered check with that ID.
func Lookup(id string) (Check, bool) {
	for _, c := range All() {
		if c.ID == id {
			return c, true
		}
	}
	return Check{}, false
}

// StaysAfterPlan reports whether a fail of c stays after a plan: beyond any
// plan, or changed only by steps of which none is planned (planned says
// whether one is). rebootPending: the plan reboots into new kernel
// arguments.
func (c Check) StaysAfterPlan(planned func(step string) bool, rebootPending bool) bool {
	switch {
	case c.Beyond == BeyondPlan, c.Beyond == BeyondUnlessReboot && !rebootPending:
		return true
	}
	for _, s := range c.ChangedBy {
		if planned(s) {
			return false
		}
	}
	return len(c.ChangedBy) > 0
}
