package vgpu

import (
	"context"
	"crypto/rand"
	"fmt"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/gpuprep/gpuprep/internal/effect"
	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/journal"
	"github.com/gpuprep/gpuprep/internal/plural"
	"github.com/gpuprep/gpuprep/vfio"
)

// AttrWriter writes sysfs attributes. The host root is the real one; tests
// put a kernel simulator in front of it. It is the effector's writer
// (effect.Effector.Sysfs).
type AttrWriter = effect.AttrWriter

// Instance is an existing vGPU.
type Instance struct {
	GPU    string // the PF
	Device string // mdev UUID or VF address
	Type   string // type name
	TypeID string
	Parent string // the device it is on: the PF or a VF (an mdev's parent), the VF (vendor-specific)
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
		out = append(out, Instance{GPU: addr, Device: u, Type: name, TypeID: tid, Parent: path.Base(path.Dir(real))})
	}
	for _, vf := range g.VFs {
		cur, err := root.ReadString("/sys/bus/pci/devices/" + vf + "/nvidia/current_vgpu_type")
		if err != nil || cur == "" || cur == "0" {
			continue
		}
		out = append(out, Instance{GPU: addr, Device: vf, TypeID: cur, Type: typeName(root, g, cur), Parent: vf})
	}
	return out
}

func typeName(root *host.Root, g GPU, id string) string {
	for _, t := range g.Types {
		if t.ID == id {
			return t.Name
		}
	}
	if n := vfio.ReadVGPUTypeNames(root)[id]; n != "" {
		return n
	}
	return "type " + id
}

// TypeNames is where gpuprep keeps the names of the vendor-specific type ids
// it has written (vfio.VGPUTypeNames).
const TypeNames = vfio.VGPUTypeNames

// TypeNamesFile is what TypeNames holds once the names of the
// vendor-specific types p writes to VFs are recorded in it, and whether
// that differs from what it holds now (false: nothing to write). A caller
// that journals the file writes it before ApplyJournalled, which then
// finds the names there and writes nothing.
func TypeNamesFile(root *host.Root, p *Plan) ([]byte, bool) {
	names := map[string]string{}
	for _, a := range p.Actions {
		if !strings.HasSuffix(a.Path, "/create") {
			names[a.Value] = a.Type
		}
	}
	m := vfio.ReadVGPUTypeNames(root)
	changed := false
	for id, name := range names {
		if m[id] != name {
			m[id], changed = name, true
		}
	}
	if !changed {
		return nil, false
	}
	ids := make([]string, 0, len(m))
	for k := range m {
		ids = append(ids, k)
	}
	sort.Strings(ids)
	var b strings.Builder
	b.WriteString("# vGPU type id : name, written by gpuprep vgpu apply (VFs with a type no longer list them)\n")
	for _, k := range ids {
		fmt.Fprintf(&b, "%s : %s\n", k, m[k])
	}
	return []byte(b.String()), true
}

// rememberTypeNames records the names of the types p writes to VFs in
// TypeNames, in one atomic write made at now, so that its backup has the
// name a caller that journals it first announced.
func rememberTypeNames(root *host.Root, p *Plan, now time.Time) error {
	data, changed := TypeNamesFile(root, p)
	if !changed {
		return nil
	}
	if err := root.MkdirAll("/var/lib/gpuprep", 0o755); err != nil {
		return err
	}
	_, err := root.WriteFileAtomic(TypeNames, data, 0o644, now)
	return err
}

// Want is how many vGPUs of a type one GPU should have.
type Want struct {
	GPU   string
	Type  string // as the config names it; "" with Count 0: the GPU should have none
	Count int
}

