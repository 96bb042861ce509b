//go:build linux && amd64

package main

import (
	"fmt"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/crashtest"
	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/journal"
	"github.com/gpuprep/gpuprep/provision"
	"github.com/gpuprep/gpuprep/vfio"
	"github.com/gpuprep/gpuprep/vgpu/vgputest"
)

// TestApplyCrashHelper is the process TestApplyCrash kills: with
// GPUPREP_APPLY_CRASH_ROOT set it runs `gpuprep apply` (the arguments in
// GPUPREP_APPLY_CRASH_ARGS) on that fixture root through the kernel simulator
// (GPUPREP_APPLY_CRASH_SIM=vgpu: through a simulated vm-vgpu node;
// initramfs: with update-initramfs remaking the image, after the marker
// system call initramfsMarker recognises).
func TestApplyCrashHelper(t *testing.T) {
	dir := os.Getenv("GPUPREP_APPLY_CRASH_ROOT")
	if dir == "" {
		t.Skip("helper process for TestApplyCrash")
	}
	d := realDeps()
	switch os.Getenv("GPUPREP_APPLY_CRASH_SIM") {
	case "vgpu":
		_, d = simulatedVGPUNode(t, dir)
	case "initramfs":
		simulatedInitramfs(t, d).before = func() {
			_, _, _ = syscall.Syscall(syscall.SYS_FCHMOD, ^uintptr(0), markerMode, 0) // fd -1: EBADF, changes nothing
		}
	default:
		simulatedKernel(t, d)
	}
	args := append(strings.Fields(os.Getenv("GPUPREP_APPLY_CRASH_ARGS")), "--root", dir)
	out, errs, code := gpuprepWith(t, d, args...)
	fmt.Fprintf(os.Stderr, "helper: exit %d\n%s%s", code, out, errs)
}

// runTraced runs the helper on dir under ptrace and SIGKILLs it at the entry
// of its killAt-th mutating syscall (0: never). It returns how many
// mutating syscalls it saw and whether it killed the helper.
func runTraced(t *testing.T, dir string, sc crashScenario, killAt int) (int, bool, string) {
	t.Helper()
	n := 0
	killed, out := runTracedUntil(t, dir, sc, func(regs *syscall.PtraceRegs) bool {
		if !crashtest.Mutating(regs) {
			return false
		}
		n++
		return n == killAt
	})
	return n, killed, out
}

// runTracedUntil runs the helper on dir under ptrace and SIGKILLs it at the
// entry of the first syscall kill picks.
func runTracedUntil(t *testing.T, dir string, sc crashScenario, kill func(regs *syscall.PtraceRegs) bool) (bool, string) {
	t.Helper()
	sim := ""
	switch {
	case sc.vgpu != nil:
		sim = "vgpu"
	case sc.initramfs:
		sim = "initramfs"
	}
	return crashtest.Run(t, "TestApplyCrashHelper",
		[]string{"GPUPREP_APPLY_CRASH_ROOT=" + dir, "GPUPREP_APPLY_CRASH_ARGS=" + sc.args, "GPUPREP_APPLY_CRASH_SIM=" + sim}, kill)
}

// markerMode is the mode of the fchmod(-1, …) the helper's update-initramfs
// makes before it writes the image: initramfsMarker recognises it, to kill
// the helper just there.
const markerMode = 0o7777

func initramfsMarker(regs *syscall.PtraceRegs) bool {
	return regs.Orig_rax == syscall.SYS_FCHMOD && regs.Rdi == ^uint64(0) && regs.Rsi == markerMode
}

// crashScenario is one apply run that gets killed.
type crashScenario struct {
	name    string
	fixture string
	args    string
	vgpu    *vgpuCase                      // a vm-vgpu node (vgpuNode); nil: the fixture kernel simulator
	node    func(t *testing.T, dir string) // makes the fixture the node before any apply
	setup   func(t *testing.T, dir string) // brings the root to where this apply starts
	finish  func(t *testing.T, dir string) // a complete apply from there, after a kill
	// initramfs: the node has the running kernel's initramfs, and
	// update-initramfs remakes it (initramfsKernel); killAtInitramfs: also
	// kill the apply where it runs update-initramfs, once before an apply
	// and once before a rollback; targetedOnly: only there, no random
	// kills; unbind: the apply takes the GPU off VFIO (the finished
	// initramfs lacks gpuprep's files, which the kill finds removed)
	initramfs, killAtInitramfs, targetedOnly, unbind bool
	// unloadsNouveau: the apply unloads nouveau, which rollback does not load
	// again: a device nouveau drove is unbound once rolled back (whenever
	// the kill came after the unload)
	unloadsNouveau bool
}

