package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/journal"
	"github.com/gpuprep/gpuprep/vfio"
)

// bootTools is the runner apply and rollback get in these tests: the
// bootloaders' own tools (grubby, kernelstub, rpm-ostree, kernel-install)
// are recorded by a host.FakeRunner and then do to the fixture's
// configuration what the real tool does to the node's (so that the next
// plan and rollback read what a node would have); modprobe goes to the
// kernel simulator; anything else is only recorded. For each bootloader
// command it also keeps the bootargs-intent entries the journal held when
// the command ran.
type bootTools struct {
	t       *testing.T
	fake    *host.FakeRunner
	kernel  *fixture.Kernel
	intents [][]string // per bootloader call: "+ARG"/"-ARG" intents journalled before it ran
}

var bootTool = map[string]bool{"grubby": true, "kernelstub": true, "rpm-ostree": true, "kernel-install": true}

func withBootTools(t *testing.T, d *deps) *bootTools {
	t.Helper()
	bt := &bootTools{t: t, fake: &host.FakeRunner{}}
	d.provisionKernel = func(root *host.Root) (vfio.Sysfs, host.Runner, error) {
		k, err := fixture.NewKernel(root.Dir())
		bt.kernel = k
		return k, bt, err
	}
	return bt
}

// calls are the bootloader commands run so far.
func (bt *bootTools) calls() [][]string {
	var out [][]string
	for _, c := range bt.fake.Calls {
		if bootTool[c[0]] {
			out = append(out, c)
		}
	}
	return out
}

func (bt *bootTools) Run(ctx context.Context, argv ...string) ([]byte, error) {
	if len(argv) > 0 && argv[0] == "modprobe" {
		return bt.kernel.Run(ctx, argv...)
	}
	out, err := bt.fake.Run(ctx, argv...)
	if err != nil || len(argv) == 0 || !bootTool[argv[0]] {
		return out, err
	}
	dir := bt.kernel.Root.Dir()
	var seen []string
	for _, e := range journalEntries(bt.t, dir) {
		if e.Kind == "bootargs-intent" {
			if e.After != "" {
				seen = append(seen, "+"+e.After)
			} else {
				seen = append(seen, "-"+e.Before)
			}
		}
	}
	bt.intents = append(bt.intents, seen)
	return out, simulateTool(dir, argv)
}

// simulateTool changes the fixture's boot configuration as the tool would:
// grubby --update-kernel=ALL edits every BLS entry's options (--args
// replaces an argument with the same key or appends it; --remove-args
// drops it), kernelstub edits the user kernel_options of its
// configuration, rpm-ostree kargs edits the deployment's BLS entry;
// kernel-install makes the entry from /etc/kernel/cmdline, which gpuprep
// reads directly, so there is nothing to mirror.
func simulateTool(dir string, argv []string) error {
	key := func(w string) string { k, _, _ := strings.Cut(w, "="); return k }
	editEntries := func(edit func([]string) []string) error {
		entries, _ := filepath.Glob(filepath.Join(dir, "boot/loader/entries/*.conf"))
		for _, p := range entries {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			lines := strings.Split(string(b), "\n")
			for i, l := range lines {
				if f := strings.Fields(l); len(f) > 0 && f[0] == "options" {
					lines[i] = "options " + strings.Join(edit(f[1:]), " ")
				}
			}
			if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
				return err
			}
		}
		return nil
	}
	remove := func(ws, drop []string) []string {
		var out []string
		for _, w := range ws {
			keep := true
			for _, d := range drop {
				keep = keep && w != d
			}
			if keep {
				out = append(out, w)
			}
		}
		return out
	}
	switch argv[0] {
	case "grubby":
		for _, a := range argv[1:] {
			if v, ok := strings.CutPrefix(a, "--remove-args="); ok {
				if err := editEntries(func(ws []string) []string { return remove(ws, strings.Fields(v)) }); err != nil {
					return err
				}
			}
			if v, ok := strings.CutPrefix(a, "--args="); ok {
				err := editEntries(func(ws []string) []string {
					for _, n := range strings.Fields(v) {
						replaced := false
						for i, w := range ws {
							if key(w) == key(n) {
								ws[i], replaced = n, true
							}
						}
						if !replaced {
							ws = append(ws, n)
						}
					}
					return ws
				})
				if err != nil {
					return err
				}
			}
		}
	case "kernelstub":
		p := filepath.Join(dir, "etc/kernelstub/configuration")
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		var cfg map[string]map[string][]string
		if err := json.Unmarshal(b, &cfg); err != nil {
			return err
		}
		opts := cfg["user"]["kernel_options"]
		for i := 1; i+1 < len(argv); i++ {
			switch argv[i] {
			case "--add-options":
				for _, o := range strings.Split(argv[i+1], " ") {
					if !contains(opts, o) {
						opts = append(opts, o)
					}
				}
			case "--delete-options":
				opts = remove(opts, strings.Split(argv[i+1], " "))
			}
		}
		cfg["user"]["kernel_options"] = opts
		b, err = json.Marshal(cfg)
		if err != nil {
			return err
		}
		return os.WriteFile(p, b, 0o644)
	case "rpm-ostree":
		return editEntries(func(ws []string) []string {
			for _, a := range argv[2:] {
				if v, ok := strings.CutPrefix(a, "--delete-if-present="); ok {
					ws = remove(ws, []string{v})
				}
				if v, ok := strings.CutPrefix(a, "--append-if-missing="); ok {
					has := false
					for _, w := range ws {
						has = has || key(w) == key(v)
					}
					if !has {
						ws = append(ws, v)
					}
				}
			}
			return ws
		})
	}
	return nil
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func journalEntries(t *testing.T, dir string) []journal.Entry {
	t.Helper()
	r, err := host.NewRoot(dir)
	require.NoError(t, err)
	es, err := journal.Read(r)
	require.NoError(t, err)
	return es
}

