package vgpu

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/journal"
)

// NVIDIASMI is the command that sets and reads a GPU's heterogeneous vGPU
// mode: the PF has no sysfs attribute for it.
const NVIDIASMI = "nvidia-smi"

// KindMode is the journal entry ApplyJournalled records before it turns on
// a GPU's heterogeneous vGPU mode: Device = the GPU, Before = the mode
// nvidia-smi read then ("Disabled"), After = "Enabled". Rollback turns the
// mode off again (nvidia-smi vgpu -shm 0) once the GPU has no vGPU left.
const KindMode = journal.KindVGPUMode

// ModeStep turns on the heterogeneous vGPU mode of a GPU, which vGPUs of
// different framebuffer sizes on it need. It runs after sriov-manage -e
// (which resets the mode) and before any current_vgpu_type write on the
// GPU, while it has no vGPU (nvidia-smi refuses the change then).
type ModeStep struct {
	GPU   string   `json:"gpu"`
	Argv  []string `json:"argv"` // nvidia-smi vgpu -shm 1 -i <nvidia-smi's address>
	About string   `json:"about"`
	Mode  string   `json:"mode"` // what nvidia-smi read before ("Disabled"; "" when not read)
}

// SMIAddress is nvidia-smi's form of a PCI address: the domain in 8 hex
// digits (0000:41:00.0 → 00000000:41:00.0).
func SMIAddress(addr string) string {
	dom, rest, ok := strings.Cut(addr, ":")
	if !ok || len(dom) >= 8 {
		return addr
	}
	return strings.Repeat("0", 8-len(dom)) + dom + ":" + rest
}

// Framebuffer is the framebuffer size a type's name gives, in the board's
// unit (GB): the number after its last "-" and before its series letters
// ("NVIDIA H200X-35C" → "35", "GRID T4-4Q" → "4", "NVIDIA A100-1-5C" → "5");
// false for a name without one.
func Framebuffer(name string) (string, bool) {
	i := strings.LastIndex(name, "-")
	if i < 0 {
		return "", false
	}
	s := name[i+1:]
	n := 0
	for n < len(s) && s[n] >= '0' && s[n] <= '9' {
		n++
	}
	if n == 0 || n == len(s) {
		return "", false
	}
	return s[:n], true
}

// sizeOf is the key vGPU types of one framebuffer size share: the size, or
// the type's own name when it gives none.
func sizeOf(name string) string {
	if fb, ok := Framebuffer(name); ok {
		return fb
	}
	return "name:" + name
}

// Hetero is what nvidia-smi -q says of a GPU's heterogeneous vGPU
// capability and mode.
type Hetero struct {
	Capability string // "Supported", "Not Supported"; "" when not shown
	Mode       string // "Enabled", "Disabled", "N/A"; "" when not shown
}

// QueryHetero runs nvidia-smi -q -i on the GPU at addr and reads the
// capability line (spelled "Heterogenous Multi-vGPU" by nvidia-smi; the
// correct spelling is taken too) and "vGPU Heterogeneous Mode".
func QueryHetero(ctx context.Context, r host.Runner, addr string) (Hetero, error) {
	if r == nil {
		return Hetero{}, host.ErrNoCommands
	}
	argv := []string{NVIDIASMI, "-q", "-i", SMIAddress(addr)}
	out, err := r.Run(ctx, argv...)
	if err != nil {
		return Hetero{}, cmdErr(argv, err, out)
	}
	var h Hetero
	for _, l := range strings.Split(string(out), "\n") {
		k, v, ok := strings.Cut(l, ":")
		if !ok {
			continue
		}
		switch k, v = strings.TrimSpace(k), strings.TrimSpace(v); k {
		case "Heterogenous Multi-vGPU", "Heterogeneous Multi-vGPU":
			h.Capability = v
		case "vGPU Heterogeneous Mode":
			h.Mode = v
		}
	}
	return h, nil
}

// planMode adds to p the heterogeneous mode step the GPU addr needs when
// the vGPUs it keeps (stay) and those p creates on it (new) have different
// framebuffer sizes, or fails, before anything is written, where the mode
// cannot be had: the GPU lacks the capability, or it has vGPUs already (the
// mode can only change while it has none) and is not in the mode.
func (p *Plan) planMode(ctx context.Context, addr string, stay []Instance, created []Action) error {
	if len(created) == 0 {
		return nil
	}
	sizes, staySizes := typeSizes(stay, created)
	if len(sizes) < 2 {
		return nil
	}
	var names []string
	for _, ns := range sizes {
		names = append(names, ns...)
	}
	sort.Strings(names)
	mixed := fmt.Sprintf("%s: vGPUs of different framebuffer sizes (%s) on one GPU need its heterogeneous vGPU mode (%s vgpu -shm 1 -i %s)",
		addr, strings.Join(names, ", "), NVIDIASMI, SMIAddress(addr))
	h, err := QueryHetero(ctx, p.runner, addr)
	if need, err := p.modeNeeded(h, err, mixed, stay, staySizes); !need || err != nil {
		return err
	}
	var sz []string
	for k := range sizes {
		sz = append(sz, strings.TrimPrefix(k, "name:"))
	}
	sort.Strings(sz)
	p.Modes = append(p.Modes, ModeStep{GPU: addr, Argv: []string{NVIDIASMI, "vgpu", "-shm", "1", "-i", SMIAddress(addr)}, Mode: h.Mode,
		About: "turn on the heterogeneous vGPU mode of " + addr + " for vGPUs of framebuffer sizes " + strings.Join(sz, " and ")})
	return nil
}

