package vgpu

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/journal"
	"github.com/gpuprep/gpuprep/internal/plural"
)

// A version change of the vGPU manager (gpuprep vgpu install --driver NEW on
// a host with another version installed) is the GPU Operator's upgrade flow
// done on the host: refuse while a VM holds a vGPU (naming it), keep the
// installed version's installer and record the change (UpgradeRecord, then
// a KindUpgradeIntent entry), remove the vGPUs, stop the daemons, unload
// the modules, uninstall the old manager the way it was installed
// (nvidia-installer --uninstall, or the package manager), install the new
// one, recreate the vGPUs that existed (the same mdev UUIDs, the same VFs,
// the same types), verify, and record it done (KindUpgrade). A run killed
// on the way resumes from the record: the next install of NEW finds the
// intent without its done entry and plans what is left, with the vGPUs the
// record names. gpuprep rollback undoes it (RevertUpgrade): the same flow
// back to the kept version.
//
// Journal entries (command "vgpu install"):
//
//	KindUpgradeIntent: before the first change. Before = the version
//	                   installed, After = the new one, Path = the record
//	KindUpgrade:       once verified; the same fields
const (
	KindUpgradeIntent = journal.KindVGPUManagerIntent
	KindUpgrade       = journal.KindVGPUManager
)

// ManagerRef is one side of a version change.
type ManagerRef struct {
	Version string `json:"version"`
	Format  string `json:"format"`            // FormatRun, FormatDeb, FormatRPM
	Package string `json:"package,omitempty"` // a .deb's or .rpm's name
	File    string `json:"file,omitempty"`    // the kept installer or package (host path)
	SHA256  string `json:"sha256,omitempty"`  // of File
}

// KeptVGPU is a vGPU that existed before a version change.
type KeptVGPU struct {
	GPU    string `json:"gpu"`    // the PF
	Device string `json:"device"` // the mdev's UUID, or the VF
	Type   string `json:"type"`   // its type's name
}

// UpgradeRecord is what a version change needs to finish and to go back,
// written (atomically, in UpgradeDir) before its KindUpgradeIntent entry.
type UpgradeRecord struct {
	APIVersion string     `json:"apiVersion"`
	Kind       string     `json:"kind"`
	From       ManagerRef `json:"from"`
	To         ManagerRef `json:"to"`
	VGPUs      []KeptVGPU `json:"vgpus"`
	SRIOV      []string   `json:"sriov,omitempty"` // GPUs whose VFs the install enables
}

const (
	upgradeAPIVersion = "gpuprep/v1"
	upgradeKind       = "VGPUManagerUpgrade"
)

// managerChange is a version change being planned: rec, recorded at path (new:
// not yet); revert says it is being undone (to rec.From).
type managerChange struct {
	rec    *UpgradeRecord
	path   string
	new    bool
	revert bool
	inst   Installed
	prev   *Driver // new only: the installed version's file, kept first
	live   []Instance
}

// target is the side a change ends on.
func (c *managerChange) target() ManagerRef {
	if c.revert {
		return c.rec.From
	}
	return c.rec.To
}

// leaving is the side a change leaves.
func (c *managerChange) leaving() ManagerRef {
	if c.revert {
		return c.rec.To
	}
	return c.rec.From
}

