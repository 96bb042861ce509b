package main

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/journal"
	"github.com/gpuprep/gpuprep/provision"
	"github.com/gpuprep/gpuprep/vfio"
)

// appliedUntilReboot is an iommu-off-kernel node (simulated) that apply
// --mode vm-passthrough took up to its reboot, and the node's files before.
func appliedUntilReboot(t *testing.T, d *deps) (string, map[string]string) {
	t.Helper()
	simulatedKernel(t, d)
	root := fixtureRoot(t, "iommu-off-kernel")
	withTools(t, root)
	orig := tree(t, root)
	out, errs, code := gpuprepWith(t, d, "apply", "--root", root, "--mode", "vm-passthrough", "--yes")
	require.Equal(t, exitNeedReboot, code, out+errs)
	return root, orig
}

// undoneEntries is the journal's "undone" entries.
func undoneEntries(t *testing.T, dir string) []journal.Entry {
	t.Helper()
	return entriesOfKind(t, dir, provision.KindUndone)
}

// entriesOfKind is the journal's entries of kind.
func entriesOfKind(t *testing.T, dir, kind string) []journal.Entry {
	t.Helper()
	var out []journal.Entry
	for _, e := range journalEntries(t, dir) {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

func grubBackup(t *testing.T, root string) string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(root, "etc/default/grub.gpuprep-*.bak"))
	require.NoError(t, err)
	require.Len(t, m, 1)
	return m[0]
}

// A file whose backup is gone cannot be restored: rollback says so, naming
// the file and the backup, exits 1, leaves the file and records nothing
// undone, so that once the backup is back a rollback restores it.
func TestRollbackMissingBackup(t *testing.T) {
	d := realDeps()
	root, orig := appliedUntilReboot(t, d)
	var out, errs string
	var code int
	bak := grubBackup(t, root)
	saved, err := os.ReadFile(bak)
	require.NoError(t, err)
	require.NoError(t, os.Remove(bak))
	applied := tree(t, root)

	for range 2 {
		out, errs, code = gpuprepWith(t, d, "rollback", "--root", root)
		require.Equal(t, exitNotReady, code, out+errs)
		require.NotContains(t, out, "Rolled back")
		require.NotContains(t, out, "Nothing to roll back")
		require.Contains(t, errs, "/etc/default/grub: cannot restore it: its backup /"+strings.TrimPrefix(bak, root+"/")+" is missing")
		require.Contains(t, errs, "as gpuprep left it")
		require.Equal(t, applied, tree(t, root), "the file is left as it is")
		require.Contains(t, applied["etc/default/grub"], "intel_iommu=on iommu=pt")
		require.Empty(t, undoneEntries(t, root))
	}

	// the backup back: rollback restores the file, saving what it held
	require.NoError(t, os.WriteFile(bak, saved, 0o644))
	out, errs, code = gpuprepWith(t, d, "rollback", "--root", root)
	require.Contains(t, []int{exitOK, exitNeedReboot}, code, out+errs)
	require.Contains(t, out, "/etc/default/grub: restored from /"+strings.TrimPrefix(bak, root+"/")+"; what it held is saved in /etc/default/grub.gpuprep-")
	require.Equal(t, orig, tree(t, root))
	out, _, code = gpuprepWith(t, d, "rollback", "--root", root)
	require.Equal(t, exitOK, code)
	require.Contains(t, out, "Nothing to roll back.")
}

// A file edited since gpuprep wrote it is not restored: rollback names it
// and its backup, exits 1 and records nothing undone; --force-files
// restores it, saving the edited content first, and says where.
func TestRollbackKeepsLaterEdit(t *testing.T) {
	d := realDeps()
	root, orig := appliedUntilReboot(t, d)
	var errs string
	var code int
	bak := "/" + strings.TrimPrefix(grubBackup(t, root), root+"/")
	p := filepath.Join(root, "etc/default/grub")
	g, err := os.ReadFile(p)
	require.NoError(t, err)
	edited := string(g) + "GRUB_TIMEOUT=30 # admin edit\n"
	require.NoError(t, os.WriteFile(p, []byte(edited), 0o644))

	out, errs, code := gpuprepWith(t, d, "rollback", "--root", root)
	require.Equal(t, exitNotReady, code, out+errs)
	require.Contains(t, errs, "/etc/default/grub: changed since gpuprep wrote it: not restored; restore it by hand from "+bak+", or pass --force-files")
	g, err = os.ReadFile(p)
	require.NoError(t, err)
	require.Equal(t, edited, string(g))
	require.Empty(t, undoneEntries(t, root))

	out, errs, code = gpuprepWith(t, d, "rollback", "--root", root, "--force-files", "-o", "json")
	require.Contains(t, []int{exitOK, exitNeedReboot}, code, out+errs)
	var res provision.RollbackResult
	require.NoError(t, json.Unmarshal([]byte(out), &res), out)
	var u provision.Undo
	for _, x := range res.Undone {
		if x.Target == "/etc/default/grub" {
			u = x
		}
	}
	require.NotEmpty(t, u.Backup, out)
	require.Contains(t, u.Action, "restored from "+bak+"; what it held is saved in "+u.Backup)
	require.Contains(t, strings.Join(res.Notes, "\n"), "/etc/default/grub: changed since gpuprep wrote it: undone anyway (--force-files)")
	kept, err := os.ReadFile(filepath.Join(root, u.Backup))
	require.NoError(t, err)
	require.Equal(t, edited, string(kept), "the edit is saved")
	require.Equal(t, orig, tree(t, root))
	// the journal says where the edited content went
	var saved []string
	for _, e := range undoneEntries(t, root) {
		if e.Path == "/etc/default/grub" {
			saved = append(saved, e.Backup)
		}
	}
	require.NotEmpty(t, saved)
	require.Equal(t, u.Backup, saved[0])

	out, _, code = gpuprepWith(t, d, "rollback", "--root", root)
	require.Equal(t, exitOK, code)
	require.Contains(t, out, "Nothing to roll back.")
}

