package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
)

// checkArgState is what check's iommu.cmdline finding for one wanted
// argument says, in grub show's words.
func checkArgState(f checkFinding) string {
	m := f.Message
	switch {
	case strings.HasPrefix(m, "not needed"):
		return "not-needed"
	case strings.Contains(m, "kernels installed later"):
		return "not-for-later-kernels"
	case strings.Contains(m, "boot menu") && strings.Contains(m, "does not have"):
		return "configured-not-in-boot-menu"
	case strings.Contains(m, "reboot pending"):
		return "configured-reboot-pending"
	case strings.Contains(m, "not effective after the last boot"):
		return "configured-but-not-effective"
	case strings.Contains(m, "the next boot loses it"):
		return "running-not-configured"
	case f.Status == "pass" && strings.HasPrefix(m, "in effect"):
		return "ok"
	case strings.Contains(m, "missing from") || strings.Contains(m, "not in "):
		return "missing"
	}
	return "unclassified: " + f.Status + ": " + m
}

type checkFinding struct {
	Check, Status, Subject, Message, Remedy, FixCommand string
}

// For every bootloader fixture in every state, check's kernel-argument
// verdict and grub show's state of each wanted argument are the same, and
// are the fixture's state; each names the file the loader really reads.
// (Pop!_OS: check read no kernelstub configuration and called a configured
// argument missing; Proxmox on systemd-boot: both read /etc/default/grub,
// which that node never boots from.)
func TestCheckAndGrubShowAgreeOnEveryBootloader(t *testing.T) {
	source := map[string]string{
		"grub-debian":          "/etc/default/grub",
		"grub-rhel-bls":        "/boot/loader/entries/6a9857a393724b7a981ebb5b8495b9ea-5.14.0-427.13.1.el9_4.x86_64.conf",
		"systemd-boot":         "/etc/kernel/cmdline",
		"kernelstub":           "/etc/kernelstub/configuration",
		"proxmox-systemd-boot": "/etc/kernel/cmdline",
		"proxmox-grub":         "/etc/default/grub",
		"proxmox-plain-grub":   "/etc/default/grub",
		"grub-dropin-only":     "/etc/default/grub.d/50-cloudimg-settings.cfg",
	}
	want := map[string]string{fixture.BootMissing: "missing", fixture.BootPending: "configured-reboot-pending", fixture.BootRunning: "ok"}
	// Proxmox VE's 6.8 kernel and Ubuntu 24.04's enable the Intel IOMMU by
	// default (fixture.nobleConfig: Ubuntu's annotations, which Proxmox
	// builds from): not running, intel_iommu=on is not needed there, and
	// both say so
	defaultOn := map[string]string{"proxmox-systemd-boot": "6.8.12-4-pve", "proxmox-grub": "6.8.12-4-pve", "proxmox-plain-grub": "6.8.12-4-pve", "grub-dropin-only": "6.8.0-45-generic"}
	require.ElementsMatch(t, fixture.BootLoaders(), mapKeys(source))
	for _, loader := range fixture.BootLoaders() {
		for _, state := range fixture.BootStates {
			t.Run(loader+"/"+state, func(t *testing.T) {
				root := t.TempDir()
				b := fixture.New(root)
				fixture.BootChain(loader, state)(b)
				require.NoError(t, b.Err())

				out, errs, code := gpuprep(t, "grub", "show", "--root", root, "-o", "json")
				require.Equal(t, 0, code, errs)
				var show showReport
				require.NoError(t, json.Unmarshal([]byte(out), &show), out)
				require.Equal(t, source[loader], show.Source, out)

				out, _, _ = gpuprep(t, "check", "--root", root, "--mode", "vm-passthrough", "-o", "json")
				var rep struct {
					Findings []checkFinding `json:"findings"`
				}
				require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
				byArg := map[string]checkFinding{}
				for _, f := range rep.Findings {
					if f.Check == "iommu.cmdline" {
						byArg[f.Subject] = f
					}
				}
				require.Len(t, show.Args, 2, out)
				for _, a := range show.Args {
					f, ok := byArg[a.Wanted]
					require.True(t, ok, "check has no finding for %s: %s", a.Wanted, out)
					if k := defaultOn[loader]; k != "" && a.Wanted == "intel_iommu=on" && state != fixture.BootRunning {
						require.Equal(t, "not-needed", a.State, "grub show, %s: %+v", a.Wanted, a)
						require.Equal(t, a.State, checkArgState(f), "check, %s: %+v", a.Wanted, f)
						require.Contains(t, f.Message, "CONFIG_INTEL_IOMMU_DEFAULT_ON=y in /boot/config-"+k)
						require.Empty(t, f.FixCommand)
						continue
					}
					require.Equal(t, want[state], a.State, "grub show, %s: %+v", a.Wanted, a)
					require.Equal(t, a.State, checkArgState(f), "check, %s: %+v", a.Wanted, f)
					if state != fixture.BootRunning {
						require.Contains(t, f.Message, source[loader], "check names the file this loader reads")
					}
					if state == fixture.BootMissing {
						require.Equal(t, "gpuprep grub ensure --mode vm-passthrough", f.FixCommand)
					}
				}
			})
		}
	}
}