// crashState is what a root holds: files (tree), each PCI function's
// driver, the vGPUs there are (vgpusOf), and whether nvidia_vgpu_vfio is
// loaded (its init, mdevctl's starts included, done).
type crashState struct {
	files, drivers, vgpus map[string]string
	mdevLoaded            bool
}

func crashSnap(t *testing.T, dir string) crashState {
	t.Helper()
	s := crashState{files: tree(t, dir), drivers: map[string]string{}, vgpus: vgpusOf(t, dir)}
	r, err := host.NewRoot(dir)
	require.NoError(t, err)
	for _, a := range r.Names("/sys/bus/pci/devices") {
		s.drivers[a] = r.LinkBase("/sys/bus/pci/devices/" + a + "/driver")
	}
	s.mdevLoaded = r.Exists("/sys/module/nvidia_vgpu_vfio")
	return s
}

// vgpuSummary is a vGPU state without the UUIDs gpuprep picks for new
// mdevs: VFs with their types, foreign mdevs by UUID, gpuprep's by parent
// and type.
func vgpuSummary(vgpus, foreign map[string]string) []string {
	var out []string
	for k, v := range vgpus {
		switch {
		case strings.Contains(k, ":"):
			out = append(out, "vf "+k+" "+v)
		case foreign[k] != "":
			out = append(out, "mdev "+k+" "+v)
		default:
			out = append(out, "mdev "+v)
		}
	}
	sort.Strings(out)
	return out
}

// enableLink says whether p is what systemctl enable makes (a link in a
// target's .wants, that directory, /etc/systemd/system itself): systemctl's, undone by the systemctl
// disable rollback runs before it removes a unit gpuprep wrote.
func enableLink(p string) bool {
	return p == "etc/systemd/" || p == "etc/systemd/system/" || // made by the first link where no unit was there before
		strings.HasPrefix(p, "etc/systemd/system/") && (strings.HasSuffix(path.Dir(p), ".wants") || strings.HasSuffix(p, ".wants/"))
}

// checkJournalAfterKill: the journal reads, every step recorded done was
// recorded started before, every file under /etc that differs from before
// the apply (a directory made, too) and every vGPU that was not there has an entry that names it,
// so that rollback finds it.
func checkJournalAfterKill(t *testing.T, dir string, before, now crashState, foreign map[string]string, msg string) {
	t.Helper()
	r, err := host.NewRoot(dir)
	require.NoError(t, err)
	es, err := journal.Read(r)
	require.NoError(t, err, "%s: the journal", msg)
	files, vgpus, started := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, e := range es {
		switch e.Kind {
		case "file", provision.KindFileIntent:
			files[strings.TrimPrefix(e.Path, "/")] = true
		case journal.KindDir: // tree's name for a directory
			files[strings.TrimPrefix(e.Path, "/")+"/"] = true
		case provision.KindVGPU, provision.KindVGPUIntent:
			if strings.HasSuffix(e.Path, "/create") {
				vgpus[e.After] = true
			} else {
				vgpus[strings.TrimSuffix(strings.TrimPrefix(e.Path, "/sys/bus/pci/devices/"), "/nvidia/current_vgpu_type")] = true
			}
		case provision.KindStep:
			if e.Command != "apply" {
				continue // vgpu install's own record of each of its steps
			}
			if e.After == "started" {
				started[e.Before] = true
			} else {
				require.True(t, started[e.Before], "%s: step %s done, never started", msg, e.Before)
			}
		}
	}
	for p, cur := range now.files {
		if old, ok := before.files[p]; strings.HasPrefix(p, "etc/") && (!ok || old != cur) && !strings.Contains(p, ".gpuprep-tmp-") && !enableLink(p) {
			require.True(t, files[p], "%s: /%s changed and the journal does not name it", msg, p)
		}
	}
	for p := range before.files {
		if _, err := os.Stat(filepath.Join(dir, p)); strings.HasSuffix(p, "/") && err == nil {
			continue // an empty directory that holds something now
		}
		if _, ok := now.files[p]; !ok && strings.HasPrefix(p, "etc/") && !enableLink(p) {
			require.True(t, files[p], "%s: /%s removed and the journal does not name it", msg, p)
		}
	}
	for v := range now.vgpus {
		if _, ok := before.vgpus[v]; !ok && foreign[v] == "" {
			require.True(t, vgpus[v], "%s: vGPU %s created and the journal does not name it", msg, v)
		}
	}
}

