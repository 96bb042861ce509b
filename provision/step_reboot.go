package provision

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gpuprep/gpuprep/grub"
	"github.com/gpuprep/gpuprep/internal/effect"
	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/journal"
	"github.com/gpuprep/gpuprep/internal/kargs"
	"github.com/gpuprep/gpuprep/internal/kernelrelease"
)

// rebootStep (StepReboot) is where apply stops, or runs systemctl reboot:
// Apply handles it itself (rebootAt), recording the ask with the boot ID;
// it is never run as the other steps are. Nothing it does is undone.
type rebootStep struct{}

func (rebootStep) id() string { return StepReboot }

func (rebootStep) run(context.Context, effect.Effector, *Plan, *Step) error {
	return fmt.Errorf("%s: run by Apply, not as a step", StepReboot)
}

// RebootError is why apply stops when the node has rebooted since apply
// asked for a reboot and the kernel arguments are still not in effect:
// asking again would only repeat itself (and with --reboot, loop).
type RebootError struct {
	Missing []kargs.Param
	Off     []kargs.Param // arguments still running that turn the IOMMU or interrupt remapping off
	Summary string
	// Details: the evidence (boot time against the ask, /proc/cmdline, the
	// bootloader configuration), the likely causes with how to check each,
	// and what to do.
	Details []string
}

func (e *RebootError) Error() string {
	return e.Summary + ":\n  - " + strings.Join(e.Details, "\n  - ")
}

// lastRebootAsk is the newest reboot apply asked for, for reason, that
// rollback has not undone and no later apply has answered (a "done" entry:
// the node had rebooted and the plan found nothing left unexplained).
// Journals written before the reason was recorded asked only for kernel
// arguments.
func lastRebootAsk(entries []journal.Entry, reason string) (journal.Entry, bool) {
	undone := undoneSet(entries)
	var last journal.Entry
	found := false
	for i, e := range entries {
		s := e.Step()
		why := s.Reason
		if why == "" {
			why = RebootForKernelArgs
		}
		if e.Kind != KindStep || e.Command != "apply" || s.ID != StepReboot || why != reason || undone[i] {
			continue
		}
		switch s.State {
		case journal.StepStarted:
			last, found = e, true
		case journal.StepDone: // answered: an apply after that reboot found it had done its work
			found = false
		}
	}
	return last, found
}

// askState is the newest unanswered ask for reason (lastRebootAsk) and,
// when there is one, whether the node has booted since, with the evidence
// (rebootedSince).
func askState(root *host.Root, entries []journal.Entry, reason string) (asked, rebooted bool, evidence string) {
	ask, ok := lastRebootAsk(entries, reason)
	if !ok {
		return false, false, ""
	}
	rebooted, evidence = rebootedSince(root, ask)
	return true, rebooted, evidence
}

func readBootID(root *host.Root) string {
	s, err := root.ReadString(bootIDFile)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(s)
}

