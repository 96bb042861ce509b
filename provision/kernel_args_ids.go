package provision

import (
	"slices"

	"github.com/gpuprep/gpuprep/grub"
	"github.com/gpuprep/gpuprep/internal/kargs"
	"github.com/gpuprep/gpuprep/vfio"
)

// vfio-pci's IDs in the kernel-args step. Where vfio-pci is built into the
// kernel (modules.builtin), the vfio-bind step's persistent binding is
// vfio-pci.ids= on the kernel command line (vfio.CmdlineIDs: a built-in
// module takes no modprobe.d options). Where the plan edits the kernel
// command line anyway (a kernel-args step), the IDs go into that same
// edit, one bootloader edit and one regeneration (update-grub, kernel-
// install, proxmox-boot-tool refresh) for both: shown in its diff,
// journalled with its files and bootloader-tool intents, undone by
// rollback as its edit is. The vfio-bind step then leaves the command line
// alone (its modprobe.d file still records the IDs as gpuprep's, for vfio
// unbind). Where the vfio-bind step waits for a reboot (no IOMMU groups
// yet, so which IDs is not known), it makes the edit itself after it.

// kargsPlanned is what the kernel-args step was planned from.
type kargsPlanned struct {
	req   grub.Request
	want  []kargs.Param
	later string // the BLS title blsLater gave ("": none)
}

// idsInKernelArgs moves pp's kernel-command-line edit (vfio-pci.ids=)
// into the kernel-args step's, planning that step's edit again with both;
// it leaves both as they were where there is no such step or the joint
// edit cannot be planned.
func (p *Plan) idsInKernelArgs(pp *vfio.Persist) {
	c := pp.CmdlinePending()
	i := slices.IndexFunc(p.Steps, func(s *Step) bool { return s.ID == StepKernelArgs })
	if c == nil || i < 0 || p.boot == nil || p.kargs.later != "" {
		return
	}
	// every vfio-pci.ids= goes and the wanted one is appended, as vfio's
	// own edit does
	req := p.kargs.req
	req.Remove = append(slices.Clone(req.Remove), "vfio-pci.ids")
	want := slices.Clone(p.kargs.want)
	if c.Want != "" {
		want = append(want, kargs.Param{Key: "vfio-pci.ids", Value: c.Want, HasValue: true})
	}
	gp, err := p.planGrubEdit(p.boot, req, want)
	if err != nil || !gp.Changed() {
		return
	}
	s := planKernelArgsStep(p.boot, gp, p.kargs.want, "")
	for _, n := range p.Steps[i].Notes {
		if !slices.Contains(s.Notes, n) {
			s.Notes = append(s.Notes, n) // what planning the step said first (a boot-menu tool not under the root)
		}
	}
	s.Notes = append(s.Notes, c.Why+"; they are in this edit, made once for the vfio-bind step too")
	p.Steps[i], p.grubPlan = s, gp
	c.Plan = nil // the vfio-bind step makes no edit of its own
	pp.Warnings = append(pp.Warnings, c.Arg()+" goes on the kernel command line in the kernel-args step's edit: "+c.Why)
}
