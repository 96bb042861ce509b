package main

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
)

// grub show names the kernel the next boot runs and what decided it, in
// text and JSON: on Proxmox VE with systemd-boot ESPs (not mounted), the
// kernel /etc/kernel/proxmox-boot-pin pins, as refresh writes it into
// loader.conf (proxmox-kernel-helper's zz-proxmox-boot); unpinned, the
// newest under `default proxmox-*`.
func TestGrubShowNextBootProxmox(t *testing.T) {
	root := t.TempDir()
	b := fixture.New(root)
	fixture.BootChain("proxmox-systemd-boot", fixture.BootMissing)(b)
	for _, k := range []string{"6.8.12-4-pve", "6.8.12-9-pve"} {
		b.File("/lib/modules/"+k+"/modules.builtin", "").File("/boot/vmlinuz-"+k, "kernel").File("/boot/initrd.img-"+k, "image")
	}
	b.File("/etc/kernel/proxmox-boot-pin", "6.8.12-4-pve\n")
	require.NoError(t, b.Err())

	out, errs, code := gpuprep(t, "grub", "show", "--root", root, "-o", "json")
	require.Equal(t, 0, code, errs)
	var show showReport
	require.NoError(t, json.Unmarshal([]byte(out), &show), out)
	require.Equal(t, "6.8.12-4-pve", show.NextBoot.Kernel, out)
	require.Equal(t, "6.8.12-4-pve", show.NextBoot.Read, out)
	require.Equal(t, "/boot/initrd.img-6.8.12-4-pve", show.NextBoot.Initrd, out)
	require.Contains(t, show.NextBoot.From, `default "proxmox-6.8.12-4-pve.conf"`, out)
	require.Contains(t, show.NextBoot.From, "pinned by /etc/kernel/proxmox-boot-pin", out)

	out, errs, code = gpuprep(t, "grub", "show", "--root", root)
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, "next boot:  kernel 6.8.12-4-pve, loader/entries/proxmox-6.8.12-4-pve.conf on the ESPs (")
	require.Contains(t, out, "; initramfs /boot/initrd.img-6.8.12-4-pve\n")

	require.NoError(t, fixture.New(root).Remove("/etc/kernel/proxmox-boot-pin").Err())
	out, _, _ = gpuprep(t, "grub", "show", "--root", root, "-o", "json")
	require.NoError(t, json.Unmarshal([]byte(out), &show), out)
	require.Equal(t, "6.8.12-9-pve", show.NextBoot.Kernel, out)
	require.Contains(t, show.NextBoot.From, `default "proxmox-*"`, out)
}

// Where the next boot's kernel cannot be told, grub show says so, with
// what was missing, and whose configuration it reads instead.
func TestGrubShowNextBootUnknown(t *testing.T) {
	root := t.TempDir()
	b := fixture.New(root)
	fixture.BootChain("grub-debian", fixture.BootMissing)(b)
	// a second kernel, and no generated menu to say which boots
	b.File("/lib/modules/6.1.0-28-amd64/modules.builtin", "").Remove("/boot/grub/grub.cfg")
	require.NoError(t, b.Err())
	out, errs, code := gpuprep(t, "grub", "show", "--root", root, "-o", "json")
	require.Equal(t, 0, code, errs)
	var show showReport
	require.NoError(t, json.Unmarshal([]byte(out), &show), out)
	require.Empty(t, show.NextBoot.Kernel, out)
	require.Contains(t, show.NextBoot.Missing, "the GRUB menu /boot/grub/grub.cfg is not readable", out)
	require.Equal(t, "6.1.0-27-amd64", show.NextBoot.Read, out)

	out, _, _ = gpuprep(t, "grub", "show", "--root", root)
	require.Contains(t, out, "next boot:  kernel unknown (the GRUB menu /boot/grub/grub.cfg is not readable")
	require.Contains(t, out, "; the configuration read is the running kernel's, 6.1.0-27-amd64\n")
}

// check and grub show read the next boot alike (grub.NextBoot): on a BLS
// node whose newest entry (the one blscfg boots, no saved_entry) has the
// IOMMU arguments and the running kernel's entry does not, both judge the
// newest entry's, and grub show names that kernel.
func TestCheckAndGrubShowReadTheSameNextKernel(t *testing.T) {
	const newer = "5.14.0-503.14.1.el9_5.x86_64"
	root := t.TempDir()
	b := fixture.New(root)
	fixture.BootChain("grub-rhel-bls", fixture.BootMissing)(b)
	base := "root=/dev/mapper/rl-root ro crashkernel=1G-4G:192M,4G-64G:256M,64G-:512M resume=/dev/mapper/rl-swap rd.lvm.lv=rl/root rd.lvm.lv=rl/swap"
	// the entry grub2's 20-grub.install writes for the newer kernel
	entry := "/boot/loader/entries/6a9857a393724b7a981ebb5b8495b9ea-" + newer + ".conf"
	b.File(entry, "title Rocky Linux ("+newer+") 9.5 (Blue Onyx)\nversion "+newer+"\nlinux /vmlinuz-"+newer+"\ninitrd /initramfs-"+newer+".img $tuned_initrd\noptions "+base+" "+fixture.BootArgs+" $tuned_params\ngrub_users $grub_users\ngrub_arg --unrestricted\ngrub_class rocky\n")
	b.File("/lib/modules/"+newer+"/modules.builtin", "")
	require.NoError(t, b.Err())

	out, errs, code := gpuprep(t, "grub", "show", "--root", root, "-o", "json")
	require.Equal(t, 0, code, errs)
	var show showReport
	require.NoError(t, json.Unmarshal([]byte(out), &show), out)
	require.Equal(t, newer, show.NextBoot.Kernel, out)
	require.Equal(t, entry, show.Source, out)
	require.Contains(t, show.NextBoot.From, entry+" (the newest entry", out)

	out, _, _ = gpuprep(t, "check", "--root", root, "--mode", "vm-passthrough", "-o", "json")
	var rep struct {
		Findings []checkFinding `json:"findings"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
	n := 0
	for _, f := range rep.Findings {
		if f.Check != "iommu.cmdline" {
			continue
		}
		for _, a := range show.Args {
			if a.Wanted == f.Subject {
				n++
				require.NotEqual(t, "missing", a.State, "%+v", a)
				require.Equal(t, a.State, checkArgState(f), "check, %s: %+v", a.Wanted, f)
				require.Contains(t, f.Message, entry)
			}
		}
	}
	require.Equal(t, 2, n, out)
}