// A file gpuprep created and someone edited since is not removed (nor is
// anything recorded undone); what else rollback restored it leaves
// restored, and a rollback --force-files then removes the file, saving it.
func TestRollbackKeepsEditedCreatedFile(t *testing.T) {
	d := realDeps()
	root, orig := appliedUntilReboot(t, d)
	var errs string
	var code int
	simulateReboot(t, root)
	_, errs, code = gpuprepWith(t, d, "apply", "--root", root, "--mode", "vm-passthrough", "--yes")
	require.Contains(t, []int{exitOK, exitNotReady}, code, errs)
	conf := filepath.Join(root, vfio.ModprobeConf)
	c, err := os.ReadFile(conf)
	require.NoError(t, err)
	edited := string(c) + "options vfio-pci disable_vga=1 # admin\n"
	require.NoError(t, os.WriteFile(conf, []byte(edited), 0o600))
	require.NoError(t, os.Chmod(conf, 0o600))

	out, errs, code := gpuprepWith(t, d, "rollback", "--root", root)
	require.Equal(t, exitNotReady, code, out+errs)
	require.Contains(t, errs, vfio.ModprobeConf+": changed since gpuprep created it: not removed; remove it by hand, or pass --force-files")
	c, err = os.ReadFile(conf)
	require.NoError(t, err)
	require.Equal(t, edited, string(c))
	require.Empty(t, undoneEntries(t, root))
	require.NotContains(t, tree(t, root)["etc/default/grub"], "intel_iommu", "the other files are restored")

	out, errs, code = gpuprepWith(t, d, "rollback", "--root", root, "--force-files")
	require.Contains(t, []int{exitOK, exitNeedReboot}, code, out+errs)
	require.NoFileExists(t, conf)
	m, err := filepath.Glob(conf + ".gpuprep-*.bak")
	require.NoError(t, err)
	require.Len(t, m, 1)
	require.Contains(t, out, vfio.ModprobeConf+": removed (gpuprep created it); what it held is saved in "+vfio.ModprobeConf+".gpuprep-")
	kept, err := os.ReadFile(m[0])
	require.NoError(t, err)
	require.Equal(t, edited, string(kept))
	fi, err := os.Stat(m[0])
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "the saved copy keeps the file's mode")
	require.NotContains(t, out, "/etc/default/grub:", "already restored: not touched again")
	// the directory apply created stays: it holds the saved content
	require.Contains(t, out, "/etc/modprobe.d: left (gpuprep created it; it holds gpuprep-vfio.conf.gpuprep-")
	require.Equal(t, orig, tree(t, root))
}

// Entries from a gpuprep that did not record what it wrote: rollback
// restores as it did (an edit made since included), says it could not
// check, and saves what the file held.
func TestRollbackOlderJournalWithoutHashes(t *testing.T) {
	d := realDeps()
	root, orig := appliedUntilReboot(t, d)
	var errs string
	var code int
	// the journal as an older gpuprep wrote it: no "wrote"
	jp := filepath.Join(root, journal.Path)
	f, err := os.Open(jp)
	require.NoError(t, err)
	var old []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var m map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &m))
		delete(m, "wrote")
		b, err := json.Marshal(m)
		require.NoError(t, err)
		old = append(old, string(b))
	}
	require.NoError(t, sc.Err())
	require.NoError(t, f.Close())
	require.NoError(t, os.WriteFile(jp, []byte(strings.Join(old, "\n")+"\n"), 0o600))
	p := filepath.Join(root, "etc/default/grub")
	g, err := os.ReadFile(p)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(p, append(g, "# admin edit\n"...), 0o644))

	out, errs, code := gpuprepWith(t, d, "rollback", "--root", root)
	require.Contains(t, []int{exitOK, exitNeedReboot}, code, out+errs)
	require.Contains(t, out, "note: /etc/default/grub: the journal does not record what gpuprep wrote there")
	require.Contains(t, out, "what it held is saved in /etc/default/grub.gpuprep-")
	require.Equal(t, orig, tree(t, root))
}