// journalAllUndone checks that every entry before the rollback's is undone
// exactly once and that rollback recorded nothing else.
func journalAllUndone(t *testing.T, dir string) {
	t.Helper()
	es := journalEntries(t, dir)
	undone := map[int]int{}
	n := 0
	for _, e := range es {
		if e.Kind == "undone" {
			i, err := strconv.Atoi(e.Before)
			require.NoError(t, err)
			undone[i]++
			continue
		}
		n++
	}
	for i := 0; i < n; i++ {
		require.Equal(t, "undone", es[n+i].Kind, "rollback's entries come after apply's")
		require.Equal(t, 1, undone[i], "entry %d (%+v) undone once", i, es[i])
	}
	require.Len(t, es, 2*n)
}

type intent struct{ Device, Before, After, Path string }

func bootIntents(t *testing.T, dir string) []intent {
	var out []intent
	for _, e := range journalEntries(t, dir) {
		if e.Kind == "bootargs-intent" {
			require.Equal(t, "apply", e.Command)
			out = append(out, intent{e.Device, e.Before, e.After, e.Path})
		}
	}
	return out
}

const (
	kver       = "5.15.0-91-generic"
	removeFile = "\x00remove"
)

// bootRoot is iommu-off-kernel booted through another bootloader: files
// replace its /etc/default/grub (removeFile removes one).
func bootRoot(t *testing.T, files map[string]string) string {
	t.Helper()
	root := fixtureRoot(t, "iommu-off-kernel")
	withTools(t, root)
	b := fixture.New(root)
	for p, c := range files {
		if c == removeFile {
			b.Remove(p)
		} else {
			b.File(p, c)
		}
	}
	require.NoError(t, b.Err())
	return root
}