func mapKeys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// bootChainRoot builds fixture.BootChain(loader, state) into a temporary root.
func bootChainRoot(t *testing.T, loader, state string) string {
	t.Helper()
	root := t.TempDir()
	b := fixture.New(root)
	fixture.BootChain(loader, state)(b)
	require.NoError(t, b.Err())
	return root
}

// On Proxmox VE whose ESPs proxmox-boot-tool keeps with systemd-boot, grub
// ensure edits /etc/kernel/cmdline (not /etc/default/grub, which that node
// never boots from) and runs proxmox-boot-tool refresh: shown by --dry-run,
// journalled with a backup, and undone by rollback, which refreshes the ESPs
// from the restored file. grub show and plan read and edit the same file.
func TestGrubEnsureProxmoxSystemdBoot(t *testing.T) {
	run, d := fakeGrubRunner(t)
	root := bootChainRoot(t, "proxmox-systemd-boot", fixture.BootMissing)
	grubBefore, cmdBefore := read(t, root, "/etc/default/grub"), read(t, root, "/etc/kernel/cmdline")

	out, errs, code := gpuprepWith(t, d, "grub", "show", "--root", root)
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, "bootloader: proxmox-boot-tool, ESPs with systemd-boot: booted by systemd-boot 252.33-1~deb12u1 (EFI variable LoaderInfo) (/etc/kernel/cmdline)\n")

	out, errs, code = gpuprepWith(t, d, "grub", "ensure", "--mode", "vm-passthrough", "--root", root, "--dry-run")
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, "--- a/etc/kernel/cmdline\n+++ b/etc/kernel/cmdline\n")
	// intel_iommu=on changes nothing on Proxmox VE's default-on 6.8 kernel (fixture.pveConfig)
	require.Contains(t, out, "left out: intel_iommu=on: not needed, the kernel enables the Intel IOMMU by default (CONFIG_INTEL_IOMMU_DEFAULT_ON=y in /boot/config-6.8.12-4-pve)")
	require.Contains(t, out, "-root=ZFS=rpool/ROOT/pve-1 boot=zfs\n+root=ZFS=rpool/ROOT/pve-1 boot=zfs iommu=pt\n")
	require.Contains(t, out, "would run: proxmox-boot-tool refresh\n")
	require.NotContains(t, out, "/etc/default/grub")
	require.Empty(t, run.Calls)
	require.Equal(t, cmdBefore, read(t, root, "/etc/kernel/cmdline"))

	var p planJSON
	out, errs, code = gpuprepWith(t, d, "plan", "--root", root, "--mode", "vm-passthrough", "-o", "json")
	require.Equal(t, 0, code, errs)
	require.NoError(t, json.Unmarshal([]byte(out), &p), out)
	require.Equal(t, "kernel-args", p.ids()[0], out)
	require.Contains(t, out, `"/etc/kernel/cmdline"`)
	require.Contains(t, out, "proxmox-boot-tool refresh")
	require.NotContains(t, out, `"/etc/default/grub"`)

	out, errs, code = gpuprepWith(t, d, "grub", "ensure", "--mode", "vm-passthrough", "--root", root)
	require.Equal(t, exitNeedReboot, code, out+errs)
	require.Contains(t, out, "wrote /etc/kernel/cmdline\nran: proxmox-boot-tool refresh\n")
	require.Equal(t, [][]string{{"proxmox-boot-tool", "refresh"}}, run.Calls)
	require.Equal(t, "root=ZFS=rpool/ROOT/pve-1 boot=zfs iommu=pt\n", read(t, root, "/etc/kernel/cmdline"))
	require.Equal(t, grubBefore, read(t, root, "/etc/default/grub"))
	ents := journalEntries(t, root)
	require.Len(t, ents, 2)
	require.Equal(t, "/etc/kernel/cmdline", ents[1].Path)
	require.Equal(t, cmdBefore, read(t, root, ents[1].Backup))

	out, errs, code = gpuprepWith(t, d, "grub", "show", "--root", root, "-o", "json")
	require.Equal(t, 0, code, errs)
	var show showReport
	require.NoError(t, json.Unmarshal([]byte(out), &show))
	require.Equal(t, "not-needed", show.Args[0].State, out) // intel_iommu=on
	require.Equal(t, "configured-reboot-pending", show.Args[1].State, out)

	run.Calls = nil
	k := simulatedKernel(t, d)
	out, errs, code = gpuprepWith(t, d, "rollback", "--root", root)
	require.Equal(t, exitOK, code, out+errs)
	require.Equal(t, cmdBefore, read(t, root, "/etc/kernel/cmdline"))
	require.Contains(t, (*k).Commands, []string{"proxmox-boot-tool", "refresh"}, "the ESPs get the restored file")
	journalAllUndone(t, root)
}

