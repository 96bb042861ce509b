package vgpu

import (
	"crypto/rand"
	"fmt"
	"path"
	"strings"

	"github.com/gpuprep/gpuprep/internal/host"
)

// AttrWriter writes sysfs attributes. The host root is the real one; tests
// put a kernel simulator in front of it.
type AttrWriter interface {
	WriteAttr(p, value string) error
}

// Instance is an existing vGPU.
type Instance struct {
	GPU    string // the PF
	Device string // mdev UUID or VF address
	Type   string // type name
	TypeID string
}

// Existing lists the vGPUs that exist on the PF at addr: mdevs whose parent
// is the PF or one of its VFs, and VFs with a current_vgpu_type.
func Existing(root *host.Root, addr string) []Instance {
	g := Read(root, addr)
	parents := map[string]bool{addr: true}
	for _, vf := range g.VFs {
		parents[vf] = true
	}
	var out []Instance
	for _, u := range root.Names("/sys/bus/mdev/devices") {
		real, err := root.Realpath("/sys/bus/mdev/devices/" + u)
		if err != nil || !parents[path.Base(path.Dir(real))] {
			continue
		}
		tid := root.LinkBase("/sys/bus/mdev/devices/" + u + "/mdev_type")
		name, _ := root.ReadString("/sys/bus/mdev/devices/" + u + "/mdev_type/name")
		out = append(out, Instance{GPU: addr, Device: u, Type: name, TypeID: tid})
	}
	for _, vf := range g.VFs {
		cur, err := root.ReadString("/sys/bus/pci/devices/" + vf + "/nvidia/current_vgpu_type")
		if err != nil || cur == "" || cur == "0" {
			continue
		}
		out = append(out, Instance{GPU: addr, Device: vf, TypeID: cur, Type: typeName(g, cur)})
	}
	return out
}

func typeName(g GPU, id string) string {
	for _, t := range g.Types {
		if t.ID == id {
			return t.Name
		}
	}
	return "type " + id
}

// Want is how many vGPUs of a type one GPU should have.
type Want struct {
	GPU   string
	Type  string // as the config names it
	Count int
}

// Action is one planned write.
type Action struct {
	GPU   string `json:"gpu"`
	Type  string `json:"type"`
	Path  string `json:"path"`  // sysfs attribute
	Value string `json:"value"` // what is written ("<uuid>" for a new mdev)
	About string `json:"about"`
}

// Plan says what must be written for every GPU to have the wanted vGPUs.
// Existing vGPUs that match are kept; it fails when a type is unknown to a
// GPU or when there is not enough room, naming the GPU and type.
type Plan struct {
	Actions  []Action
	Kept     []Instance
	Unwanted []Instance // existing vGPUs the config does not ask for (left alone)
}

// MakePlan plans wants against the host.
func MakePlan(root *host.Root, wants []Want) (*Plan, error) {
	p := &Plan{}
	byGPU := map[string][]Want{}
	var order []string
	for _, w := range wants {
		if _, ok := byGPU[w.GPU]; !ok {
			order = append(order, w.GPU)
		}
		byGPU[w.GPU] = append(byGPU[w.GPU], w)
	}
	for _, addr := range order {
		g := Read(root, addr)
		if g.Interface == "" {
			return nil, fmt.Errorf("%s: no vGPU interface (no mdev_supported_types, no VF with nvidia/creatable_vgpu_types): is the vGPU manager installed and are the VFs enabled?", addr)
		}
		existing := Existing(root, addr)
		used := make([]bool, len(existing))
		freeVFs := []string{}
		if g.Interface == "sriov" {
			busy := map[string]bool{}
			for _, e := range existing {
				busy[e.Device] = true
			}
			for _, vf := range g.VFs {
				if !busy[vf] {
					freeVFs = append(freeVFs, vf)
				}
			}
		}
		for _, w := range byGPU[addr] {
			var t *Type
			for i := range g.Types {
				if TypeMatches(w.Type, g.Types[i].Name) {
					t = &g.Types[i]
					break
				}
			}
			have := 0
			for i, e := range existing {
				if !used[i] && TypeMatches(w.Type, e.Type) && have < w.Count {
					used[i] = true
					have++
					p.Kept = append(p.Kept, e)
				}
			}
			need := w.Count - have
			if need <= 0 {
				continue
			}
			if t == nil {
				var names []string
				for _, x := range g.Types {
					names = append(names, x.Name)
				}
				return nil, fmt.Errorf("%s cannot create vGPU type %q (it offers: %s)", addr, w.Type, strings.Join(names, ", "))
			}
			switch g.Interface {
			case "mdev":
				if t.Available >= 0 && t.Available < need {
					return nil, fmt.Errorf("%s: %d more %q wanted, %d available", addr, need, t.Name, t.Available)
				}
				for i := 0; i < need; i++ {
					p.Actions = append(p.Actions, Action{GPU: addr, Type: t.Name,
						Path:  "/sys/bus/pci/devices/" + addr + "/mdev_supported_types/" + t.ID + "/create",
						Value: "<uuid>", About: "create an mdev of " + t.ID})
				}
			case "sriov":
				if len(freeVFs) < need {
					return nil, fmt.Errorf("%s: %d more %q wanted, %d free VFs", addr, need, t.Name, len(freeVFs))
				}
				for i := 0; i < need; i++ {
					vf := freeVFs[0]
					freeVFs = freeVFs[1:]
					p.Actions = append(p.Actions, Action{GPU: addr, Type: t.Name,
						Path:  "/sys/bus/pci/devices/" + vf + "/nvidia/current_vgpu_type",
						Value: t.ID, About: "make VF " + vf + " a " + t.Name})
				}
			}
		}
		for i, e := range existing {
			if !used[i] {
				p.Unwanted = append(p.Unwanted, e)
			}
		}
	}
	return p, nil
}

// Apply performs the plan's writes. Before each write to current_vgpu_type
// it re-reads the VF's creatable types, since capacity changes with every
// vGPU created. It returns the actions done (with the UUIDs used).
func Apply(root *host.Root, w AttrWriter, p *Plan) ([]Action, error) {
	var done []Action
	for _, a := range p.Actions {
		if a.Value == "<uuid>" {
			a.Value = newUUID()
		} else {
			vf := strings.TrimSuffix(strings.TrimPrefix(a.Path, "/sys/bus/pci/devices/"), "/nvidia/current_vgpu_type")
			b, _ := root.ReadFile("/sys/bus/pci/devices/" + vf + "/nvidia/creatable_vgpu_types")
			ok := false
			for _, t := range ParseCreatable(string(b)) {
				ok = ok || t.ID == a.Value
			}
			if !ok {
				return done, fmt.Errorf("%s: %s is no longer creatable on VF %s (capacity used up?)", a.GPU, a.Type, vf)
			}
		}
		if err := w.WriteAttr(a.Path, a.Value); err != nil {
			return done, fmt.Errorf("%s: %s: %w", a.GPU, a.About, err)
		}
		done = append(done, a)
	}
	return done, nil
}

func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