// planChange says whether installing d changes the version of an
// installed vGPU manager, and what that needs; nil when it does not.
func planChange(ctx context.Context, e *env, opts InstallOptions, d *Driver) (*managerChange, error) {
	inst, err := ReadInstalled(ctx, e.Root, e.Runner)
	if err != nil {
		return nil, err
	}
	pfs := nvidiaPFs(e.Root)
	if c := opts.change; c != nil {
		c.inst = inst
		return c, heldVGPUs(e.Root, c.live)
	}
	if c, err := openChange(e.Root, d.Version); c != nil || err != nil {
		if c != nil {
			c.inst = inst
			c.live = existingOn(e.Root, pfs)
		}
		return c, err
	}
	if !inst.Present(e.Root) || inst.Version == "" || inst.Version == d.Version {
		return nil, nil
	}
	if inst.Format == "" {
		return nil, fmt.Errorf("the vGPU manager %s is loaded (/sys/module/nvidia/version) and %s is there, but neither nvidia-installer's record (%s) nor the package manager's says how it was installed, so gpuprep cannot remove it to install %s: uninstall it by hand first", inst.Version, vgpuMgrPath, RunRecord, d.Version)
	}
	live := existingOn(e.Root, pfs)
	if err := heldVGPUs(e.Root, live); err != nil {
		return nil, err
	}
	prev, err := previousDriver(ctx, e, opts, inst, d)
	if err != nil {
		return nil, err
	}
	c := &managerChange{new: true, inst: inst, prev: prev, live: live}
	c.rec = &UpgradeRecord{APIVersion: upgradeAPIVersion, Kind: upgradeKind,
		From: ManagerRef{Version: inst.Version, Format: inst.Format, Package: inst.Package,
			File: keptPath(prev.Version, prev.SHA256, prev.Path), SHA256: prev.SHA256},
		To: ManagerRef{Version: d.Version, Format: d.Format, Package: d.Package}}
	for _, g := range opts.GPUs {
		if UsesSRIOV(e.Root, g) {
			c.rec.SRIOV = append(c.rec.SRIOV, g.Address)
		}
	}
	sort.Strings(c.rec.SRIOV)
	for _, v := range live {
		c.rec.VGPUs = append(c.rec.VGPUs, KeptVGPU{GPU: v.GPU, Device: v.Device, Type: v.Type})
	}
	c.path = path.Join(UpgradeDir, fmt.Sprintf("upgrade-%s-to-%s-%d.json", inst.Version, d.Version, e.Now().Unix()))
	return c, nil
}

// previousDriver is the installer (or package) of the version installed:
// opts.Previous, checked to be that version in the format it was installed
// with, else the copy gpuprep kept when it installed it.
func previousDriver(ctx context.Context, e *env, opts InstallOptions, inst Installed, d *Driver) (*Driver, error) {
	if opts.Previous == "" {
		if k := findKept(ctx, e, inst.Version); k != nil && k.Format == inst.Format {
			return k, nil
		}
		return nil, fmt.Errorf("the vGPU manager %s is installed (%s); installing %s removes it, and gpuprep has no copy of it to put back on rollback: give its installer or package with --previous-driver FILE", inst.Version, inst.Record, d.Version)
	}
	r := e.Runner
	if isPackage(opts.Previous) {
		r = e.Queries()
	}
	prev, err := InspectDriver(ctx, opts.Previous, r)
	if err != nil {
		return nil, fmt.Errorf("--previous-driver: %w", err)
	}
	if prev.Version != inst.Version || prev.Format != inst.Format {
		return nil, fmt.Errorf("--previous-driver %s is the vGPU manager %s (.%s), but %s (.%s) is installed (%s)", opts.Previous, prev.Version, prev.Format, inst.Version, inst.Format, inst.Record)
	}
	return prev, nil
}

// nvidiaPFs are the NVIDIA display controllers that are not VFs.
func nvidiaPFs(root *host.Root) []string {
	var out []string
	for _, a := range root.Names("/sys/bus/pci/devices") {
		dev := "/sys/bus/pci/devices/" + a
		v, _ := root.ReadString(dev + "/vendor")
		c, _ := root.ReadString(dev + "/class")
		if v == "0x10de" && strings.HasPrefix(c, "0x03") && !root.Exists(dev+"/physfn") {
			out = append(out, a)
		}
	}
	sort.Strings(out)
	return out
}

func existingOn(root *host.Root, pfs []string) []Instance {
	var out []Instance
	for _, g := range pfs {
		out = append(out, Existing(root, g)...)
	}
	return out
}

// HeldError is a version change refused because VMs hold vGPUs.
type HeldError struct{ Held []string }

func (e *HeldError) Error() string {
	return "the vGPU manager cannot change while VMs use its vGPUs (unloading nvidia destroys them): " + strings.Join(e.Held, "; ") + "; shut those VMs down (or migrate them), then run again"
}

// heldVGPUs refuses vGPUs a process (a VM's QEMU) holds open, naming each
// with its holders.
func heldVGPUs(root *host.Root, live []Instance) error {
	var held []string
	for _, v := range live {
		if hs := Holders(root, v); len(hs) > 0 {
			var who []string
			for _, h := range hs {
				who = append(who, h.String())
			}
			held = append(held, fmt.Sprintf("vGPU %s (%s) on %s is held by %s", v.Device, v.Type, v.GPU, strings.Join(who, ", ")))
		}
	}
	if len(held) > 0 {
		return &HeldError{Held: held}
	}
	return nil
}