// String says what a want asks: "2× A10-12Q on 0000:41:00.0", or "no
// vGPUs on 0000:41:00.0".
func (w Want) String() string {
	if w.Count == 0 {
		return "no vGPUs on " + w.GPU
	}
	return fmt.Sprintf("%d× %s on %s", w.Count, w.Type, w.GPU)
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
	Removals []Action // with PlanOptions.Prune: unwanted vGPUs not in use, removed first
	Actions  []Action
	Kept     []Instance
	Unwanted []Instance               // existing vGPUs the config does not ask for and that stay (no --prune, or in use)
	InUse    map[string][]vfio.Holder // Device → the processes holding an unwanted vGPU that stays
	// Modes turn on the heterogeneous vGPU mode of the GPUs that get vGPUs
	// of different framebuffer sizes: after the removals, before the
	// creations.
	Modes []ModeStep
	Notes []string
	// runner runs (and ran the queries that planned) Modes: PlanOptions.Runner
	runner   host.Runner
	modesRan int
}

// ModesRan are the mode steps that ran and took (verified), in order.
func (p *Plan) ModesRan() []ModeStep { return p.Modes[:p.modesRan] }

// PlanOptions change what a plan does.
type PlanOptions struct {
	// Prune removes existing vGPUs the config does not ask for, unless a
	// process (a VM) holds them: an mdev through <uuid>/remove, a VF by
	// writing 0 to its current_vgpu_type.
	Prune bool
	// Runner runs nvidia-smi: its queries while planning (a GPU's
	// heterogeneous vGPU capability and mode) and Modes while applying.
	// nil: none runs (a plan that needs the mode then notes that it could
	// not check it, and applying it fails before the GPU's creations).
	Runner host.Runner
}

// MakePlan plans wants against the host, leaving unwanted vGPUs alone.
func MakePlan(root *host.Root, wants []Want) (*Plan, error) {
	return MakePlanWith(root, wants, PlanOptions{})
}

// clearsOnly reports whether wants ask for no vGPU at all (a config's
// vgpu-devices: {}).
func clearsOnly(wants []Want) bool {
	for _, w := range wants {
		if w.Count > 0 {
			return false
		}
	}
	return true
}

// Holders returns the processes that hold the vGPU inst open: its VFIO group
// (/dev/vfio/<group>) or its iommufd device node (/dev/vfio/devices/vfioN),
// found by scanning /proc/*/fd through the root.
func Holders(root *host.Root, inst Instance) []vfio.Holder {
	dev := "/sys/bus/pci/devices/" + inst.Device
	if !strings.Contains(inst.Device, ":") {
		dev = "/sys/bus/mdev/devices/" + inst.Device
	}
	return vfio.DeviceHolders(root, dev)
}

func removal(e Instance) Action {
	if strings.Contains(e.Device, ":") {
		return Action{GPU: e.GPU, Type: e.Type, Path: "/sys/bus/pci/devices/" + e.Device + "/nvidia/current_vgpu_type", Value: "0",
			About: "remove the " + e.Type + " of VF " + e.Device}
	}
	return Action{GPU: e.GPU, Type: e.Type, Path: "/sys/bus/mdev/devices/" + e.Device + "/remove", Value: "1",
		About: "remove mdev " + e.Device + " (" + e.Type + ")"}
}

