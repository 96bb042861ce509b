package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fleet"
	"github.com/gpuprep/gpuprep/preflight"
	"github.com/gpuprep/gpuprep/provision"
	"github.com/gpuprep/gpuprep/report"
	"github.com/gpuprep/gpuprep/vfio"
)

// schemaDir holds a JSON Schema (draft 2020-12) per document kind gpuprep
// prints: docs/schema/<kind>.json, made from the Go types the documents
// are encoded from (go test ./cmd/gpuprep -run TestSchemaFiles -update
// rewrites them; review the diff: a renamed or removed field breaks the
// scripts that read it).
var schemaDir = filepath.Join("..", "..", "docs", "schema")

// fleetPlanDoc mirrors what fleet check/run --dry-run -o json (fleet.go
// printDryRun) and fleet apply --dry-run -o json (fleet_apply.go, with
// each host's phase and the rollout) print.
type fleetPlanDoc struct {
	APIVersion string          `json:"apiVersion"`
	Kind       string          `json:"kind"`
	Hosts      []fleetPlanHost `json:"hosts"`
	Rollout    *report.Rollout `json:"rollout,omitempty"`
}

type fleetPlanHost struct {
	*fleet.Host
	Phase  string   `json:"phase,omitempty"`
	Target string   `json:"target"`
	Args   []string `json:"gpuprepArgs"`
}

type schemaKind struct {
	kind, about string
	typ         reflect.Type
}

// schemaKinds are the documents: every JSON document gpuprep prints is one
// of them (kubevirt config and operator values print a KubeVirt CR patch
// and GPU Operator Helm values, whose shapes are KubeVirt's and the
// chart's; the Ansible module's results are Ansible's).
func schemaKinds() []schemaKind {
	return []schemaKind{
		{"ReadinessReport", "gpuprep check -o json (and report render -o json of a host's report): the node's readiness per mode, its GPUs, every finding", reflect.TypeFor[report.Report]()},
		{"FleetReport", "gpuprep fleet check|run|apply -o json (and report render -o json of a fleet report): one entry per host, and the fleet's summary", reflect.TypeFor[report.FleetReport]()},
		{"FleetPlan", "gpuprep fleet check|run|apply --dry-run -o json: per host, how it is reached and the gpuprep command it would run", reflect.TypeFor[fleetPlanDoc]()},
		{"Plan", "gpuprep plan -o json: the steps apply would take for a mode, in order", reflect.TypeFor[provision.Plan]()},
		{"ApplyResult", "gpuprep apply -o json: the plan, what apply did, and the check report after it", reflect.TypeFor[applyResult]()},
		{"RollbackResult", "gpuprep rollback -o json: what rollback undid, and what it left", reflect.TypeFor[rollbackDoc]()},
		{"VGPUTypes", "gpuprep vgpu types -o json: per GPU, the vGPU types it can create and their free instances", reflect.TypeFor[report.VGPUTypes]()},
		{"VFIOStatus", "gpuprep vfio status -o json: per GPU, its IOMMU group's devices and drivers, and the persistent VFIO configuration", reflect.TypeFor[vfio.Status]()},
		{"KernelArgs", "gpuprep grub show -o json: the kernel arguments a mode wants, configured in the bootloader and running", reflect.TypeFor[showReport]()},
		{"CheckList", "gpuprep checks -o json: every check, its stable ID, the modes it applies to", reflect.TypeFor[checkList[checkRow]]()},
		{"Version", "gpuprep version -o json: the version, the commit it was built from, the Go release and the platform", reflect.TypeFor[versionDoc]()},
	}
}