// openChange finds, in the journal, a version change to version that began
// (KindUpgradeIntent) and was neither done (KindUpgrade) nor undone by
// rollback (an "undone" entry naming its index), and reads its record.
func openChange(root *host.Root, version string) (*managerChange, error) {
	entries, _ := journal.Read(root)
	undone := map[int]bool{}
	done := map[string]bool{}
	for _, en := range entries {
		switch en.Kind {
		case journal.KindUndone:
			if u, ok := en.Undone(); ok {
				undone[u.Index] = true
			}
		case KindUpgrade:
			done[en.VGPUManager().Record] = true
		}
	}
	for i := len(entries) - 1; i >= 0; i-- {
		m := entries[i].VGPUManager()
		if entries[i].Kind != KindUpgradeIntent || undone[i] || done[m.Record] || m.To != version {
			continue
		}
		rec, err := ReadUpgradeRecord(root, m.Record)
		if err != nil {
			return nil, fmt.Errorf("a change of the vGPU manager to %s began (journal entry %d) and did not finish, but its record cannot be read: %w", version, i+1, err)
		}
		return &managerChange{rec: rec, path: m.Record}, nil
	}
	return nil, nil
}

// ReadUpgradeRecord reads the record at the host path p.
func ReadUpgradeRecord(root *host.Root, p string) (*UpgradeRecord, error) {
	if !strings.HasPrefix(p, UpgradeDir+"/") || path.Clean(p) != p {
		return nil, fmt.Errorf("%s: not under %s", p, UpgradeDir)
	}
	b, err := root.ReadFile(p)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	var rec UpgradeRecord
	if err := dec.Decode(&rec); err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	if rec.APIVersion != upgradeAPIVersion || rec.Kind != upgradeKind || rec.From.Version == "" || rec.To.Version == "" {
		return nil, fmt.Errorf("%s: not a gpuprep vGPU manager upgrade record", p)
	}
	if f := rec.From.File; !strings.HasPrefix(f, UpgradeDir+"/") || path.Clean(f) != f {
		return nil, fmt.Errorf("%s: from.file %q is not a file gpuprep kept (under %s)", p, clip(f), UpgradeDir)
	}
	return &rec, nil
}

// notes say what the change is.
func (c *managerChange) notes() []string {
	from, to := c.leaving(), c.target()
	verb := "upgrade"
	switch {
	case c.revert:
		verb = "roll back"
	case !c.new:
		verb = "resume the change"
	}
	n := fmt.Sprintf("%s: the vGPU manager %s (.%s) → %s (.%s); record %s", verb, from.Version, from.Format, to.Version, to.Format, c.path)
	if k := len(c.rec.VGPUs); k > 0 {
		are := " are"
		if k == 1 {
			are = " is"
		}
		n += fmt.Sprintf("; %s%s removed and made again: %s", plural.N(k, "vGPU"), are, keptList(c.rec.VGPUs))
	}
	return []string{n}
}

func keptList(vs []KeptVGPU) string {
	var s []string
	for _, v := range vs {
		s = append(s, v.Device+" ("+v.Type+" on "+v.GPU+")")
	}
	return strings.Join(s, ", ")
}

// before are the steps ahead of stopping the daemons: keep and record (a
// new change), remove the vGPUs there are.
func (c *managerChange) before(e *env) []Step {
	var steps []Step
	if c.new {
		rec, prev := c.rec, c.prev
		data, _ := json.MarshalIndent(rec, "", "  ")
		data = append(data, '\n')
		// the record is not a Step.File: rollback must not restore it
		// (remove it) apart from the change it records
		steps = append(steps, Step{Title: fmt.Sprintf("keep the vGPU manager %s for rollback (%s) and record the change to %s in %s", rec.From.Version, rec.From.File, rec.To.Version, c.path),
			Remedy: "check that " + UpgradeDir + " is writable and has room for a copy of " + prev.Path,
			run: func(_ context.Context, e *env) error {
				if err := privateDir(e.Root, UpgradeDir); err != nil {
					return err
				}
				if err := keepFile(e.Root, prev.Path, prev.SHA256, rec.From.File); err != nil {
					return err
				}
				if _, err := e.Root.WriteFileAtomic(c.path, data, 0o600, e.Now()); err != nil {
					return err
				}
				return journal.Append(e.Root, journal.VGPUManagerRecord{From: rec.From.Version, To: rec.To.Version, Record: c.path}.Intent("vgpu install", e.Now()))
			}})
	}
	if len(c.live) > 0 {
		var what []string
		for _, v := range c.live {
			what = append(what, v.Device)
		}
		steps = append(steps, Step{Title: "remove the vGPUs (made again after the change): " + strings.Join(what, ", "),
			Remedy: "a VM may have started on one since: shut it down and run again",
			run:    func(_ context.Context, e *env) error { return removeLive(e, nvidiaPFs(e.Root)) }})
	}
	return steps
}