// For each bootloader whose own tool applies the kernel arguments: apply
// journals what each command adds or removes before running it; after the
// reboot apply goes on; rollback runs the exact inverse through the same
// tool, leaves every file byte-identical, says a reboot is needed, undoes
// every journal entry once; a second rollback does nothing.
func TestRollbackUndoesBootloaderCommands(t *testing.T) {
	for _, tc := range []struct {
		name     string
		files    map[string]string
		apply    [][]string
		intents  []intent
		rollback [][]string
	}{{
		name: "grub-bls (grubby)",
		files: map[string]string{
			"/etc/default/grub":                          "GRUB_TIMEOUT=5\nGRUB_CMDLINE_LINUX=\"root=UUID=2f1c ro quiet splash\"\nGRUB_ENABLE_BLSCFG=true\n",
			"/etc/kernel/cmdline":                        "root=UUID=2f1c ro quiet splash\n",
			"/boot/loader/entries/abc-" + kver + ".conf": "title Ubuntu (" + kver + ")\nversion " + kver + "\nlinux /vmlinuz-" + kver + "\noptions root=UUID=2f1c ro quiet splash intel_iommu=off\n",
		},
		apply: [][]string{
			{"grubby", "--update-kernel=ALL", "--remove-args=intel_iommu=off"},
			{"grubby", "--update-kernel=ALL", "--args=intel_iommu=on iommu=pt"},
		},
		intents: []intent{{"grub-bls", "intel_iommu=off", "", ""}, {"grub-bls", "", "intel_iommu=on", ""}, {"grub-bls", "", "iommu=pt", ""}},
		rollback: [][]string{
			{"grubby", "--update-kernel=ALL", "--remove-args=intel_iommu=on iommu=pt"},
			{"grubby", "--update-kernel=ALL", "--args=intel_iommu=off"},
		},
	}, {
		name: "systemd-boot (kernel-install)",
		files: map[string]string{
			"/etc/default/grub":                     removeFile,
			"/etc/kernel/cmdline":                   "root=UUID=2f1c ro quiet splash\n",
			"/boot/loader/loader.conf":              "timeout 3\n",
			"/lib/modules/" + kver + "/vmlinuz":     "",
			"/lib/modules/6.8.0-45-generic/vmlinuz": "",
		},
		apply: [][]string{
			{"kernel-install", "add", "5.15.0-91-generic", "/lib/modules/5.15.0-91-generic/vmlinuz"},
			{"kernel-install", "add", "6.8.0-45-generic", "/lib/modules/6.8.0-45-generic/vmlinuz"},
		},
		intents: []intent{{"systemd-boot", "", "intel_iommu=on", ""}, {"systemd-boot", "", "iommu=pt", ""}},
		rollback: [][]string{
			{"kernel-install", "add", "5.15.0-91-generic", "/lib/modules/5.15.0-91-generic/vmlinuz"},
			{"kernel-install", "add", "6.8.0-45-generic", "/lib/modules/6.8.0-45-generic/vmlinuz"},
		},
	}, {
		name: "kernelstub",
		files: map[string]string{
			"/etc/default/grub":             removeFile,
			"/etc/kernelstub/configuration": `{"default":{"kernel_options":["quiet","splash"]},"user":{"kernel_options":["quiet","splash","intel_iommu=off"]}}`,
		},
		apply: [][]string{
			{"kernelstub", "--delete-options", "intel_iommu=off"},
			{"kernelstub", "--add-options", "intel_iommu=on iommu=pt"},
		},
		intents: []intent{{"kernelstub", "intel_iommu=off", "", ""}, {"kernelstub", "", "intel_iommu=on", ""}, {"kernelstub", "", "iommu=pt", ""}},
		rollback: [][]string{
			{"kernelstub", "--delete-options", "intel_iommu=on iommu=pt"},
			{"kernelstub", "--add-options", "intel_iommu=off"},
		},
	}, {
		name: "rpm-ostree",
		files: map[string]string{
			"/etc/default/grub":  removeFile,
			"/run/ostree-booted": "\n",
			"/boot/loader/entries/ostree-1-fedora-coreos.conf": "title Fedora CoreOS\nversion 1\nlinux /ostree/fedora-coreos-abc/vmlinuz-" + kver + "\noptions root=UUID=2f1c rw ostree=/ostree/boot.1/fedora-coreos/abc/0 iommu=nopt\n",
		},
		apply: [][]string{
			{"rpm-ostree", "kargs", "--delete-if-present=iommu=nopt", "--append-if-missing=intel_iommu=on", "--append-if-missing=iommu=pt"},
		},
		intents: []intent{{"rpm-ostree", "iommu=nopt", "", ""}, {"rpm-ostree", "", "intel_iommu=on", ""}, {"rpm-ostree", "", "iommu=pt", ""}},
		rollback: [][]string{
			{"rpm-ostree", "kargs", "--delete-if-present=intel_iommu=on", "--delete-if-present=iommu=pt"},
			{"rpm-ostree", "kargs", "--append-if-missing=iommu=nopt"},
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			d := realDeps()
			tools := withBootTools(t, d)
			root := bootRoot(t, tc.files)
			orig := tree(t, root)

			out, errs, code := gpuprepWith(t, d, "apply", "--root", root, "--mode", "vm-passthrough", "--yes")
			require.Equal(t, exitNeedReboot, code, out+errs)
			require.Equal(t, tc.apply, tools.calls())
			require.Equal(t, tc.intents, bootIntents(t, root))
			// each command ran with what it changes already journalled
			for i, c := range tools.calls() {
				for _, in := range tc.intents {
					arg, sign := in.After, "+"
					if arg == "" {
						arg, sign = in.Before, "-"
					}
					if c[0] == "kernel-install" || strings.Contains(strings.Join(c, " "), arg) {
						require.Contains(t, tools.intents[i], sign+arg, "%v ran before its intent was journalled", c)
					}
				}
			}

			// the reboot makes them effective; apply goes on
			simulateReboot(t, root)
			setBootTime(t, root, rebootAsk(t, root).Time.Add(time.Minute))
			out, errs, code = gpuprepWith(t, d, "plan", "--root", root, "--mode", "vm-passthrough", "-o", "json")
			require.Equal(t, exitOK, code, errs)
			var p planJSON
			require.NoError(t, json.Unmarshal([]byte(out), &p))
			require.Equal(t, []string{"vfio-bind", "label"}, p.ids(), "the tool's change is what the configuration now says")
			out, errs, code = gpuprepWith(t, d, "apply", "--root", root, "--mode", "vm-passthrough", "--yes")
			require.Contains(t, []int{exitOK, exitNotReady}, code, out+errs)
			require.Equal(t, "vfio-pci", driverOf(t, root, offGPU))
			require.Len(t, tools.calls(), len(tc.apply), "no bootloader command after the reboot")

			out, errs, code = gpuprepWith(t, d, "rollback", "--root", root)
			require.Equal(t, exitNeedReboot, code, out+errs)
			require.Contains(t, out, "reboot the node")
			require.NotContains(t, out, "are not: remove them with gpuprep grub remove")
			require.Equal(t, tc.rollback, tools.calls()[len(tc.apply):])
			require.Equal(t, orig, tree(t, root), "every file byte-identical, the boot configuration included")
			require.Equal(t, "nvidia", driverOf(t, root, offGPU))
			journalAllUndone(t, root)

			n := journalLen(t, root)
			before := len(tools.fake.Calls)
			out, errs, code = gpuprepWith(t, d, "rollback", "--root", root)
			require.Equal(t, exitOK, code, errs)
			require.Contains(t, out, "Nothing to roll back.")
			require.Len(t, tools.fake.Calls, before)
			require.Equal(t, n, journalLen(t, root))
		})
	}
}