// systemd-boot through kernel-install: /etc/kernel/cmdline has the
// arguments but the running kernel's entry, which kernel-install makes from
// it, does not (kernel-install did not run again, or failed): the next boot
// goes without them. grub show and check say so alike (it was "reboot
// pending"), and grub ensure runs kernel-install add again with no edit.
func TestSystemdBootEntryNotMadeAgain(t *testing.T) {
	root := bootChainRoot(t, "systemd-boot", fixture.BootPending)
	entry := "/boot/loader/entries/6a9857a393724b7a981ebb5b8495b9ea-6.9.1-arch1-1.conf"
	require.NoError(t, fixture.New(root).File(entry, strings.Replace(read(t, root, entry), " "+fixture.BootArgs, "", 1)).Err())

	out, errs, code := gpuprep(t, "grub", "show", "--root", root, "-o", "json")
	require.Equal(t, 0, code, errs)
	var show showReport
	require.NoError(t, json.Unmarshal([]byte(out), &show))
	out, _, _ = gpuprep(t, "check", "--root", root, "--mode", "vm-passthrough", "-o", "json")
	var rep struct {
		Findings []checkFinding `json:"findings"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	for _, a := range show.Args {
		require.Equal(t, "configured-not-in-boot-menu", a.State, "%+v", a)
		require.Contains(t, a.Reason, "kernel-install add 6.9.1-arch1-1 /lib/modules/6.9.1-arch1-1/vmlinuz")
		for _, f := range rep.Findings {
			if f.Check == "iommu.cmdline" && f.Subject == a.Wanted {
				require.Equal(t, a.State, checkArgState(f), "%+v", f)
				require.Contains(t, f.Remedy, "kernel-install add 6.9.1-arch1-1")
			}
		}
	}

	run, d := fakeGrubRunner(t)
	out, errs, code = gpuprepWith(t, d, "grub", "ensure", "--mode", "vm-passthrough", "--root", root, "--dry-run")
	require.Equal(t, 0, code, errs)
	require.NotContains(t, out, "--- a/")
	require.Contains(t, out, "would run: kernel-install add 6.9.1-arch1-1 /lib/modules/6.9.1-arch1-1/vmlinuz\n")
	require.Empty(t, run.Calls)
}

// Pop!_OS: kernelstub's configuration has the arguments but its loader entry
// (what systemd-boot boots) does not: kernelstub did not run since. grub
// show and check say the next boot goes without them, and grub ensure runs
// kernelstub to write the entry again.
func TestKernelstubEntryNotWrittenAgain(t *testing.T) {
	root := bootChainRoot(t, "kernelstub", fixture.BootPending)
	entry := "/boot/efi/loader/entries/Pop_OS-current.conf"
	require.NoError(t, fixture.New(root).File(entry, strings.Replace(read(t, root, entry), " "+fixture.BootArgs, "", 1)).Err())

	out, errs, code := gpuprep(t, "grub", "show", "--root", root, "-o", "json")
	require.Equal(t, 0, code, errs)
	var show showReport
	require.NoError(t, json.Unmarshal([]byte(out), &show))
	out, _, _ = gpuprep(t, "check", "--root", root, "--mode", "vm-passthrough", "-o", "json")
	var rep struct {
		Findings []checkFinding `json:"findings"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	for _, a := range show.Args {
		require.Equal(t, "configured-not-in-boot-menu", a.State, "%+v", a)
		for _, f := range rep.Findings {
			if f.Check == "iommu.cmdline" && f.Subject == a.Wanted {
				require.Equal(t, a.State, checkArgState(f), "%+v", f)
			}
		}
	}
	run, d := fakeGrubRunner(t)
	out, errs, code = gpuprepWith(t, d, "grub", "ensure", "--mode", "vm-passthrough", "--root", root, "--dry-run")
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, "would run: kernelstub\n")
	require.Empty(t, run.Calls)
}