// removeLive removes every vGPU on pfs, refusing one a VM holds now.
func removeLive(e *env, pfs []string) error {
	live := existingOn(e.Root, pfs)
	if err := heldVGPUs(e.Root, live); err != nil {
		return err
	}
	for _, v := range live {
		a := removal(v)
		if err := e.Attrs().WriteAttr(a.Path, a.Value); err != nil {
			return fmt.Errorf("%s: %s: %w", v.GPU, a.About, err)
		}
	}
	return nil
}

// uninstall is the step that removes the version the change leaves, the
// way it was installed, while it is still the one installed.
func (c *managerChange) uninstall(ctx context.Context, e *env) []Step {
	old := c.leaving()
	if c.inst.Version != old.Version || c.inst.Format != old.Format {
		return nil // gone already (a resumed change)
	}
	var argv []string
	switch old.Format {
	case FormatRun:
		argv = []string{RunUninstaller, "--uninstall", "--silent"}
	case FormatDeb:
		argv = []string{"dpkg", "-r", old.Package}
		if e.Root.FindProgram("apt-get") != "" {
			argv = []string{"env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "remove", "-y", old.Package}
		}
	case FormatRPM:
		argv = []string{"rpm", "-e", old.Package}
		if e.Root.FindProgram("dnf") != "" {
			argv = []string{"dnf", "remove", "-y", old.Package}
		}
	default:
		return nil
	}
	how := map[string]string{FormatRun: "its installer's --uninstall", FormatDeb: "the package manager", FormatRPM: "the package manager"}[old.Format]
	return []Step{{Title: fmt.Sprintf("uninstall the vGPU manager %s (%s)", old.Version, how), Commands: [][]string{argv},
		Remedy: "read " + InstallerLog + " or the package manager's output; the kept " + c.rec.From.File + " is what rollback installs again",
		run: func(ctx context.Context, e *env) error {
			if err := runCmd(argv)(ctx, e); err != nil {
				return err
			}
			if now, _ := ReadInstalled(ctx, e.Root, e.Runner); now.Version == old.Version && now.Format == old.Format {
				return fmt.Errorf("the vGPU manager %s is still installed (%s)", old.Version, now.Record)
			}
			return nil
		}}}
}

// after are the steps once the new version runs: the vGPUs made again,
// then the check that the change is complete.
func (c *managerChange) after() []Step {
	var steps []Step
	if len(c.rec.VGPUs) > 0 {
		steps = append(steps, Step{Title: "recreate the vGPUs that existed: " + keptList(c.rec.VGPUs),
			Remedy: "the new version may not offer a type the old one did: see gpuprep vgpu types; rollback puts the previous version and its vGPUs back",
			run:    func(_ context.Context, e *env) error { return recreate(e, c.rec.VGPUs) }})
	}
	want := c.target()
	steps = append(steps, Step{Title: fmt.Sprintf("verify: the vGPU manager %s is loaded, nvidia-vgpu-mgr runs, the vGPUs are back", want.Version),
		Remedy: "read `journalctl -u nvidia-vgpu-mgr` and `dmesg | grep -i nvidia`",
		run: func(ctx context.Context, e *env) error {
			if err := verifyChange(ctx, e, want.Version, c.rec.VGPUs); err != nil {
				return err
			}
			if c.revert {
				return nil // rollback records the entries undone
			}
			return journal.Append(e.Root, journal.VGPUManagerRecord{From: c.rec.From.Version, To: c.rec.To.Version, Record: c.path}.Done("vgpu install", e.Now()))
		}})
	return steps
}

// recreate makes the vGPUs of vs that are missing again, through
// MakePlan/Apply: an mdev with its UUID, a vGPU of a VF on that VF (when
// free), each of its type.
func recreate(e *env, vs []KeptVGPU) error {
	wants, missing := keptWants(e.Root, vs)
	p, err := MakePlan(e.Root, wants)
	if err != nil {
		return err
	}
	for i, a := range p.Actions {
		k := [2]string{a.GPU, a.Type}
		if len(missing[k]) == 0 {
			continue
		}
		reuse(e.Root, p, i, missing[k][0])
		missing[k] = missing[k][1:]
	}
	// the names of the VF types, as vgpu apply journals them (a new
	// version may number a type anew); rollback's own run does not journal
	if data, changed := TypeNamesFile(e.Root, p); changed && !e.undoing {
		if _, err := journal.WriteFile(e.Root, TypeNames, data, 0o644, "vgpu install", e.Now()); err != nil {
			return err
		}
	}
	_, err = ApplyAt(e.Root, e.Attrs(), p, e.Now())
	return err
}

// keptWants are the wants that make the kept vGPUs vs again, one per GPU
// and type, and the devices (mdev UUIDs, VFs) of each that are gone.
func keptWants(root *host.Root, vs []KeptVGPU) ([]Want, map[[2]string][]string) {
	var wants []Want
	idx := map[[2]string]int{}
	missing := map[[2]string][]string{}
	for _, v := range vs {
		k := [2]string{v.GPU, v.Type}
		if _, ok := idx[k]; !ok {
			idx[k] = len(wants)
			wants = append(wants, Want{GPU: v.GPU, Type: v.Type})
		}
		wants[idx[k]].Count++
		if !vgpuExists(root, v) {
			missing[k] = append(missing[k], v.Device)
		}
	}
	return wants, missing
}

// reuse makes action i of p create the vGPU dev had: an mdev with its
// UUID, or its VF (when free, and not planned already).
func reuse(root *host.Root, p *Plan, i int, dev string) {
	a := p.Actions[i]
	switch {
	case a.Value == "<uuid>" && !strings.Contains(dev, ":"):
		p.Actions[i].Value = dev
	case strings.Contains(dev, ":") && strings.HasSuffix(a.Path, "/nvidia/current_vgpu_type") && vfFree(root, dev) && !planned(p.Actions, dev):
		p.Actions[i].Path = "/sys/bus/pci/devices/" + dev + "/nvidia/current_vgpu_type"
		p.Actions[i].About = "make VF " + dev + " a " + a.Type
	}
}

func vfFree(root *host.Root, vf string) bool {
	cur, err := root.ReadString("/sys/bus/pci/devices/" + vf + "/nvidia/current_vgpu_type")
	return err == nil && (cur == "" || cur == "0")
}

func planned(as []Action, vf string) bool {
	for _, a := range as {
		if a.Path == "/sys/bus/pci/devices/"+vf+"/nvidia/current_vgpu_type" {
			return true
		}
	}
	return false
}

// vgpuExists says v is there: the mdev with its UUID, or a vGPU of its type
// on the VF.
func vgpuExists(root *host.Root, v KeptVGPU) bool {
	for _, x := range Existing(root, v.GPU) {
		if x.Device == v.Device && x.Type == v.Type {
			return true
		}
	}
	return false
}

// verifyChange checks that version is the loaded nvidia module, that
// nvidia-vgpu-mgr runs (its process, else systemd's answer) and that each
// GPU has its vGPUs of vs back, by type (an mdev by its UUID).
func verifyChange(ctx context.Context, e *env, version string, vs []KeptVGPU) error {
	var bad []string
	if v := InstalledVersion(e.Root); v != version {
		bad = append(bad, fmt.Sprintf("the loaded nvidia module is %q, not %s", v, version))
	}
	running, known := RunningDaemons(e.Root)
	if !running["nvidia-vgpu-mgr"] {
		if _, active := unitState(ctx, e.Runner, "nvidia-vgpu-mgr.service"); known || !active {
			bad = append(bad, "nvidia-vgpu-mgr is not running")
		}
	}
	want := map[[2]string]int{}
	for _, v := range vs {
		want[[2]string{v.GPU, v.Type}]++
		if !strings.Contains(v.Device, ":") && !e.Root.Exists("/sys/bus/mdev/devices/"+v.Device) {
			bad = append(bad, "mdev "+v.Device+" ("+v.Type+") is missing")
		}
	}
	have := map[[2]string]int{}
	for k := range want {
		for _, x := range Existing(e.Root, k[0]) {
			if x.Type == k[1] {
				have[k]++
			}
		}
	}
	for k, n := range want {
		if have[k] < n {
			bad = append(bad, fmt.Sprintf("%s has %d of its %d %s", k[0], have[k], n, k[1]))
		}
	}
	if len(bad) > 0 {
		return errors.New(strings.Join(bad, "; "))
	}
	return nil
}
