package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpuprep/gpuprep/internal/effect"
	"github.com/gpuprep/gpuprep/internal/sanitize"
	"github.com/gpuprep/gpuprep/provision"
	"github.com/gpuprep/gpuprep/report"
)

func init() { register(newRollbackCmd) }

type rollbackCmd struct {
	g          *globals
	to         string
	force      bool
	forceFiles bool
	kubeconfig string
	output     string
}

func newRollbackCmd(g *globals) *cobra.Command {
	c := &rollbackCmd{g: g}
	cmd := &cobra.Command{
		Use:   "rollback [--to STEP] [--force-files]",
		Short: "Undo what gpuprep changed on this node, newest first, from the journal",
		Long: `rollback undoes, newest first, the changes /var/lib/gpuprep/journal.jsonl records
(gpuprep apply's steps, and grub, vfio, vgpu and label changes): each file back to
its content before gpuprep first changed it, byte-identical from its backup (files
gpuprep created are removed, units it created disabled first, and the directories
it created for them once empty), each vGPU gpuprep
created removed (mdev remove, or current_vgpu_type 0; one a VM holds open only
with --force), each device back on the driver it had, each label
set through the API back to its value (removed when it was new); then the boot
menu and the initramfs are regenerated where their files changed, and kernel
arguments apply changed through the bootloader's own tool are changed back
through it: grubby --update-kernel=ALL --remove-args=… (and --args=… for those
it removed), kernelstub --delete-options … (--add-options …), rpm-ostree kargs
--delete-if-present=… (--append-if-missing=…), and for systemd-boot
kernel-install add for each kernel once /etc/kernel/cmdline is restored. An
argument that some boot entries already had (or lacked) before apply is left as
it is, with a note: the tool changes every entry at once. Changes gpuprep grub
ensure/remove made through such a tool are undone the same way (those an older
gpuprep made, which it did not journal, are not: it says so). It
says when the kernel arguments of the next boot differ from the running ones:
reboot then. What it undid is recorded, so a second rollback changes nothing.

A file is undone only while it holds what gpuprep last wrote there (the journal
records its SHA-256): one edited since is left as it is, named with the backup to
restore it from by hand, unless --force-files, which undoes it anyway. Whenever
rollback overwrites or removes a file that way it first saves what the file held
beside it (FILE.gpuprep-TIMESTAMP.bak) and names that backup. A file whose backup
is missing (or no longer holds what it backed up) cannot be restored: it is left
as it is and named; put the backup back and run rollback again. Files recorded by
a gpuprep older than these checks are restored as before, with a note, their
content saved first.

--to STEP keeps the changes up to the last completed apply step STEP
(kernel-args, vfio-bind, vfio-unbind, vgpu-install, vgpu-devices, label) and undoes
those after it.

Each device gets a line saying what became of it: DEV: FROM -> TO when it is back
on its driver from before gpuprep, or why it is left where it is. A device
something else moved since gpuprep did (a driver gpuprep never moved it to) is
left there and the rollback is incomplete (exit 1) until rollback --force. A
device whose driver before gpuprep is not loaded (nouveau, which apply unloaded;
rollback does not load it) is left unbound, and a GPU on a board with NVSwitches
is left on vfio-pci (unless --force): the next boot gives them back their driver
(exit 4). Such devices are listed after "Rolled back, except" (JSON: "left",
with "until": reboot, force or manual; "rebootReasons" says why a reboot is
needed), and the journal keeps their entries, so a later rollback (after the
boot, or with --force) finishes them.

rollback does not uninstall the vGPU manager: that is a package operation
(nvidia-installer --uninstall, or the package manager); it says so. A version
change gpuprep vgpu install made (--driver of another version) it undoes: the
version installed now is uninstalled the way it was installed, the kept
previous one installed again and its vGPUs made again (refused while a VM
holds a vGPU: the journal keeps it, run rollback again).

Exit codes: 0 done (or nothing to undo), 1 something could not be undone (a file
edited since or without its backup, a device moved since, a device or command that
failed: the journal keeps it all, run again), 2 usage error, 4 done and a reboot is
needed (the kernel arguments, or a device's driver, of the next boot differ from
the running ones).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return c.run(cmd) },
	}
	f := cmd.Flags()
	f.StringVar(&c.to, "to", "", "keep the changes up to this completed step, undo those after it")
	f.BoolVar(&c.force, "force", false, "unbind from VFIO, or remove a vGPU, even while a process (a VM) holds it open; move back a device something else moved since gpuprep did")
	f.BoolVar(&c.forceFiles, "force-files", false, "restore (or remove) files even when edited since gpuprep wrote them, saving their content first")
	f.StringVar(&c.kubeconfig, "kubeconfig", "", "kubeconfig for labels set through the API (default: the one apply or label used)")
	f.StringVarP(&c.output, "output", "o", "text", "output format: text or json")
	return cmd
}

func (c *rollbackCmd) run(cmd *cobra.Command) error {
	if c.output != "text" && c.output != "json" {
		return usageErr("--output %q: want text or json", c.output)
	}
	root, err := c.g.hostRoot()
	if err != nil {
		return err
	}
	sysfs, runner, err := c.g.dep().provisionKernel(root)
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	env := effect.Effector{Root: root, Sysfs: sysfs, Runner: runner}
	if c.output == "text" {
		out = sanitize.NewWriter(out)
		env.Out = out
	}
	res, rerr := provision.Rollback(cmd.Context(), env, provision.RollbackOptions{To: c.to, Force: c.force, ForceFiles: c.forceFiles, Kubeconfig: c.kubeconfig})
	var te *provision.ToError
	if errors.As(rerr, &te) {
		return usageErr("%v", rerr)
	}
	if res == nil {
		return &exitError{code: exitUnknown, err: rerr}
	}
	if c.output == "json" {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rollbackDoc{APIVersion: report.APIVersion, Kind: rollbackKind, RollbackResult: res}); err != nil {
			return err
		}
	} else {
		for _, n := range res.Notes {
			fmt.Fprintln(out, "note: "+n)
		}
		if rerr == nil {
			fmt.Fprint(out, rollbackSummary(res))
		}
	}
	if rerr != nil {
		return &exitError{code: exitNotReady, err: rerr}
	}
	if res.Reboot {
		return &exitError{code: exitNeedReboot}
	}
	return nil
}

// rollbackSummary is rollback's closing text: what it did, the devices it
// left off their driver from before gpuprep (each also had its own line),
// and why a reboot is needed.
func rollbackSummary(res *provision.RollbackResult) string {
	var b strings.Builder
	// grouped by what they are on and were on: "on vfio-pci (was nvidia): A, B"
	var groups []string
	byGroup := map[string][]string{}
	for _, l := range res.Left {
		g := fmt.Sprintf("%s (was %s)", l.State(), orNone(l.Want))
		if _, ok := byGroup[g]; !ok {
			groups = append(groups, g)
		}
		byGroup[g] = append(byGroup[g], l.Target)
	}
	var left []string
	for _, g := range groups {
		sort.Strings(byGroup[g])
		left = append(left, g+": "+strings.Join(byGroup[g], ", "))
	}
	devices := "1 device not yet back on its driver"
	if n := len(res.Left); n > 1 {
		devices = fmt.Sprintf("%d devices not yet back on their driver", n)
	}
	switch {
	case len(res.Undone) == 0 && len(left) == 0:
		b.WriteString("Nothing to roll back.\n")
	case len(left) == 0:
		b.WriteString("Rolled back.\n")
	case len(res.Undone) == 0:
		fmt.Fprintf(&b, "Nothing more to roll back now; %s from before gpuprep: %s.\n", devices, strings.Join(left, "; "))
	default:
		fmt.Fprintf(&b, "Rolled back, except %s from before gpuprep: %s.\n", devices, strings.Join(left, "; "))
	}
	if res.Reboot {
		why := res.RebootReasons
		if len(why) == 0 {
			why = []string{"the kernel arguments of the next boot differ from the running ones"}
		}
		w := strings.Join(why, "; ")
		fmt.Fprintf(&b, "%s%s: reboot the node.\n", strings.ToUpper(w[:1]), w[1:])
	}
	return b.String()
}