// A proxmox-boot-tool node whose root does not tell what its ESPs boot (no
// LoaderInfo, neither GRUB's nor systemd-boot's mark on /proc/cmdline):
// grub show refuses naming what was missing, check says the next boot's
// configuration is unknown (an error, and no verdict resting on either
// file), and grub ensure edits both files, which refresh writes whichever
// way the ESPs boot.
func TestProxmoxUnknownESPMode(t *testing.T) {
	root := bootChainRoot(t, "proxmox-systemd-boot", fixture.BootMissing)
	require.NoError(t, fixture.New(root).Remove("/sys/firmware/efi/efivars").File("/proc/cmdline", "root=ZFS=rpool/ROOT/pve-1 boot=zfs\n").Err())

	_, errs, code := gpuprep(t, "grub", "show", "--root", root, "-o", "json")
	require.Equal(t, exitUnknown, code)
	require.Contains(t, errs, "does not tell whether its ESPs boot systemd-boot or GRUB")

	out, _, _ := gpuprep(t, "check", "--root", root, "--mode", "vm-passthrough", "-o", "json")
	var rep struct {
		Findings []checkFinding `json:"findings"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	var statuses []string
	for _, f := range rep.Findings {
		if f.Check == "iommu.cmdline" {
			require.NotContains(t, f.Message, "cannot be parsed", "nothing failed to parse: %+v", f)
			if f.Subject == "intel_iommu=on" {
				// not needed whatever the next boot's configuration: the
				// kernel enables the Intel IOMMU by default (fixture.pveConfig),
				// a verdict resting on neither file
				require.Equal(t, "pass", f.Status, f.Message)
				require.Contains(t, f.Message, "not needed: the kernel enables the Intel IOMMU by default (CONFIG_INTEL_IOMMU_DEFAULT_ON=y in /boot/config-6.8.12-4-pve)")
				continue
			}
			statuses = append(statuses, f.Status)
			if f.Subject == "iommu=pt" {
				require.Contains(t, f.Message, "which configuration the next boot reads is unknown")
			}
		}
	}
	require.Contains(t, statuses, "error")
	require.NotContains(t, statuses, "pass")

	_, d := fakeGrubRunner(t)
	out, errs, code = gpuprepWith(t, d, "grub", "ensure", "--mode", "vm-passthrough", "--root", root, "--dry-run")
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, "+++ b/etc/kernel/cmdline\n")
	require.Contains(t, out, "+++ b/etc/default/grub\n")
	require.Contains(t, out, "would run: proxmox-boot-tool refresh\n")
	require.Contains(t, out, "both /etc/kernel/cmdline (systemd-boot) and /etc/default/grub (GRUB) are edited")
}

// apply on Proxmox with systemd-boot ESPs: its kernel-args step writes
// /etc/kernel/cmdline (journalled, backed up) and runs proxmox-boot-tool
// refresh, leaves /etc/default/grub alone, and stops for the reboot;
// rollback restores the file and refreshes the ESPs from it.
func TestApplyProxmoxSystemdBoot(t *testing.T) {
	d := realDeps()
	k := simulatedKernel(t, d)
	root := bootChainRoot(t, "proxmox-systemd-boot", fixture.BootMissing)
	withTools(t, root)
	grubBefore, cmdBefore := read(t, root, "/etc/default/grub"), read(t, root, "/etc/kernel/cmdline")
	out, errs, code := gpuprepWith(t, d, "apply", "--root", root, "--mode", "vm-passthrough", "--yes")
	require.Equal(t, exitNeedReboot, code, out+errs)
	require.Equal(t, "root=ZFS=rpool/ROOT/pve-1 boot=zfs iommu=pt\n", read(t, root, "/etc/kernel/cmdline"))
	require.Equal(t, grubBefore, read(t, root, "/etc/default/grub"))
	require.Contains(t, (*k).Commands, []string{"proxmox-boot-tool", "refresh"})
	require.NotContains(t, (*k).Commands, []string{"update-grub"})

	out, errs, code = gpuprepWith(t, d, "rollback", "--root", root)
	require.Equal(t, exitOK, code, out+errs)
	require.Equal(t, cmdBefore, read(t, root, "/etc/kernel/cmdline"))
	require.Equal(t, []string{"proxmox-boot-tool", "refresh"}, (*k).Commands[len((*k).Commands)-1])
}