// readBootTime is btime from /proc/stat: the boot time in whole seconds
// since the epoch.
func readBootTime(root *host.Root) (time.Time, bool) {
	s, err := root.ReadString(procStat)
	if err != nil {
		return time.Time{}, false
	}
	for _, l := range strings.Split(s, "\n") {
		if v, ok := strings.CutPrefix(l, "btime "); ok {
			if sec, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil && sec > 0 {
				return time.Unix(sec, 0).UTC(), true
			}
		}
	}
	return time.Time{}, false
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// rebootedSince tells whether the node has booted since apply asked for the
// reboot recorded in ask, and the evidence.
//
// The boot ID decides where both the ask and this boot have one: the kernel
// draws a new random one at every boot, so no clock is involved. Otherwise
// (a journal written before gpuprep recorded it, a root without the file)
// the boot time decides: btime, whole seconds since the epoch, later than
// the ask's time truncated to its second. Both are readings of the same
// UTC wall clock, so no time zone comes between them, and truncating the
// ask keeps a boot within the ask's own second (which cannot be the reboot
// it asked for: shutting down takes longer) on the "not yet" side. What a
// clock comparison cannot see is the clock being set: the kernel derives
// btime from the current wall clock minus the uptime, so a clock stepped
// forward (an NTP correction) by more than the uptime at the ask moves
// btime past the ask without a reboot, and one stepped back can hide a
// reboot; the boot ID is immune to both, which is why it is preferred.
func rebootedSince(root *host.Root, ask journal.Entry) (bool, string) {
	bt, btOK := readBootTime(root)
	booted := "unknown (no btime in /proc/stat)"
	if btOK {
		booted = stamp(bt) + " (btime in /proc/stat)"
	}
	if cur := readBootID(root); ask.Device != "" && cur != "" {
		if cur == ask.Device {
			return false, ""
		}
		ev := fmt.Sprintf("the node has booted since gpuprep apply asked for the reboot at %s (%s): the boot ID changed from %s to %s (%s); it booted at %s",
			stamp(ask.Time), journal.Path, ask.Device, cur, bootIDFile, booted)
		if btOK && bt.Unix() <= ask.Time.Unix() {
			ev += ", which the clock puts before the ask: the clock was set between the two, and the boot ID decides"
		}
		return true, ev
	}
	if !btOK || bt.Unix() <= ask.Time.Unix() {
		return false, ""
	}
	return true, fmt.Sprintf("the node booted at %s, after gpuprep apply asked for the reboot at %s (%s); compared in whole seconds of UTC wall-clock time (no boot ID was recorded to compare)",
		booted, stamp(ask.Time), journal.Path)
}

// diagnoseReboot returns, when the journal shows apply asked for a reboot,
// the node has booted since, and the running kernel still lacks some of
// want, why apply cannot go on: the evidence, what the bootloader
// configuration holds and the likely causes with how to check them. It
// returns nil otherwise (no reboot asked, none done yet: reboot pending).
func (p *Plan) diagnoseReboot(boot *grub.Boot, gp *grub.Plan, want []kargs.Param, notOff []string) *RebootError {
	root := p.root
	entries, _ := journal.Read(root)
	ask, ok := lastRebootAsk(entries, RebootForKernelArgs)
	if !ok {
		return nil
	}
	rebooted, evidence := rebootedSince(root, ask)
	if !rebooted {
		return nil
	}
	running := runningArgs(root)
	missing, off := kernelLacks(running, want, notOff)
	if len(missing) == 0 && len(off) == 0 {
		return nil
	}
	raw, _ := kargs.ReadString(root, "/proc/cmdline")
	kver, _ := kernelrelease.Running(root)
	kver = strings.TrimSpace(kver)
	d := &RebootError{Missing: missing, Off: off,
		Summary: fmt.Sprintf("the node has rebooted since gpuprep apply asked for a reboot, and the running kernel still %s", kernelWrong(missing, off))}
	d.Details = append(d.Details, evidence, fmt.Sprintf("running kernel %s, /proc/cmdline: %s", orNone(kver), strings.TrimSpace(raw)))

	conf, src, cerr := boot.ConfiguredArgs(kver)
	if cerr != nil {
		d.Details = append(d.Details, fmt.Sprintf("bootloader %s: cannot read what it configures for the next boot: %v", boot.Kind, cerr))
	} else {
		d.Details = append(d.Details, p.configDetails(boot, gp, conf, src, kver, missing, off, entries, ask)...)
	}
	if others := otherKernels(root, kver); len(others) > 0 {
		d.Details = append(d.Details, fmt.Sprintf("other kernels are installed (%s): if the default boot entry is one of them, or the arguments went only to the entries of another kernel, the kernel that boots lacks them; check that uname -r is the kernel you expect",
			strings.Join(others, ", ")))
	}
	d.Details = append(d.Details, "apply does not ask for another reboot for this, nor run one with --reboot: fix the cause, reboot the node yourself and run gpuprep apply again; or run gpuprep rollback to undo what apply changed and start over")
	return d
}

// configDetails says whether the bootloader configuration conf (read from
// src) is right for the next boot and, either way, what is likely wrong.
func (p *Plan) configDetails(boot *grub.Boot, gp *grub.Plan, conf []kargs.Param, src, kver string, missing, off []kargs.Param, entries []journal.Entry, ask journal.Entry) []string {
	lacks, still := configLacks(conf, missing), configStillOff(conf, off)
	if len(lacks) > 0 || len(still) > 0 {
		return []string{p.configWrongLine(boot, gp, src, lacks, still, entries, ask)}
	}
	right := []string{}
	if len(missing) > 0 {
		right = append(right, "has "+argList(missing))
	}
	if len(off) > 0 {
		right = append(right, "does not have "+argList(off))
	}
	out := []string{fmt.Sprintf("bootloader %s: %s %s for the next boot, so the configuration is right and the boot did not use it", boot.Kind, src, strings.Join(right, " and "))}
	if len(missing) > 0 {
		return append(out, rebootCauses(p.root, boot, missing, kver, src)...)
	}
	return append(out, offCauses(p.root, boot, off)...)
}

// configLacks are the arguments of missing that conf does not satisfy,
// each with the value conf has for its key, if any.
func configLacks(conf, missing []kargs.Param) []string {
	var lacks []string
	for _, w := range missing {
		if kargs.Satisfied(conf, w) {
			continue
		}
		s := w.String()
		if have, ok := kargs.Last(conf, w.Key); ok {
			s += " (it has " + have.String() + ")"
		}
		lacks = append(lacks, s)
	}
	return lacks
}

// configStillOff are the arguments of off (turning the IOMMU or remapping
// off) that conf still has.
func configStillOff(conf, off []kargs.Param) []string {
	var still []string
	for _, o := range off {
		k := kargs.Norm(o.Key)
		if k == "nointremap" {
			k = "intremap"
		}
		if len(kargs.OffIndexes(conf, k)) > 0 {
			still = append(still, o.String())
		}
	}
	return still
}

// configWrongLine says what the configuration lacks or still has, and how
// it came to be so: rewritten since the kernel-args step, or never set.
func (p *Plan) configWrongLine(boot *grub.Boot, gp *grub.Plan, src string, lacks, still []string, entries []journal.Entry, ask journal.Entry) string {
	var wrong []string
	if len(lacks) > 0 {
		wrong = append(wrong, "lacks "+strings.Join(lacks, ", "))
	}
	if len(still) > 0 {
		wrong = append(wrong, "still has "+strings.Join(still, ", "))
	}
	line := fmt.Sprintf("bootloader %s: %s %s now", boot.Kind, src, strings.Join(wrong, " and "))
	if at, ok := kernelArgsDone(entries, ask); ok {
		line += fmt.Sprintf("; gpuprep apply's kernel-args step configured them at %s, so something rewrote the configuration since (configuration management, a package's scripts, cloud-init, a hand edit): find what, then gpuprep grub ensure --mode %s puts them back", stamp(at), p.opts.Mode)
	} else {
		line += fmt.Sprintf(": gpuprep grub ensure --mode %s configures them", p.opts.Mode)
	}
	if gp.Changed() {
		line += " (gpuprep plan shows no kernel-args step while this stands: apply does not change the configuration until the reboot is explained)"
	}
	return line
}

// kernelArgsDone is when the newest kernel-args step recorded done before
// the reboot ask finished.
func kernelArgsDone(entries []journal.Entry, ask journal.Entry) (time.Time, bool) {
	undone := undoneSet(entries)
	var at time.Time
	ok := false
	for i, e := range entries {
		if e.Time.After(ask.Time) {
			break
		}
		if s := e.Step(); e.Kind == KindStep && e.Command == "apply" && s.ID == StepKernelArgs && s.State == journal.StepDone && !undone[i] {
			at, ok = e.Time, true
		}
	}
	return at, ok
}

// otherKernels lists the kernels with an image under /boot or /lib/modules
// other than kver.
func otherKernels(root *host.Root, kver string) []string {
	seen := map[string]bool{kver: true}
	var out []string
	add := func(k string) {
		if k != "" && !seen[k] && !strings.Contains(k, "rescue") {
			seen[k] = true
			out = append(out, k)
		}
	}
	for _, n := range root.Names("/boot") {
		if k, ok := strings.CutPrefix(n, "vmlinuz-"); ok {
			add(k)
		}
	}
	for _, dir := range []string{"/lib/modules", "/usr/lib/modules"} {
		for _, k := range root.Names(dir) {
			if root.Exists(dir + "/" + k + "/vmlinuz") {
				add(k)
			}
		}
	}
	sort.Strings(out)
	return out
}

// offCauses are the likely reasons a boot still got arguments that turn
// the IOMMU or interrupt remapping off (off) although the configuration no
// longer has them.
func offCauses(root *host.Root, boot *grub.Boot, off []kargs.Param) []string {
	args := argList(off)
	if boot.Kind == grub.KindGRUB || boot.Kind == grub.KindGRUB2 {
		for _, cfg := range []string{"/boot/grub/grub.cfg", "/boot/grub2/grub.cfg"} {
			if data, err := root.ReadFile(cfg); err == nil {
				for _, o := range off {
					if strings.Contains(string(data), o.String()) {
						regen := regenCommand(boot)
						return []string{fmt.Sprintf("likely cause: the boot menu %s still has %s: it was not regenerated after the change; run %s, check with grep -c -- %s %s, then reboot", cfg, o, regen, host.ShellQuote([]string{o.String()}), cfg)}
					}
				}
				break
			}
		}
	}
	return []string{fmt.Sprintf("likely causes: the node booted another entry or kernel whose arguments still have %s (a recovery or custom entry, a saved default, another BLS entry: grubby --info=ALL), or it was typed at the console", args)}
}

// rebootCauses are the likely reasons a boot did not use a configuration
// that has the arguments, for each kind of bootloader, with how to check.
func rebootCauses(root *host.Root, boot *grub.Boot, missing []kargs.Param, kver, src string) []string {
	args := argList(missing)
	if kver == "" {
		kver = "$(uname -r)"
	}
	switch boot.Kind {
	case grub.KindGRUB, grub.KindGRUB2:
		return grubRebootCauses(root, boot, missing)
	case grub.KindBLS:
		return []string{
			fmt.Sprintf("likely causes: the default entry is not %s (grubby --default-kernel; grubby --info=DEFAULT shows its args); grubby did not update the entry that booted (grubby --info=ALL); entries whose options are $kernelopts take them from /boot/grub2/grubenv (grub2-editenv - list); a choice or an edited command line at the console", src),
			fmt.Sprintf("check: grubby --info=/boot/vmlinuz-%s must show %s in args", kver, args),
		}
	case grub.KindSystemdBoot:
		return []string{
			fmt.Sprintf("likely causes: kernel-install did not regenerate the entry of kernel %s from %s, or wrote it to another EFI system partition (run kernel-install add %s /lib/modules/%s/vmlinuz); a unified kernel image (UKI) carries its own command line and ignores %s (with Secure Boot it also refuses overrides); the default entry is another one (loader.conf default, bootctl set-default)", kver, src, kver, kver, src),
			fmt.Sprintf("check: bootctl status shows the entry that booted and bootctl list its options, which must carry %s", args),
		}
	case grub.KindKernelstub:
		return []string{
			fmt.Sprintf("likely causes: kernelstub records the options in %s and writes them to the EFI system partition's loader entry and NVRAM when it runs: a failed or interrupted run leaves the old ones (run kernelstub -v again); the firmware booted another entry, an older NVRAM entry or GRUB (efibootmgr -v shows BootCurrent and BootOrder)", src),
			fmt.Sprintf("check: kernelstub --print-config -v shows the kernel boot options, and the ESP's loader entry (/boot/efi/loader/entries/*-current.conf) must carry %s", args),
		}
	case grub.KindProxmox:
		return []string{
			fmt.Sprintf("likely causes: proxmox-boot-tool refresh did not copy %s to every ESP in %s (it skips an ESP whose /dev/disk/by-uuid link is missing, and stops when the first line of %s lacks root=); the firmware booted another disk's ESP, or another bootloader than the ESPs' %s (efibootmgr -v names it); a kernel pinned with proxmox-boot-tool kernel pin; a choice or an edited command line at the console", src, grub.ProxmoxBootUUIDs, grub.KernelCmdlineFile, espMode(boot)),
			fmt.Sprintf("check: proxmox-boot-tool status shows what each ESP boots; run proxmox-boot-tool refresh, and the options of loader/entries/proxmox-%s.conf (systemd-boot) or the linux line of grub/grub.cfg (GRUB) on each ESP must carry %s", kver, args),
		}
	case grub.KindRpmOstree:
		return []string{
			"likely causes: rpm-ostree stages the change in a new deployment, and the node booted the previous one: a rollback (greenboot, or chosen at the boot menu), or the staged deployment failed to finalize at shutdown (journalctl -b -1 -u ostree-finalize-staged)",
			fmt.Sprintf("check: rpm-ostree status shows which deployment booted (●), and rpm-ostree kargs the arguments of the next one, which must carry %s", args),
		}
	}
	return nil
}

// grubRebootCauses are the likely reasons a GRUB boot did not use a
// configuration that has the arguments missing, read from its boot menu.
func grubRebootCauses(root *host.Root, boot *grub.Boot, missing []kargs.Param) []string {
	args := argList(missing)
	regen := regenCommand(boot)
	cfg := grubMenu(root)
	if cfg == "" {
		return []string{fmt.Sprintf("likely cause: the boot menu was not regenerated, or lives elsewhere: there is no /boot/grub/grub.cfg or /boot/grub2/grub.cfg here; run %s, or find the menu the firmware loads (efibootmgr -v names the loader; an EFI system partition's grub.cfg may point to another disk) and check it has %s", regen, args)}
	}
	data, _ := root.ReadFile(cfg)
	if absent := absentArgs(string(data), missing); len(absent) > 0 {
		s := fmt.Sprintf("likely cause: the boot menu %s does not contain %s: it was not regenerated after the change", cfg, strings.Join(absent, " "))
		if menuOlderThanDefaults(root, cfg) {
			s += fmt.Sprintf(" (it is older than %s)", grub.DefaultsFile)
		}
		return []string{s + fmt.Sprintf("; run %s, check with grep -c -- %s %s, then reboot", regen, host.ShellQuote([]string{missing[0].String()}), cfg)}
	}
	return []string{
		fmt.Sprintf("%s contains %s, so the node booted another entry or another menu; likely causes: the recovery entry (it gets GRUB_CMDLINE_LINUX only, not GRUB_CMDLINE_LINUX_DEFAULT); an entry picked by GRUB_DEFAULT or a saved default (grub-editenv list); a custom entry (/etc/grub.d/40_custom) with its own linux line; a choice or an edited command line at the console; on UEFI, a grub.cfg on the EFI system partition or on another disk (efibootmgr -v)", cfg, args),
		fmt.Sprintf("check: the menuentry in %s whose linux line loads the kernel of BOOT_IMAGE in /proc/cmdline must carry %s", cfg, args),
	}
}

// regenCommand is how to regenerate boot's GRUB menu, as a shell line.
func regenCommand(boot *grub.Boot) string {
	if boot.Regenerate != nil {
		return host.ShellQuote(boot.Regenerate)
	}
	return "update-grub (or grub-mkconfig -o /boot/grub/grub.cfg, grub2-mkconfig -o /boot/grub2/grub.cfg)"
}

// grubMenu is the GRUB boot menu that exists, or "" for none.
func grubMenu(root *host.Root) string {
	for _, c := range []string{"/boot/grub/grub.cfg", "/boot/grub2/grub.cfg"} {
		if root.Exists(c) {
			return c
		}
	}
	return ""
}

// absentArgs are the arguments of missing that the menu text lacks.
func absentArgs(menu string, missing []kargs.Param) []string {
	var absent []string
	for _, w := range missing {
		if !strings.Contains(menu, w.String()) {
			absent = append(absent, w.String())
		}
	}
	return absent
}

// menuOlderThanDefaults is whether the menu cfg was last written before
// grub.DefaultsFile.
func menuOlderThanDefaults(root *host.Root, cfg string) bool {
	cf, err := root.Stat(cfg)
	if err != nil {
		return false
	}
	df, err := root.Stat(grub.DefaultsFile)
	return err == nil && df.ModTime().After(cf.ModTime())
}

// espMode names what a proxmox-boot-tool node's ESPs boot, as far as gpuprep
// can tell.
func espMode(boot *grub.Boot) string {
	if boot.ESPMode == "" {
		return "systemd-boot or GRUB"
	}
	return boot.ESPMode
}