// typeSizes are the type names of stay and created by framebuffer size
// (sizeOf), each once, and the sizes of stay's.
func typeSizes(stay []Instance, created []Action) (sizes map[string][]string, staySizes map[string]bool) {
	sizes, staySizes = map[string][]string{}, map[string]bool{}
	add := func(name string) {
		k := sizeOf(name)
		if !slices.Contains(sizes[k], name) {
			sizes[k] = append(sizes[k], name)
		}
	}
	for _, e := range stay {
		add(e.Type)
		staySizes[sizeOf(e.Type)] = true
	}
	for _, a := range created {
		add(a.Type)
	}
	return sizes, staySizes
}

// modeNeeded says whether a GPU that needs its heterogeneous mode (mixed
// says why), whose mode query answered h or err, gets a step turning it
// on, or why it cannot have it; a mode that cannot be checked is noted.
func (p *Plan) modeNeeded(h Hetero, err error, mixed string, stay []Instance, staySizes map[string]bool) (bool, error) {
	switch {
	case err != nil && len(staySizes) > 1:
		return false, nil // vGPUs of different sizes exist: the GPU is in the mode
	case errors.Is(err, host.ErrNoCommands) && len(stay) == 0:
		p.Notes = append(p.Notes, mixed+"; nvidia-smi does not run against this root, so whether the GPU supports it is not checked")
	case err != nil:
		return false, fmt.Errorf("%s, and whether it has it cannot be told: %w", mixed, err)
	case h.Mode == "Enabled":
		return false, nil
	case h.Capability != "Supported":
		c := h.Capability
		if c == "" {
			c = "no such line"
		}
		return false, fmt.Errorf("%s, which it does not support (nvidia-smi -q: Heterogenous Multi-vGPU: %s): give it types of one framebuffer size", mixed, c)
	case len(stay) > 0:
		have, rm := removals(stay)
		return false, fmt.Errorf("%s, which is off (vGPU Heterogeneous Mode: %s) and can only be turned on while the GPU has no vGPU; it has %s: remove them (%s; --prune removes those not in the config that no VM holds) and apply again, or give the GPU types of one framebuffer size",
			mixed, h.Mode, have, rm)
	}
	return true, nil
}

// runMode runs a mode step and verifies through nvidia-smi -q that the mode
// took (nothing in sysfs shows it: the PF has no nvidia/ directory).
func (p *Plan) runMode(ctx context.Context, m ModeStep) error {
	if p.runner == nil {
		return fmt.Errorf("%s: %s: %w", m.GPU, host.ShellQuote(m.Argv), host.ErrNoCommands)
	}
	if out, err := p.runner.Run(ctx, m.Argv...); err != nil {
		return fmt.Errorf("%s: %w (no vGPU was created on it)", m.GPU, cmdErr(m.Argv, err, out))
	}
	h, err := QueryHetero(ctx, p.runner, m.GPU)
	if err != nil {
		return fmt.Errorf("%s: checking that %s took: %w (no vGPU was created on it)", m.GPU, host.ShellQuote(m.Argv), err)
	}
	if h.Mode != "Enabled" {
		return fmt.Errorf("%s: %s exited 0 but nvidia-smi -q reads vGPU Heterogeneous Mode: %q (no vGPU was created on it)", m.GPU, host.ShellQuote(m.Argv), h.Mode)
	}
	return nil
}

// cmdErr names the command argv in its error (unless the runner did) and
// adds the end of its output.
func cmdErr(argv []string, err error, out []byte) error {
	if strings.HasPrefix(err.Error(), strings.Join(argv, " ")) {
		return fmt.Errorf("%w%s", err, host.OutputTail(out))
	}
	return fmt.Errorf("%s: %w%s", host.ShellQuote(argv), err, host.OutputTail(out))
}

// removals names the vGPUs es and the writes that remove them.
func removals(es []Instance) (have, rm string) {
	var hs, rs []string
	for _, e := range es {
		hs = append(hs, e.Device+" ("+e.Type+")")
		a := removal(e)
		rs = append(rs, "echo "+a.Value+" > "+a.Path)
	}
	return strings.Join(hs, ", "), strings.Join(rs, "; ")
}

// notOffered explains, for an SR-IOV GPU that does not offer the type
// wanted, one cause: outside heterogeneous mode its VFs offer only the
// types of the framebuffer size of the vGPUs it has (existing). "" when
// those are of the wanted type's size (or there are none).
func notOffered(addr, wanted string, existing []Instance) string {
	var other []Instance
	for _, e := range existing {
		if sizeOf(e.Type) != sizeOf(wanted) {
			other = existing
			break
		}
	}
	if len(other) == 0 {
		return ""
	}
	have, rm := removals(other)
	return fmt.Sprintf(": outside heterogeneous vGPU mode its VFs offer only types of the framebuffer size of the vGPUs it has (%s); vGPUs of different sizes on one GPU need that mode (%s vgpu -shm 1 -i %s), which can only be turned on while the GPU has no vGPU: remove them (%s) and apply again, or give the GPU types of one framebuffer size",
		have, NVIDIASMI, SMIAddress(addr), rm)
}