// Rolled back before the reboot, the next boot is the running one again:
// no reboot is needed, and rollback says so truthfully.
func TestRollbackBootloaderCommandsBeforeReboot(t *testing.T) {
	d := realDeps()
	tools := withBootTools(t, d)
	root := bootRoot(t, map[string]string{
		"/etc/default/grub":                          "GRUB_CMDLINE_LINUX=\"root=UUID=2f1c ro quiet splash\"\nGRUB_ENABLE_BLSCFG=true\n",
		"/boot/loader/entries/abc-" + kver + ".conf": "title Ubuntu\nlinux /vmlinuz-" + kver + "\noptions root=UUID=2f1c ro quiet splash\n",
	})
	orig := tree(t, root)
	_, errs, code := gpuprepWith(t, d, "apply", "--root", root, "--mode", "vm-passthrough", "--yes")
	require.Equal(t, exitNeedReboot, code, errs)
	out, errs, code := gpuprepWith(t, d, "rollback", "--root", root)
	require.Equal(t, exitOK, code, out+errs)
	require.Contains(t, out, "Rolled back.\n")
	require.Equal(t, [][]string{
		{"grubby", "--update-kernel=ALL", "--args=intel_iommu=on iommu=pt"},
		{"grubby", "--update-kernel=ALL", "--remove-args=intel_iommu=on iommu=pt"},
	}, tools.calls())
	require.Equal(t, orig, tree(t, root))
	journalAllUndone(t, root)
}

// grubby --update-kernel=ALL changes every entry: an argument one entry
// already had is not removed from all of them, nor one that only some had
// put back in all of them; rollback says so and how to finish by hand.
func TestRollbackBootloaderCommandsPartial(t *testing.T) {
	d := realDeps()
	tools := withBootTools(t, d)
	rescue := "/boot/loader/entries/abc-0-rescue.conf"
	root := bootRoot(t, map[string]string{
		"/etc/default/grub":                          "GRUB_CMDLINE_LINUX=\"root=UUID=2f1c ro quiet splash\"\nGRUB_ENABLE_BLSCFG=true\n",
		"/boot/loader/entries/abc-" + kver + ".conf": "title Ubuntu\nlinux /vmlinuz-" + kver + "\noptions root=UUID=2f1c ro quiet splash intel_iommu=off\n",
		rescue: "title Rescue\nlinux /vmlinuz-0-rescue\noptions root=UUID=2f1c ro iommu=pt\n",
	})
	_, errs, code := gpuprepWith(t, d, "apply", "--root", root, "--mode", "vm-passthrough", "--yes")
	require.Equal(t, exitNeedReboot, code, errs)
	require.Equal(t, []intent{
		{"grub-bls", "intel_iommu=off", "", rescue},
		{"grub-bls", "", "intel_iommu=on", ""},
		{"grub-bls", "", "iommu=pt", rescue},
	}, bootIntents(t, root))

	out, errs, code := gpuprepWith(t, d, "rollback", "--root", root)
	require.Equal(t, exitNeedReboot, code, out+errs) // iommu=pt stays in the kernel's entry
	require.Equal(t, []string{"grubby", "--update-kernel=ALL", "--remove-args=intel_iommu=on"}, tools.calls()[len(tools.calls())-1])
	require.Contains(t, out, "note: grub-bls: iommu=pt not removed: "+rescue+" already had iommu before apply, and removing it the way apply added it (grubby --update-kernel=ALL) would take it from there too")
	require.Contains(t, out, "note: grub-bls: intel_iommu=off not put back: "+rescue+" did not have it before apply")
	require.Contains(t, out, "grubby --update-kernel=/boot/vmlinuz-VERSION --args=intel_iommu=off")
	journalAllUndone(t, root)
	entry, err := os.ReadFile(filepath.Join(root, "boot/loader/entries/abc-"+kver+".conf"))
	require.NoError(t, err)
	require.Contains(t, string(entry), "options root=UUID=2f1c ro quiet splash iommu=pt\n")
}