// schemaDocs are the keywords the types cannot say.
var schemaDocs = map[string]map[string]any{
	"report.VGPUType.Available": {"description": "the GPU's free instances of the type; null: not known (a parent's count could not be read)"},
	"report.VGPUFree.Available": {"description": "the parent's free instances of the type; null: not known (unreadable)"},
	"main.versionDoc.Commit":    {"description": "the commit gpuprep was built from; absent where the build does not say"},
	"report.Report.Mode":        modeOrNone("the mode judged (--mode); \"\": every mode, see modes"),
	"report.FleetReport.Mode":   modeOrNone("the --mode given; \"\": each host's own (inventory) mode, else every mode"),
	"report.FleetHost.Mode":     modeOrNone("the mode the host was judged or prepared for"),
	"fleet.Host.Mode":           modeOrNone("the host's mode in the inventory"),
	"provision.Plan.Mode":       modeOrNone("the mode planned for"),
	"main.applyResult.Mode":     modeOrNone("the mode applied"),
	"main.showReport.Mode":      {"enum": []string{string(preflight.VMPassthrough), string(preflight.VMVGPU)}, "description": "the mode whose kernel arguments are wanted"},
}

// modeOrNone: a mode, or "" (none named).
func modeOrNone(about string) map[string]any {
	vs := []string{""}
	for _, m := range preflight.Modes {
		vs = append(vs, string(m))
	}
	return map[string]any{"enum": vs, "description": about}
}

func schemaEnums() map[reflect.Type][]string {
	modes := make([]string, len(preflight.Modes))
	for i, m := range preflight.Modes {
		modes[i] = string(m)
	}
	return map[reflect.Type][]string{
		reflect.TypeFor[preflight.Mode]():   modes,
		reflect.TypeFor[preflight.Status](): {string(preflight.Pass), string(preflight.Warn), string(preflight.Fail), string(preflight.Skip), string(preflight.Error)},
	}
}

func generateSchema(k schemaKind) []byte {
	kinds := map[reflect.Type]string{}
	for _, x := range schemaKinds() {
		kinds[x.typ] = x.kind
	}
	s := newSchemaGen(schemaDocs, kinds, schemaEnums()).document(k.kind, k.about, k.typ)
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		panic(err)
	}
	return append(b, '\n')
}

// The schemas in docs/schema are those of the types the documents are
// encoded from; -update rewrites them.
func TestSchemaFilesMatchTheCode(t *testing.T) {
	var names []string
	for _, k := range schemaKinds() {
		p := filepath.Join(schemaDir, k.kind+".json")
		got := generateSchema(k)
		if *update {
			require.NoError(t, os.MkdirAll(schemaDir, 0o755))
			require.NoError(t, os.WriteFile(p, got, 0o644))
		}
		want, err := os.ReadFile(p)
		require.NoError(t, err, "run go test ./cmd/gpuprep -run TestSchemaFiles -update")
		require.Equal(t, string(want), string(got), "%s: run go test ./cmd/gpuprep -run TestSchemaFiles -update and review the diff", p)
		names = append(names, k.kind+".json")
	}
	files, err := filepath.Glob(filepath.Join(schemaDir, "*.json"))
	require.NoError(t, err)
	for _, f := range files {
		require.Contains(t, names, filepath.Base(f), "a schema of no document kind")
	}
	readme, err := os.ReadFile(filepath.Join(schemaDir, "README.md"))
	require.NoError(t, err)
	for _, n := range names {
		require.Contains(t, string(readme), "("+n+")", "docs/schema/README.md lists every kind")
	}
}

// schemas compiles docs/schema/*.json (formats asserted: date-time).
func schemas(t *testing.T) map[string]*jsonschema.Schema {
	t.Helper()
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	out := map[string]*jsonschema.Schema{}
	for _, k := range schemaKinds() {
		abs, err := filepath.Abs(filepath.Join(schemaDir, k.kind+".json"))
		require.NoError(t, err)
		s, err := c.Compile(abs)
		require.NoError(t, err, k.kind)
		out[k.kind] = s
	}
	return out
}