// TestApplyCrash kills apply at random mutating system calls (every one
// with GPUPREP_CRASH_ALL=1) of six scenarios: vm-passthrough before and
// after the reboot, container (from vfio-pci, and from nouveau), and vm-vgpu after the reboot on SR-IOV (two
// L40S) and on mdev (a T4, beside an mdevctl-defined mdev). After each kill
// every file is old or new, the journal names every change, and apply or
// rollback (in turn) finishes the job. On vm-passthrough the node has an
// initramfs that update-initramfs remakes, compared with the files; after
// the reboot apply is also killed where it runs update-initramfs (twice:
// then applied, then rolled back), and so is apply --mode container on that
// node once vm-passthrough bound it (there only).
func TestApplyCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("kills apply at 80 points")
	}
	// each root through its simulator: the fixture kernel, or a vm-vgpu node
	vgpuRoots, initramfsRoots := map[string]bool{}, map[string]bool{}
	d := realDeps()
	realQuery := d.provisionQuery
	d.provisionKernel = func(root *host.Root) (vfio.Sysfs, host.Runner, error) {
		if vgpuRoots[root.Dir()] {
			n, err := newVGPUNode(root.Dir())
			return n, n, err
		}
		k, err := fixture.NewKernel(root.Dir())
		if initramfsRoots[root.Dir()] {
			r := initramfsKernel{Kernel: k}
			return r, r, err
		}
		return k, k, err
	}
	d.provisionQuery = func(root *host.Root) host.Runner {
		if vgpuRoots[root.Dir()] {
			if n, err := newVGPUNode(root.Dir()); err == nil {
				return n
			}
		}
		return realQuery(root)
	}
	self := fakeGpuprep(t)
	d.gpuprepBinary = func() string { return self }

	vmArgs, containerArgs := "apply --mode vm-passthrough --yes", "apply --mode container --yes"
	applyContainer := func(t *testing.T, dir string) {
		_, errs, code := gpuprepWith(t, d, append(strings.Fields(containerArgs), "--root", dir)...)
		require.Equal(t, exitOK, code, errs)
	}
	applyVM := func(t *testing.T, dir string, want int) {
		_, errs, code := gpuprepWith(t, d, append(strings.Fields(vmArgs), "--root", dir)...)
		require.Equal(t, want, code, errs)
	}
	// the initramfs the running kernel booted, made before gpuprep's files
	image := func(t *testing.T, dir string) {
		require.NoError(t, fixture.New(dir).Initramfs(offKernel).Touch(offImage, time.Now().Add(-time.Hour)).Err())
	}
	scenarios := []crashScenario{
		{name: "before-reboot", fixture: "iommu-off-kernel", args: vmArgs, initramfs: true, node: image,
			finish: func(t *testing.T, dir string) {
				applyVM(t, dir, exitNeedReboot)
				simulateReboot(t, dir)
				applyVM(t, dir, exitOK)
			}},
		{name: "after-reboot", fixture: "iommu-off-kernel", args: vmArgs, initramfs: true, killAtInitramfs: true, node: image,
			setup: func(t *testing.T, dir string) {
				applyVM(t, dir, exitNeedReboot)
				simulateReboot(t, dir)
			},
			finish: func(t *testing.T, dir string) { applyVM(t, dir, exitOK) }},
		{name: "container", fixture: "vfio-bound", args: containerArgs, finish: applyContainer},
		// container on a GPU nouveau drives: the blacklist, the initramfs,
		// the unload (journalled per device before it)
		{name: "container-nouveau", fixture: "vgpu-fresh-mdev", args: containerArgs, finish: applyContainer, unloadsNouveau: true},
		// container on the node vm-passthrough bound persistently: killed
		// where the unbind runs update-initramfs, after the files went
		{name: "container-unbind", fixture: "iommu-off-kernel", args: containerArgs, initramfs: true, killAtInitramfs: true,
			targetedOnly: true, unbind: true, node: image,
			setup: func(t *testing.T, dir string) {
				applyVM(t, dir, exitNeedReboot)
				simulateReboot(t, dir)
				applyVM(t, dir, exitOK)
			},
			finish: applyContainer},
	}
	// vm-vgpu after the reboot: the manager's install, the vGPUs, the labels
	run, err := vgputest.WriteInstaller(t.TempDir(), "550.90.05", "vgpu-kvm")
	require.NoError(t, err)
	for _, c := range vgpuCases {
		c := c
		args := "apply --mode vm-vgpu --yes --vgpu-config-file " + c.configFile(t) + " --vgpu-config " + c.config + " --driver " + run
		applyVGPU := func(t *testing.T, dir string, want int) {
			out, errs, code := gpuprepWith(t, d, append(strings.Fields(args), "--root", dir)...)
			require.Equal(t, want, code, out+errs)
		}
		scenarios = append(scenarios, crashScenario{name: "vgpu-" + c.name, fixture: c.fixture, args: args, vgpu: &c,
			node: func(t *testing.T, dir string) {
				withoutIOMMUArgs(t, dir)
				if c.setup != nil {
					c.setup(t, dir)
				}
				if c.name == "sriov" {
					// 3 VFs per L40S, one more than the config uses: the
					// simulator's making of 16 would be most of the
					// mutating syscalls, and so of the kill points
					for _, g := range []string{"0000:41:00.0", "0000:61:00.0"} {
						require.NoError(t, os.WriteFile(filepath.Join(dir, "sys/bus/pci/devices", g, "sriov_totalvfs"), []byte("3\n"), 0o644))
					}
				}
			},
			setup: func(t *testing.T, dir string) {
				applyVGPU(t, dir, exitNeedReboot)
				simulateReboot(t, dir)
			},
			finish: func(t *testing.T, dir string) { applyVGPU(t, dir, exitOK) }})
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed>>1))

	type prepared struct {
		start                         string // a root where this apply starts, copied for every run
		pristine, before, after, done crashState
		total                         int
	}
	prep := map[string]prepared{}
	copyRoot := func(sc crashScenario, src string) string {
		dir := t.TempDir()
		require.NoError(t, copyTree(src, dir))
		vgpuRoots[dir], initramfsRoots[dir] = sc.vgpu != nil, sc.initramfs
		return dir
	}
	for _, sc := range scenarios {
		// the root where the apply starts, and a clean, traced run on a
		// copy: the states before and after this apply, and how many
		// mutating syscalls it makes
		var p prepared
		p.start = fixtureRoot(t, sc.fixture)
		withTools(t, p.start)
		vgpuRoots[p.start], initramfsRoots[p.start] = sc.vgpu != nil, sc.initramfs
		if sc.node != nil {
			sc.node(t, p.start)
		}
		p.pristine = crashSnap(t, p.start)
		if sc.setup != nil {
			sc.setup(t, p.start)
		}
		p.before = crashSnap(t, p.start)
		dir := copyRoot(sc, p.start)
		require.Equal(t, p.before, crashSnap(t, dir), "the copy")
		n, _, out := runTraced(t, dir, sc, 0)
		require.Greater(t, n, 10, out)
		p.after, p.total = crashSnap(t, dir), n
		sc.finish(t, dir) // from a finished apply, finishing changes nothing more than the steps after it
		p.done = crashSnap(t, dir)
		if sc.vgpu != nil {
			require.NotEmpty(t, p.done.vgpus, out)
		}
		if sc.initramfs {
			// the files compared after each kill include the image: an
			// apply that finishes the job regenerates it
			img := p.done.files[strings.TrimPrefix(offImage, "/")]
			if sc.unbind {
				require.NotContains(t, img, "gpuprep-vfio.conf")
				require.Contains(t, p.before.files[strings.TrimPrefix(offImage, "/")], "== etc/modprobe.d/gpuprep-vfio.conf\n")
			} else {
				require.Contains(t, img, "== etc/modprobe.d/gpuprep-vfio.conf\n")
			}
		}
		prep[sc.name] = p
		t.Logf("%s: %d mutating syscalls", sc.name, n)
	}

	// random points (GPUPREP_CRASH_ALL=1: every point of every scenario):
	// 18 kills per scenario, 12 per vm-vgpu one (each costs about three
	// times as much), 78 in all
	quota, maxKills := map[string]int{}, 0
	for _, sc := range scenarios {
		switch {
		case sc.targetedOnly:
			continue
		case sc.vgpu != nil:
			quota[sc.name] = 12
		default:
			quota[sc.name] = 18
		}
		maxKills += quota[sc.name]
	}
	type point struct{ sc, at int }
	var points []point
	if os.Getenv("GPUPREP_CRASH_ALL") != "" {
		for i, sc := range scenarios {
			for at := 1; at <= prep[sc.name].total; at++ {
				points = append(points, point{i, at})
			}
		}
	} else {
		for i := 0; i < 4*maxKills; i++ {
			points = append(points, point{i % len(scenarios), 1 + rng.IntN(prep[scenarios[i%len(scenarios)].name].total)})
		}
	}
	// afterKill checks a root killed in sc's apply: every file old or new,
	// the journal names every change; then apply (thenApply) or rollback
	// finishes the job.
	afterKill := func(sc crashScenario, p prepared, dir, out, msg string, thenApply bool) {
		var foreign map[string]string
		if sc.vgpu != nil {
			foreign = sc.vgpu.foreign
		}
		// every file is old or new (a temporary file of an interrupted
		// atomic write aside: gpuprep's, or update-initramfs's image.new)
		now := crashSnap(t, dir)
		for path, cur := range now.files {
			if strings.Contains(path, ".gpuprep-tmp-") || strings.HasPrefix(path, "boot/initrd.img-") && strings.HasSuffix(path, ".new") {
				continue
			}
			if _, had := p.before.files[path]; strings.HasSuffix(path, "/") && !had {
				continue // a directory made, its file not yet written: the journal names it (checkJournalAfterKill)
			}
			old, hadOld := p.before.files[path]
			nw, hasNew := p.after.files[path]
			require.True(t, hadOld && cur == old || hasNew && cur == nw, "%s: %s is neither old nor new:\n%s\n%s", msg, path, cur, out)
		}
		for path := range p.before.files {
			_, inNew := p.after.files[path]
			if _, ok := now.files[path]; !ok && inNew {
				t.Fatalf("%s: %s vanished", msg, path)
			}
		}
		checkJournalAfterKill(t, dir, p.before, now, foreign, msg)

		// apply or rollback afterwards finishes the job
		if thenApply {
			sc.finish(t, dir)
			got := crashSnap(t, dir)
			require.Equal(t, p.done.files, got.files, "%s, then applied", msg)
			require.Equal(t, p.done.drivers, got.drivers, "%s, then applied", msg)
			require.Equal(t, vgpuSummary(p.done.vgpus, foreign), vgpuSummary(got.vgpus, foreign), "%s, then applied", msg)
			return
		}
		_, errs, code := gpuprepWith(t, d, "rollback", "--root", dir)
		require.Contains(t, []int{exitOK, exitNeedReboot}, code, "%s: rollback: %s", msg, errs)
		got := crashSnap(t, dir)
		if sc.vgpu == nil {
			require.Equal(t, p.pristine.files, got.files, "%s, then rolled back", msg)
			want := p.pristine.drivers
			if _, err := os.Stat(filepath.Join(dir, "sys/bus/pci/drivers/nouveau")); sc.unloadsNouveau && err != nil { // rollback binds back only to a registered driver
				want = maps.Clone(want)
				for a, d := range want {
					if d == "nouveau" {
						want[a] = ""
					}
				}
			}
			require.Equal(t, want, got.drivers, "%s, then rolled back", msg)
			return
		}
		// vm-vgpu: the manager stays installed (its files and drivers old
		// or new; a GPU killed between nouveau's unloading and nvidia's
		// loading stays unbound), everything else as before the apply; of
		// the vGPUs only the foreign ones remain, all of them once
		// nvidia_vgpu_vfio is loaded
		for _, f := range sortedKeysOf(got.files, p.pristine.files) {
			cur, ok := got.files[f]
			was, had := p.pristine.files[f]
			if enableLink(f) {
				continue // systemctl's (enable, disable), not gpuprep's
			}
			if managerFile(f) {
				nw, hasNew := p.done.files[f]
				require.True(t, ok == had && cur == was || ok == hasNew && cur == nw, "%s, then rolled back: %s is neither old nor new", msg, f)
				continue
			}
			require.True(t, ok == had && cur == was, "%s, then rolled back: %s differs: %q, was %q", msg, f, cur, was)
		}
		for a, d := range got.drivers {
			require.True(t, d == p.pristine.drivers[a] || d == p.done.drivers[a] || d == "" && p.pristine.drivers[a] == "nouveau",
				"%s, then rolled back: %s on %q", msg, a, d)
		}
		for v, m := range got.vgpus {
			require.Equal(t, foreign[v], m, "%s, then rolled back: vGPU %s", msg, v)
		}
		if got.mdevLoaded {
			require.Equal(t, foreign, got.vgpus, "%s, then rolled back", msg)
		}
	}
	kills, scKills := 0, map[string]int{}
	for _, pt := range points {
		sc := scenarios[pt.sc]
		if scKills[sc.name] >= quota[sc.name] && os.Getenv("GPUPREP_CRASH_ALL") == "" {
			continue
		}
		p := prep[sc.name]
		dir := copyRoot(sc, p.start)
		at := pt.at
		_, killed, out := runTraced(t, dir, sc, at)
		if !killed {
			continue
		}
		kills++
		scKills[sc.name]++
		afterKill(sc, p, dir, out, fmt.Sprintf("%s killed at %d", sc.name, at), scKills[sc.name]%2 == 0)
	}
	// killed where update-initramfs runs, after the persistent files were
	// written: the re-run must still regenerate the initramfs (the image is
	// among the files compared), and rollback must remake it without them
	for _, sc := range scenarios {
		if !sc.killAtInitramfs {
			continue
		}
		p := prep[sc.name]
		for _, thenApply := range []bool{true, false} {
			dir := copyRoot(sc, p.start)
			killed, out := runTracedUntil(t, dir, sc, initramfsMarker)
			require.True(t, killed, "%s: update-initramfs never ran: %s", sc.name, out)
			if sc.unbind {
				require.NoFileExists(t, filepath.Join(dir, vfio.ModprobeConf), out)
			} else {
				require.FileExists(t, filepath.Join(dir, vfio.ModprobeConf), out)
			}
			require.Equal(t, p.before.files[strings.TrimPrefix(offImage, "/")], readImage(t, dir), "%s: the image is not remade yet", sc.name)
			afterKill(sc, p, dir, out, sc.name+" killed at update-initramfs", thenApply)
			scKills[sc.name+" at update-initramfs"]++
		}
	}
	require.GreaterOrEqual(t, kills, maxKills-4)
	t.Logf("%d random kills: %v", kills, scKills)
}

// copyTree copies the root src into the empty directory dst: directories,
// regular files with their modes and modification times (the initramfs's
// against the blacklist's matters), symlinks as they are.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return os.MkdirAll(to, fi.Mode().Perm())
		case d.Type()&fs.ModeSymlink != 0:
			l, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(l, to)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if err := os.WriteFile(to, b, fi.Mode().Perm()); err != nil {
			return err
		}
		return os.Chtimes(to, fi.ModTime(), fi.ModTime())
	})
}

// sortedKeysOf is the keys of a and b, sorted.
func sortedKeysOf(a, b map[string]string) []string {
	seen := map[string]bool{}
	var out []string
	for _, m := range []map[string]string{a, b} {
		for k := range m {
			if !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
	}
	sort.Strings(out)
	return out
}
