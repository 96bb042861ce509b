package vgpu

import (
	"fmt"

	"github.com/gpuprep/gpuprep/internal/plural"
)

// mdevRoom is what the mdev parents of one GPU have room for while a plan
// places vGPUs on them: per parent (in the GPU's order) and type ID, the
// free instances (-1: unknown, the kernel has the last word), and per type
// the GPU's own bound (GPU.Types' Available).
type mdevRoom struct {
	gpu     string
	order   []string
	free    map[string]map[string]int
	gpuFree map[string]int
	// vf: the parents are VFs, which host one vGPU each
	vf bool
}

// newMdevRoom is the room of g's mdev parents, with the parents of the
// mdevs a plan removes (freed: parent → count) counted as having room the
// kernel decides: the PF (Turing) then takes what the kernel allows, a VF
// takes one.
func newMdevRoom(g GPU, freed map[string]int) *mdevRoom {
	r := &mdevRoom{gpu: g.Address, free: map[string]map[string]int{}, gpuFree: map[string]int{}, vf: g.VFParents()}
	for _, p := range g.Parents {
		if p.Interface != "mdev" {
			continue
		}
		r.order = append(r.order, p.Address)
		m := map[string]int{}
		for _, t := range p.Types {
			m[t.ID] = t.Available
			if freed[p.Address] > 0 {
				m[t.ID] = -1
				if r.vf {
					m[t.ID] = 1
				}
			}
		}
		r.free[p.Address] = m
	}
	for _, t := range g.Types {
		r.gpuFree[t.ID] = t.Available
		if len(freed) > 0 {
			r.gpuFree[t.ID] = -1 // removals give back what the kernel says
		}
	}
	return r
}

// place takes n instances of t, parent by parent in order, min(left, free)
// on each (as vgpu-device-manager's SetVGPUConfig does; one on a VF): the
// parents, one a vGPU, or an error that says how many there is room for
// and where.
func (r *mdevRoom) place(t Type, n int) ([]string, error) {
	if g := r.gpuFree[t.ID]; g >= 0 && g < n {
		return nil, r.short(t, n, g)
	}
	var out []string
	for _, p := range r.order {
		f, ok := r.free[p][t.ID]
		if len(out) == n || !ok || f == 0 {
			continue
		}
		k := n - len(out)
		if f > 0 && f < k {
			k = f
		}
		if r.vf {
			k = 1
		}
		for i := 0; i < k; i++ {
			out = append(out, p)
		}
		r.take(p, t.ID, f-k)
	}
	if len(out) < n {
		return nil, r.short(t, n, len(out))
	}
	if g := r.gpuFree[t.ID]; g > 0 {
		r.gpuFree[t.ID] = g - n
	}
	return out, nil
}

// take records what parent p has left of typ once used: on a VF nothing of
// any type; where its count was unknown, still unknown.
func (r *mdevRoom) take(p, typ string, left int) {
	switch {
	case r.vf:
		for id := range r.free[p] {
			r.free[p][id] = 0
		}
	case r.free[p][typ] > 0:
		r.free[p][typ] = left
	}
}

// short is the refusal of n more t where there is room for have.
func (r *mdevRoom) short(t Type, n, have int) error {
	with := 0
	for _, p := range r.order {
		if r.free[p][t.ID] > 0 {
			with++
		}
	}
	if !r.vf {
		return fmt.Errorf("%s: %d more %q wanted, %d available", r.gpu, n, t.Name, have)
	}
	why := fmt.Sprintf("%d of its %s, the mdev parents, %s one free", with, plural.N(len(r.order), "VF"), plural.Verb(with, "has", "have"))
	if g := r.gpuFree[t.ID]; g >= 0 && g < with {
		why = fmt.Sprintf("the GPU takes %d more; %s", g, why)
	}
	return fmt.Errorf("%s: %d more %q wanted, %d available (%s)", r.gpu, n, t.Name, have, why)
}