// validate checks doc (one JSON document, as a command printed it) against
// the schema of its kind, and returns the kind.
func validate(schemas map[string]*jsonschema.Schema, doc string) (string, error) {
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(doc))
	if err != nil {
		return "", fmt.Errorf("not JSON: %w", err)
	}
	obj, ok := inst.(map[string]any)
	if !ok {
		return "", fmt.Errorf("not one object, with apiVersion and kind: %.40s", doc)
	}
	kind, _ := obj["kind"].(string)
	s := schemas[kind]
	if s == nil {
		return kind, fmt.Errorf("kind %q: no schema in docs/schema", kind)
	}
	return kind, s.Validate(inst)
}

// emitted is a document a command printed, and the command.
type emitted struct {
	args []string
	doc  string
}

// emitDoc runs gpuprep with args (its exit code is the verdict, not
// checked here) and keeps its stdout, which must be a document; a plan
// refused (exit 1: an IOMMU group shared, VFs that unbinding would
// disable) prints none.
func emitDoc(t *testing.T, docs *[]emitted, args ...string) string {
	t.Helper()
	return emitDocWith(t, nil, docs, args...)
}

// emitDocWith is emitDoc through the deps d (nil: the real ones).
func emitDocWith(t *testing.T, d *deps, docs *[]emitted, args ...string) string {
	t.Helper()
	out, errs, code := gpuprepWith(t, d, args...)
	if out == "" && code == exitNotReady && args[0] == "plan" {
		return ""
	}
	require.NotEmpty(t, out, "%v printed nothing: %s", args, errs)
	*docs = append(*docs, emitted{args, out})
	return out
}

// unknownFree is the sriov-vgpu node where one VF's current_vgpu_type
// cannot be read: its free instances are unknown (null).
func unknownFree(t *testing.T) string {
	root := fixtureRoot(t, "sriov-vgpu")
	require.NoError(t, os.Remove(filepath.Join(root, "sys/bus/pci/devices/0000:41:00.6/nvidia/current_vgpu_type")))
	return root
}

// fleetInventory is an inventory of two hosts nothing listens for, and the
// flags that reach them (a key of no use: no connection gets that far).
func fleetInventory(t *testing.T) []string {
	dir := t.TempDir()
	inv := filepath.Join(dir, "fleet.yaml")
	require.NoError(t, os.WriteFile(inv, []byte(`apiVersion: gpuprep/v1
kind: Inventory
defaults: {user: nobody, mode: container}
hosts:
  - {name: gone-1, address: 127.0.0.1, port: 1}
  - {name: gone-2, address: 127.0.0.1, port: 1, mode: vm-passthrough, groups: [gpu]}
`), 0o644))
	key := filepath.Join(dir, "id")
	require.NoError(t, os.WriteFile(key, []byte("not a key\n"), 0o600))
	return []string{"-i", inv, "--ssh-config", "none", "--identity", key, "--known-hosts", filepath.Join(dir, "known_hosts"), "--timeout", "2s", "--retries", "0"}
}