// A rollback that puts back an argument turning the IOMMU off (apply had
// taken it out of the next boot's configuration) says a reboot is needed:
// the next boot differs from the running one.
func TestRollbackOfAnOffArgumentNeedsAReboot(t *testing.T) {
	d := realDeps()
	simulatedKernel(t, d)
	root := fixtureRoot(t, "hgx-h200")
	withTools(t, root)
	grub, err := os.ReadFile(filepath.Join(root, "etc/default/grub"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(root, "etc/default/grub"), []byte(strings.Replace(string(grub), "iommu=pt\"", "iommu=pt iommu=off\"", 1)), 0o644))
	out, errs, code := gpuprepWith(t, d, "apply", "--root", root, "--mode", "vm-passthrough", "--yes")
	require.Equal(t, exitOK, code, out+errs)
	grub, err = os.ReadFile(filepath.Join(root, "etc/default/grub"))
	require.NoError(t, err)
	require.NotContains(t, string(grub), "iommu=off")
	out, errs, code = gpuprepWith(t, d, "rollback", "--root", root)
	require.Equal(t, exitNeedReboot, code, out+errs)
	grub, err = os.ReadFile(filepath.Join(root, "etc/default/grub"))
	require.NoError(t, err)
	require.Contains(t, string(grub), "iommu=pt iommu=off")
}

// Rollback on a board with NVSwitches does not move GPUs off vfio-pci while
// the system runs (as apply and vfio unbind do not): it restores the files
// and says the reboot returns them; --force moves them now.
func TestRollbackOnNVSwitchBoardLeavesVFIOForTheBoot(t *testing.T) {
	d := realDeps()
	simulatedKernel(t, d)
	root := fixtureRoot(t, "hgx-h200")
	withTools(t, root)
	out, errs, code := gpuprepWith(t, d, "apply", "--root", root, "--mode", "vm-passthrough", "--yes")
	require.Equal(t, exitOK, code, out+errs)
	out, errs, code = gpuprepWith(t, d, "rollback", "--root", root)
	require.Equal(t, exitNeedReboot, code, out+errs)
	require.Contains(t, out+errs, "0000:13:00.0: left on vfio-pci until the next boot, which gives it back to nvidia")
	require.Equal(t, "vfio-pci", driverOf(t, root, "0000:13:00.0"))
	require.NoFileExists(t, filepath.Join(root, vfio.ModprobeConf))
	// the summary says so, not the kernel arguments
	require.Contains(t, out, "Rolled back, except 8 devices not yet back on their driver from before gpuprep: on vfio-pci (was nvidia): 0000:13:00.0, 0000:23:00.0, ")
	require.Contains(t, out, "The devices left on vfio-pci go back to their driver at the next boot: reboot the node.\n")
	require.NotContains(t, out, "kernel arguments")
	// the journal keeps them: --force, as the line says, moves them now
	out, errs, code = gpuprepWith(t, d, "rollback", "--root", root, "--force")
	require.Equal(t, exitOK, code, out+errs)
	require.Contains(t, out, "0000:13:00.0: vfio-pci -> nvidia\n")
	require.Equal(t, "nvidia", driverOf(t, root, "0000:13:00.0"))
	out, errs, code = gpuprepWith(t, d, "rollback", "--root", root)
	require.Equal(t, exitOK, code, out+errs)
	require.Equal(t, "Nothing to roll back.\n", out)

	root = fixtureRoot(t, "hgx-h200")
	withTools(t, root)
	out, errs, code = gpuprepWith(t, d, "apply", "--root", root, "--mode", "vm-passthrough", "--yes")
	require.Equal(t, exitOK, code, out+errs)
	out, errs, code = gpuprepWith(t, d, "rollback", "--root", root, "--force")
	require.Equal(t, exitOK, code, out+errs)
	require.Equal(t, "nvidia", driverOf(t, root, "0000:13:00.0"))
}