// grub ensure on a bootloader whose own tool holds the arguments (kernelstub, rpm-ostree) journals what the tool
// changes, as apply does, and gpuprep rollback changes it back through the tool (it said "Nothing to roll back").
func TestRollbackUndoesGrubEnsureThroughTheBootloaderTool(t *testing.T) {
	for name, tc := range map[string]struct {
		files    map[string]string
		ensure   [][]string
		rollback [][]string
	}{
		"grub-bls (grubby)": {
			files: map[string]string{
				"/etc/default/grub":                          "GRUB_TIMEOUT=5\nGRUB_CMDLINE_LINUX=\"root=UUID=2f1c ro quiet splash\"\nGRUB_ENABLE_BLSCFG=true\n",
				"/etc/kernel/cmdline":                        "root=UUID=2f1c ro quiet splash\n",
				"/boot/loader/entries/abc-" + kver + ".conf": "title Ubuntu (" + kver + ")\nversion " + kver + "\nlinux /vmlinuz-" + kver + "\noptions root=UUID=2f1c ro quiet splash\n",
			},
			ensure:   [][]string{{"grubby", "--update-kernel=ALL", "--args=intel_iommu=on iommu=pt"}},
			rollback: [][]string{{"grubby", "--update-kernel=ALL", "--remove-args=intel_iommu=on iommu=pt"}},
		},
		"kernelstub": {
			files:    map[string]string{"/etc/default/grub": removeFile, "/etc/kernelstub/configuration": `{"default":{"kernel_options":["quiet","splash"]},"user":{"kernel_options":["quiet","splash"]}}`},
			ensure:   [][]string{{"kernelstub", "--add-options", "intel_iommu=on iommu=pt"}},
			rollback: [][]string{{"kernelstub", "--delete-options", "intel_iommu=on iommu=pt"}},
		},
		"rpm-ostree": {
			files: map[string]string{"/etc/default/grub": removeFile, "/run/ostree-booted": "\n",
				"/boot/loader/entries/ostree-1-fedora-coreos.conf": "title Fedora CoreOS\nversion 1\nlinux /ostree/fedora-coreos-abc/vmlinuz-" + kver + "\noptions root=UUID=2f1c rw ostree=/ostree/boot.1/fedora-coreos/abc/0\n"},
			ensure:   [][]string{{"rpm-ostree", "kargs", "--append-if-missing=intel_iommu=on", "--append-if-missing=iommu=pt"}},
			rollback: [][]string{{"rpm-ostree", "kargs", "--delete-if-present=intel_iommu=on", "--delete-if-present=iommu=pt"}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			d := realDeps()
			tools := withBootTools(t, d)
			d.grubRunner = func(root *host.Root) host.Runner {
				k, err := fixture.NewKernel(root.Dir())
				require.NoError(t, err)
				tools.kernel = k
				return tools
			}
			root := bootRoot(t, tc.files)
			out, errs, code := gpuprepWith(t, d, "grub", "ensure", "--mode", "vm-passthrough", "--root", root)
			require.Equal(t, exitNeedReboot, code, out+errs)
			require.Equal(t, tc.ensure, tools.calls())
			require.NotEmpty(t, tools.intents[0], "the tool ran with its change journalled")

			out, errs, code = gpuprepWith(t, d, "rollback", "--root", root)
			require.Equal(t, exitOK, code, out+errs) // before the reboot: the running kernel never had them
			require.Contains(t, out, "Rolled back.")
			require.NotContains(t, out+errs, "not journalled", "they were")
			require.Equal(t, tc.rollback, tools.calls()[len(tc.ensure):])
			journalAllUndone(t, root)
		})
	}
}