// documents runs the commands that print JSON on fixture nodes, the way a
// user would, and returns what they printed.
func documents(t *testing.T) []emitted {
	var docs []emitted
	for _, sc := range []string{"hgx-h200", "sriov-vgpu", "mdev-vgpu", "vfio-bound", "consumer-shared-group", "reboot-pending", "no-gpu", "gh200", "boot-grub-rhel-bls"} {
		root := fixtureRoot(t, sc)
		emitDoc(t, &docs, "check", "--root", root, "-o", "json")
		emitDoc(t, &docs, "check", "--root", root, "-o", "json", "--compact") // what fleet reads
		for _, m := range preflight.Modes {
			emitDoc(t, &docs, "check", "--root", root, "-o", "json", "--mode", string(m))
			if m != preflight.VMVGPU {
				emitDoc(t, &docs, "plan", "--root", root, "-o", "json", "--mode", string(m))
			}
		}
		if sc == "sriov-vgpu" {
			emitDoc(t, &docs, "plan", "--root", root, "-o", "json", "--mode", "vm-vgpu", "--vgpu-config-file", h200ConfigFile(t), "--vgpu-config", "h200-141c")
		}
		emitDoc(t, &docs, "vgpu", "types", "--root", root, "-o", "json")
		emitDoc(t, &docs, "grub", "show", "--root", root, "-o", "json")
		emitDoc(t, &docs, "grub", "show", "--root", root, "-o", "json", "--mode", "vm-vgpu")
		if sc != "no-gpu" {
			emitDoc(t, &docs, "vfio", "status", "--root", root, "-o", "json")
		}
	}
	root := unknownFree(t)
	emitDoc(t, &docs, "vgpu", "types", "--root", root, "-o", "json")
	saved := filepath.Join(t.TempDir(), "node.json")
	hostDoc := emitDoc(t, &docs, "check", "--root", root, "-o", "json", "--mode", "vm-vgpu", "--skip", "node.label", "--ignore", "vgpu.types")
	require.NoError(t, os.WriteFile(saved, []byte(hostDoc), 0o644))
	emitDoc(t, &docs, "report", "render", saved, "-o", "json")

	// a host's report as a fleet of one, as report render shows it in the
	// fleet formats
	var r report.Report
	require.NoError(t, json.Unmarshal([]byte(hostDoc), &r))
	var fb bytes.Buffer
	require.NoError(t, report.FleetJSON(&fb, report.AsFleet(&r)))
	docs = append(docs, emitted{[]string{"(report.FleetJSON of a host's report)"}, fb.String()})

	fl := fleetInventory(t)
	fleetDoc := emitDoc(t, &docs, append([]string{"fleet", "check", "-o", "json"}, fl...)...)
	emitDoc(t, &docs, append([]string{"fleet", "check", "-o", "json", "--dry-run"}, fl...)...)
	emitDoc(t, &docs, append(append([]string{"fleet", "run", "-o", "json"}, fl...), "--", "checks", "-o", "json")...)
	emitDoc(t, &docs, append(append([]string{"fleet", "run", "-o", "json", "--dry-run"}, fl...), "--", "vfio", "status")...)
	emitDoc(t, &docs, append([]string{"fleet", "apply", "-o", "json", "--dry-run", "--canary", "1"}, fl...)...)
	emitDoc(t, &docs, append([]string{"fleet", "apply", "-o", "json", "--yes", "--canary", "1"}, fl...)...)
	saved = filepath.Join(t.TempDir(), "fleet.json")
	require.NoError(t, os.WriteFile(saved, []byte(fleetDoc), 0o644))
	emitDoc(t, &docs, "report", "render", saved, "-o", "json")

	// apply and rollback, on the simulated kernel
	d := realDeps()
	simulatedKernel(t, d)
	root = fixtureRoot(t, "vfio-bound")
	emitDocWith(t, d, &docs, "apply", "--root", root, "--mode", "container", "--yes", "-o", "json")
	emitDocWith(t, d, &docs, "apply", "--root", root, "--mode", "container", "--yes", "-o", "json")
	emitDocWith(t, d, &docs, "rollback", "--root", root, "-o", "json")
	emitDocWith(t, d, &docs, "rollback", "--root", root, "-o", "json")

	emitDocWith(t, d, &docs, "checks", "-o", "json")
	emitDocWith(t, d, &docs, "version", "-o", "json")
	return docs
}

// Every document the commands print validates against the schema of its
// kind, and every kind is printed by one.
func TestSchemaEveryDocument(t *testing.T) {
	s := schemas(t)
	seen := map[string]bool{}
	n := 0
	for _, d := range documents(t) {
		n++
		kind, err := validate(s, d.doc)
		require.NoError(t, err, "gpuprep %s:\n%.2000s", strings.Join(d.args, " "), d.doc)
		seen[kind] = true
	}
	for _, k := range schemaKinds() {
		require.True(t, seen[k.kind], "no test prints a %s", k.kind)
	}
	t.Logf("%d documents of %d kinds valid", n, len(seen))
}