// MakePlanWith plans wants against the host.
func MakePlanWith(root *host.Root, wants []Want, opts PlanOptions) (*Plan, error) {
	p := &Plan{InUse: map[string][]vfio.Holder{}, runner: opts.Runner}
	byGPU := map[string][]Want{}
	var order []string
	for _, w := range wants {
		if _, ok := byGPU[w.GPU]; !ok {
			order = append(order, w.GPU)
		}
		byGPU[w.GPU] = append(byGPU[w.GPU], w)
	}
	for _, addr := range order {
		if err := p.planGPU(root, addr, byGPU[addr], opts); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// gpuPlace is what the vGPUs wanted on one GPU are placed in: its
// interface and types, its vGPUs now, the room left on its mdev parents
// (mdev) or its free VFs (sriov).
type gpuPlace struct {
	addr     string
	g        GPU
	existing []Instance
	room     *mdevRoom
	freeVFs  []string
}

// planGPU plans the wants of the GPU at addr: the vGPUs kept, those
// unwanted (removed with Prune), those to create, and its mode.
func (p *Plan) planGPU(root *host.Root, addr string, wants []Want, opts PlanOptions) error {
	g := Read(root, addr)
	if g.Interface == "" && clearsOnly(wants) {
		return nil // a GPU with no vGPU interface has no vGPUs to clear
	}
	if g.Interface == "" {
		return fmt.Errorf("%s: no vGPU interface (no mdev_supported_types, no VF with nvidia/creatable_vgpu_types): is the vGPU manager installed and are the VFs enabled?", addr)
	}
	existing := Existing(root, addr)
	kept0, unwanted0, actions0 := len(p.Kept), len(p.Unwanted), len(p.Actions)
	used, need := p.keep(existing, wants)
	freed, freedOn := p.prune(root, existing, used, opts.Prune)
	at := &gpuPlace{addr: addr, g: g, existing: existing}
	switch g.Interface {
	case "mdev":
		at.room = newMdevRoom(g, freedOn)
	case "sriov":
		at.freeVFs = freeVFs(g, existing, freed)
	}
	for j, w := range wants {
		if need[j] <= 0 {
			continue
		}
		if err := p.create(at, w, need[j]); err != nil {
			return err
		}
	}
	if g.Interface != "sriov" {
		return nil
	}
	stay := append(append([]Instance{}, p.Kept[kept0:]...), p.Unwanted[unwanted0:]...)
	return p.planMode(context.Background(), addr, stay, p.Actions[actions0:])
}

// keep keeps the existing vGPUs that match wants, up to each wanted
// count: used marks them, need is how many more of each want to create.
func (p *Plan) keep(existing []Instance, wants []Want) (used []bool, need []int) {
	used = make([]bool, len(existing))
	need = make([]int, len(wants))
	for j, w := range wants {
		have := 0
		for i, e := range existing {
			if !used[i] && TypeMatches(w.Type, e.Type) && have < w.Count {
				used[i] = true
				have++
				p.Kept = append(p.Kept, e)
			}
		}
		need[j] = w.Count - have
	}
	return used, need
}

// prune takes the existing vGPUs not used as unwanted: removed with prune
// unless in use. freed are the vGPUs removed, freedOn how many mdevs each
// parent loses.
func (p *Plan) prune(root *host.Root, existing []Instance, used []bool, prune bool) (freed map[string]bool, freedOn map[string]int) {
	freed, freedOn = map[string]bool{}, map[string]int{}
	for i, e := range existing {
		if used[i] {
			continue
		}
		if !prune {
			p.Unwanted = append(p.Unwanted, e)
			continue
		}
		if hs := Holders(root, e); len(hs) > 0 {
			p.Unwanted = append(p.Unwanted, e)
			p.InUse[e.Device] = hs
			continue
		}
		p.Removals = append(p.Removals, removal(e))
		freed[e.Device] = true
		freedOn[e.Parent]++
	}
	return freed, freedOn
}

// freeVFs are the VFs of g with no vGPU once the freed ones are removed.
func freeVFs(g GPU, existing []Instance, freed map[string]bool) []string {
	busy := map[string]bool{}
	for _, e := range existing {
		busy[e.Device] = !freed[e.Device]
	}
	var out []string
	for _, vf := range g.VFs {
		if !busy[vf] {
			out = append(out, vf)
		}
	}
	return out
}

// create plans n more vGPUs of w's type on the GPU at.
func (p *Plan) create(at *gpuPlace, w Want, n int) error {
	t := FindType(at.g.Types, w.Type)
	if t == nil {
		var names []string
		for _, x := range at.g.Types {
			names = append(names, x.Name)
		}
		why := ""
		if at.g.Interface == "sriov" {
			why = notOffered(at.addr, w.Type, at.existing)
		}
		return fmt.Errorf("%s cannot create vGPU type %q (it offers: %s)%s", at.addr, w.Type, strings.Join(names, ", "), why)
	}
	switch at.g.Interface {
	case "mdev":
		return p.createMdevs(at, *t, n)
	case "sriov":
		return p.createOnVFs(at, *t, n)
	}
	return nil
}

// createMdevs plans n mdevs of t on the GPU at: on the PF (Turing) or on
// the VFs (Ampere), parent by parent; removals change what is available:
// the kernel has the last word then.
func (p *Plan) createMdevs(at *gpuPlace, t Type, n int) error {
	on, err := at.room.place(t, n)
	if err != nil {
		return err
	}
	for _, par := range on {
		about := "create an mdev of " + t.ID
		if par != at.addr {
			about += " on VF " + par
		}
		p.Actions = append(p.Actions, Action{GPU: at.addr, Type: t.Name,
			Path:  "/sys/bus/pci/devices/" + par + "/mdev_supported_types/" + t.ID + "/create",
			Value: "<uuid>", About: about})
	}
	return nil
}

// createOnVFs plans n free VFs of the GPU at given the type t.
func (p *Plan) createOnVFs(at *gpuPlace, t Type, n int) error {
	if len(at.freeVFs) < n {
		return fmt.Errorf("%s: %d more %q wanted, %s", at.addr, n, t.Name, plural.N(len(at.freeVFs), "free VF"))
	}
	for i := 0; i < n; i++ {
		vf := at.freeVFs[0]
		at.freeVFs = at.freeVFs[1:]
		p.Actions = append(p.Actions, Action{GPU: at.addr, Type: t.Name,
			Path:  "/sys/bus/pci/devices/" + vf + "/nvidia/current_vgpu_type",
			Value: t.ID, About: "make VF " + vf + " a " + t.Name})
	}
	return nil
}

// Apply performs the plan's writes, removals first. Before each write to current_vgpu_type
// it re-reads the VF's creatable types, since capacity changes with every
// vGPU created. It returns the actions done (with the UUIDs used).
func Apply(root *host.Root, w AttrWriter, p *Plan) ([]Action, error) {
	return ApplyAt(root, w, p, time.Now())
}

// ApplyAt is Apply with the names of the vendor-specific types it writes
// recorded in TypeNames first, in one write made at now (its backup named
// after now).
func ApplyAt(root *host.Root, w AttrWriter, p *Plan, now time.Time) ([]Action, error) {
	return apply(root, w, p, now, nil)
}

// Journal entry kinds of the vGPU writes ApplyJournalled records (gpuprep
// vgpu apply, and apply's vgpu-devices step):
//
//	KindIntent: before a write that creates a vGPU. Path = the attribute
//	            (…/mdev_supported_types/TYPE/create, or a VF's
//	            …/nvidia/current_vgpu_type), After = the value (the new
//	            mdev's UUID, or the type id), Device = the GPU, Before = a
//	            VF's current_vgpu_type just before the write
//	            Also before a write that removes one (--prune): Path = its
//	            …/UUID/remove, or the VF's current_vgpu_type, After = the
//	            value (1, 0), Before = the type it had; rollback, which
//	            never makes a removed vGPU again, passes over it
//	KindWrite:  every write, once made (creations and --prune's removals)
//	KindMode:   before a GPU's heterogeneous vGPU mode is turned on (ModeStep)
const (
	KindWrite  = journal.KindVGPU
	KindIntent = journal.KindVGPUIntent
)

// ApplyJournalled is ApplyAt for callers that keep a journal: each write
// that creates a vGPU is recorded through record as a KindIntent entry just
// before it is made — naming the new mdev's UUID (chosen here when the plan
// says "<uuid>") with its parent and type in the path, or the VF with the
// value it had — and every write as a KindWrite entry once made. So a
// process killed between a write and its record still leaves an intent
// that names the vGPU: rollback removes it when it exists and has nothing
// to undo when it does not. A mode step is recorded (KindMode) before it
// runs: rollback reads the mode and turns it off if it is on. Entries are stamped now, with command; a
// record that fails stops the run before the next write. TypeNames is not
// journalled here: a caller writes TypeNamesFile first, as a journalled
// file (ApplyRecorded; apply's vgpu-devices step), and this finds the names there.
func ApplyJournalled(root *host.Root, w AttrWriter, p *Plan, now time.Time, command string, record func(journal.Entry) error) ([]Action, error) {
	rec := func(a Action) journal.VGPURecord { return journal.VGPURecord{Attr: a.Path, GPU: a.GPU, Value: a.Value} }
	return apply(root, w, p, now, &journalHooks{
		intent: func(a Action) error {
			r := rec(a)
			if !strings.HasSuffix(a.Path, "/create") {
				cur, err := root.ReadString(a.Path)
				if err != nil {
					return fmt.Errorf("%s: reading %s before writing it: %w", a.GPU, a.Path, err)
				}
				r.Before = cur
			}
			return record(r.Intent(command, now))
		},
		removing: func(a Action) error {
			r := rec(a)
			r.Before = a.Type
			return record(r.Intent(command, now))
		},
		done: func(a Action) error { return record(rec(a).Done(command, now)) },
		mode: func(m ModeStep) error {
			return record(journal.VGPUModeRecord{GPU: m.GPU, Mode: m.Mode}.Entry(command, now))
		},
	})
}

// journalHooks are told of apply's writes: intent before each creation,
// removing before each removal, done after every write; mode before each
// mode step.
type journalHooks struct {
	intent, removing, done func(Action) error
	mode                   func(ModeStep) error
}

// noHooks are the hooks of an apply that journals nothing.
func noHooks() *journalHooks {
	none := func(Action) error { return nil }
	return &journalHooks{intent: none, removing: none, done: none, mode: func(ModeStep) error { return nil }}
}

func apply(root *host.Root, w AttrWriter, p *Plan, now time.Time, j *journalHooks) ([]Action, error) {
	if err := rememberTypeNames(root, p, now); err != nil {
		return nil, fmt.Errorf("recording the names of vGPU types: %w", err)
	}
	if j == nil {
		j = noHooks()
	}
	var done []Action
	write := func(a Action) error {
		if err := w.WriteAttr(a.Path, a.Value); err != nil {
			return fmt.Errorf("%s: %s: %w", a.GPU, a.About, err)
		}
		done = append(done, a)
		return j.done(a)
	}
	for _, a := range p.Removals {
		if err := j.removing(a); err != nil {
			return done, err
		}
		if err := write(a); err != nil {
			return done, err
		}
	}
	for _, m := range p.Modes {
		if err := j.mode(m); err != nil {
			return done, err
		}
		if err := p.runMode(context.Background(), m); err != nil {
			return done, err
		}
		p.modesRan++
	}
	for _, a := range p.Actions {
		a, err := readyToCreate(root, a)
		if err != nil {
			return done, err
		}
		if err := j.intent(a); err != nil {
			return done, err
		}
		if err := write(a); err != nil {
			return done, err
		}
	}
	return done, nil
}

// readyToCreate checks, just before the creation a, that its parent still
// has room (an mdev: available_instances; creating on one VF of an Ampere
// GPU takes room from its siblings) or that its VF can still take the
// type, and gives a new mdev its UUID (before its intent is recorded: the
// journal names it).
func readyToCreate(root *host.Root, a Action) (Action, error) {
	if !strings.HasSuffix(a.Path, "/create") {
		vf := strings.TrimSuffix(strings.TrimPrefix(a.Path, "/sys/bus/pci/devices/"), "/nvidia/current_vgpu_type")
		b, _ := root.ReadFile("/sys/bus/pci/devices/" + vf + "/nvidia/creatable_vgpu_types")
		for _, t := range ParseCreatable(string(b)) {
			if t.ID == a.Value {
				return a, nil
			}
		}
		return a, fmt.Errorf("%s: %s is no longer creatable on VF %s (capacity used up?)", a.GPU, a.Type, vf)
	}
	if n := readInt(root, path.Dir(a.Path)+"/available_instances"); n == 0 {
		return a, fmt.Errorf("%s: no %s instance left on %s (available_instances 0: the GPU's room used up?)", a.GPU, a.Type, parentOf(a.Path))
	}
	if a.Value == "<uuid>" {
		a.Value = newUUID()
	}
	return a, nil
}

// parentOf is the device of a …/<dev>/mdev_supported_types/<type>/create path.
func parentOf(create string) string {
	return path.Base(path.Dir(path.Dir(path.Dir(create))))
}

// NewUUID returns a random (version 4) UUID for a new mdev, for callers that
// record it before Apply writes it to create.
func NewUUID() string { return newUUID() }

func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