// Apply journals each directory it creates (before the mkdir) and rollback
// removes it again once empty: the tree after rollback is the tree before
// apply, directories and symlinks included (diff -r). A directory that was
// there before, or that holds anything by then, stays.
func TestRollbackRemovesDirectoriesApplyCreated(t *testing.T) {
	d := realDeps()
	simulatedKernel(t, d)
	root := fixtureRoot(t, "turing-multifunction")
	withTools(t, root)
	// the journal's own directory is gpuprep's state, not compared
	require.NoError(t, os.MkdirAll(filepath.Join(root, "var/lib/gpuprep"), 0o700))
	before := filepath.Join(t.TempDir(), "before")
	require.NoError(t, copyTree(root, before))
	orig := tree(t, root)
	require.NotContains(t, orig, "etc/modules-load.d/")

	out, errs, code := gpuprepWith(t, d, "apply", "--root", root, "--mode", "vm-passthrough", "--yes")
	require.Equal(t, exitOK, code, out+errs)
	require.FileExists(t, filepath.Join(root, vfio.ModulesLoad))
	r, err := host.NewRoot(root)
	require.NoError(t, err)
	es, err := journal.Read(r)
	require.NoError(t, err)
	var dirs []string
	for _, e := range es {
		if e.Kind == journal.KindDir {
			dirs = append(dirs, e.Path)
		}
	}
	require.Equal(t, []string{"/etc/modules-load.d"}, dirs, "only the directory it made; not the journal's")

	out, errs, code = gpuprepWith(t, d, "rollback", "--root", root)
	require.Equal(t, exitOK, code, out+errs)
	require.Contains(t, out, "/etc/modules-load.d: removed (gpuprep created it; empty)\n")
	require.Equal(t, orig, tree(t, root))
	diffTrees(t, before, root)
	out, errs, code = gpuprepWith(t, d, "rollback", "--root", root)
	require.Equal(t, exitOK, code, out+errs)
	require.Equal(t, "Nothing to roll back.\n", out)

	// made again, and someone's file put there: it stays, with the file
	out, errs, code = gpuprepWith(t, d, "apply", "--root", root, "--mode", "vm-passthrough", "--yes")
	require.Equal(t, exitOK, code, out+errs)
	require.NoError(t, os.WriteFile(filepath.Join(root, "etc/modules-load.d/admin.conf"), []byte("kvm\n"), 0o644))
	out, errs, code = gpuprepWith(t, d, "rollback", "--root", root)
	require.Equal(t, exitOK, code, out+errs)
	require.Contains(t, out, "note: /etc/modules-load.d: left (gpuprep created it; it holds admin.conf now)\n")
	require.FileExists(t, filepath.Join(root, "etc/modules-load.d/admin.conf"))
	require.NoFileExists(t, filepath.Join(root, vfio.ModulesLoad))
	// left, not undone: once the file is gone, the next rollback removes it
	require.NoError(t, os.Remove(filepath.Join(root, "etc/modules-load.d/admin.conf")))
	out, errs, code = gpuprepWith(t, d, "rollback", "--root", root)
	require.Equal(t, exitOK, code, out+errs)
	require.Contains(t, out, "/etc/modules-load.d: removed (gpuprep created it; empty)")
	require.NoDirExists(t, filepath.Join(root, "etc/modules-load.d"))

	// one that was there before, empty: no entry, and it stays
	root = fixtureRoot(t, "turing-multifunction")
	withTools(t, root)
	require.NoError(t, os.MkdirAll(filepath.Join(root, "etc/modules-load.d"), 0o755))
	orig = tree(t, root)
	out, errs, code = gpuprepWith(t, d, "apply", "--root", root, "--mode", "vm-passthrough", "--yes")
	require.Equal(t, exitOK, code, out+errs)
	out, errs, code = gpuprepWith(t, d, "rollback", "--root", root)
	require.Equal(t, exitOK, code, out+errs)
	require.NotContains(t, out, "/etc/modules-load.d:")
	require.DirExists(t, filepath.Join(root, "etc/modules-load.d"))
	require.Equal(t, orig, tree(t, root))
}

// diffTrees runs diff -r (symlinks compared as links) on two roots, the
// journal and lock aside; what differs under sys/ may only be the VFIO
// modules apply loaded (rollback does not unload modules).
func diffTrees(t *testing.T, a, b string) {
	t.Helper()
	if _, err := exec.LookPath("diff"); err != nil {
		t.Log("no diff(1) here: trees compared by tree() only")
		return
	}
	out, _ := exec.Command("diff", "-r", "--no-dereference", "-x", "journal.jsonl", "-x", "lock", a, b).CombinedOutput()
	var bad []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		switch l {
		case "", "Only in " + b + "/sys/bus/pci/drivers: vfio-pci", "Only in " + b + "/sys/module: vfio_pci", "Only in " + b + "/sys/module: vfio_iommu_type1", "Only in " + b + "/dev: vfio":
			continue
		}
		bad = append(bad, l)
	}
	require.Empty(t, bad, "diff -r %s %s:\n%s", a, b, out)
}