// The schemas are strict: a renamed field, a field too many, a count that
// is no count, a value no mode, and a bare array each fail.
func TestSchemaRejectsChangedDocuments(t *testing.T) {
	s := schemas(t)
	root := fixtureRoot(t, "sriov-vgpu")
	check, _, _ := gpuprep(t, "check", "--root", root, "-o", "json", "--mode", "vm-vgpu")
	types, _, _ := gpuprep(t, "vgpu", "types", "--root", root, "-o", "json")
	checks, _, _ := gpuprep(t, "checks", "-o", "json")
	for _, doc := range []string{check, types, checks} {
		_, err := validate(s, doc)
		require.NoError(t, err)
	}
	for _, tc := range []struct {
		name, doc, old, new, want string
	}{
		{"a GPU's field renamed", check, `"resourceName":`, `"resource_name":`, "resource_name"},
		{"a top-level field renamed", check, `"ready":`, `"isReady":`, "isReady"},
		{"a finding's field renamed", check, `"remedy":`, `"fix":`, "fix"},
		{"kind", check, `"kind": "ReadinessReport"`, `"kind": "FleetReport"`, "missing properties"},
		{"a mode that is none", check, `"mode": "vm-vgpu"`, `"mode": "vm-gpu"`, "/mode"},
		{"a status that is none", check, `"status": "pass"`, `"status": "ok"`, "/findings/0/status"},
		{"a vGPU type's field renamed", types, `"available":`, `"Available":`, "Available"},
		{"an unknown count as -1", types, `"available": 4`, `"available": -1`, "minimum"},
		{"a check's field renamed", checks, `"title":`, `"name":`, "name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Contains(t, tc.doc, tc.old)
			_, err := validate(s, strings.Replace(tc.doc, tc.old, tc.new, 1))
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
		})
	}
	// checks -o json as it was: a bare array
	var doc struct{ Checks json.RawMessage }
	require.NoError(t, json.Unmarshal([]byte(checks), &doc))
	_, err := validate(s, string(doc.Checks))
	require.ErrorContains(t, err, "not one object")
	// a document that adds a field the schema does not know
	_, err = validate(s, strings.Replace(checks, `"kind": "CheckList",`, `"kind": "CheckList", "extra": 1,`, 1))
	require.ErrorContains(t, err, "extra")
}

// A free count that cannot be read is null (the schema's "not known"), in
// vgpu types and check alike, never -1; the table says "?".
func TestSchemaUnknownFreeIsNull(t *testing.T) {
	root := unknownFree(t)
	out, errs, code := gpuprep(t, "vgpu", "types", "--root", root, "-o", "json")
	require.Equal(t, 0, code, errs)
	require.NotContains(t, out, `": -1`)
	var doc report.VGPUTypes
	decodeStrict(t, out, &doc)
	v := doc.GPUs[0].VGPU
	require.Equal(t, "0000:41:00.6", v.Parents[2].Address)
	for _, ty := range v.Parents[2].Types {
		require.Nil(t, ty.Available, "the VF's type is unreadable")
	}
	for _, ty := range v.Types {
		require.Nil(t, ty.Available, "the GPU's count needs every VF's")
	}
	require.Equal(t, report.FreeCount(1), v.Parents[3].Types[0].Available)
	require.Contains(t, out, `"available": null`)

	check, _, _ := gpuprep(t, "check", "--root", root, "-o", "json", "--mode", "vm-vgpu")
	require.Contains(t, check, `"available": null`)
	require.NotContains(t, check, `"available": -1`)

	text, _, _ := gpuprep(t, "vgpu", "types", "--root", root)
	require.Regexp(t, `0000:41:00.0\s+sriov\s+1428\s+NVIDIA H200X-141C\s+\?\s`, text)
}
