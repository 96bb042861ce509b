package grub

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/internal/host"
)

// pveRoot is a fixture.BootChain Proxmox node (loader) with three kernels
// installed as proxmox-kernel-6.8 installs them (/boot/vmlinuz-K,
// /boot/initrd.img-K made by update-initramfs, /lib/modules/K), then edit
// (files to write; "" removes one).
func pveRoot(t *testing.T, loader string, edit map[string]string) *host.Root {
	t.Helper()
	dir := t.TempDir()
	b := fixture.New(dir)
	fixture.BootChain(loader, fixture.BootMissing)(b)
	for _, k := range []string{"6.8.12-4-pve", "6.8.12-9-pve", "6.5.13-6-pve"} {
		b.File("/lib/modules/"+k+"/modules.builtin", "").File("/boot/vmlinuz-"+k, "kernel").File("/boot/initrd.img-"+k, "image")
	}
	for p, c := range edit {
		if c == "" {
			b.Remove(p)
		} else {
			b.File(p, c)
		}
	}
	require.NoError(t, b.Err())
	r, err := host.NewRoot(dir)
	require.NoError(t, err)
	return r
}

// The ZFS pool's GUID in hex, as grub-probe gives it in the menu entry ids
// (set_grub_default takes it from /boot/grub/grub.cfg).
const pveRootID = "9a2b7c4d1e3f5a6b"

// systemd-boot ESPs, not mounted: the next kernel is what refresh writes
// from the pin files (next-boot-pin over proxmox-boot-pin, first line
// only) and the kernels in /boot, newest first by systemd-boot's sort
// under `default proxmox-*`; the EFI variables systemd-boot reads before
// loader.conf still decide first.
func TestProxmoxNextKernelSystemdBoot(t *testing.T) {
	for name, c := range map[string]struct {
		edit      map[string]string
		release   string
		from      string
		missingAt string
	}{
		"unpinned: the newest":        {nil, "6.8.12-9-pve", `default "proxmox-*"`, ""},
		"proxmox-boot-pin":            {map[string]string{ProxmoxPin: "6.8.12-4-pve\n"}, "6.8.12-4-pve", `pinned by /etc/kernel/proxmox-boot-pin`, ""},
		"next-boot-pin over the pin":  {map[string]string{ProxmoxPin: "6.8.12-4-pve\n", ProxmoxNextBootPin: "6.5.13-6-pve\nignored\n"}, "6.5.13-6-pve", `default "proxmox-6.5.13-6-pve.conf"`, ""},
		"empty next-boot-pin unpins":  {map[string]string{ProxmoxPin: "6.8.12-4-pve\n", ProxmoxNextBootPin: "\n"}, "6.8.12-9-pve", `/etc/kernel/next-boot-pin empty`, ""},
		"pin without its initrd":      {map[string]string{ProxmoxPin: "6.8.12-4-pve\n", "/boot/initrd.img-6.8.12-4-pve": ""}, "", "", `default "proxmox-6.8.12-4-pve.conf" names no entry`},
		"hostile pin":                 {map[string]string{ProxmoxPin: "../../etc/shadow\n"}, "", "", "is not a kernel release"},
		"LoaderEntryOneShot first":    {map[string]string{loaderEFIVar("LoaderEntryOneShot"): utf16Var("proxmox-6.5.13-6-pve.conf")}, "6.5.13-6-pve", "EFI variable LoaderEntryOneShot", ""},
		"EFI default not among ours":  {map[string]string{loaderEFIVar("LoaderEntryDefault"): utf16Var("memtest86+.conf")}, "", "", `LoaderEntryDefault "memtest86+.conf" names no entry`},
		"no kernel with an initrd":    {map[string]string{"/boot/initrd.img-6.8.12-2-pve": "", "/boot/initrd.img-6.8.12-4-pve": "", "/boot/initrd.img-6.8.12-9-pve": "", "/boot/initrd.img-6.5.13-6-pve": ""}, "", "", "no /boot/vmlinuz-KVER with its /boot/initrd.img-KVER"},
		"a mounted ESP's loader.conf": {map[string]string{proxmoxESPMounts + "/5A1E-9C3B/loader/loader.conf": "timeout 3\ndefault proxmox-6.8.12-4-pve.conf\n", proxmoxESPMounts + "/5A1E-9C3B/loader/entries/proxmox-6.8.12-4-pve.conf": pveEntry("6.8.12-4-pve"), proxmoxESPMounts + "/5A1E-9C3B/loader/entries/proxmox-6.8.12-9-pve.conf": pveEntry("6.8.12-9-pve"), proxmoxESPMounts + "/5A1E-9C3B/EFI/proxmox/6.8.12-4-pve/initrd.img-6.8.12-4-pve": "image"}, "6.8.12-4-pve", "/var/tmp/espmounts/5A1E-9C3B/loader/loader.conf default", ""},
	} {
		t.Run(name, func(t *testing.T) {
			nk := FindNextKernel(pveRoot(t, "proxmox-systemd-boot", c.edit))
			if c.missingAt != "" {
				require.Empty(t, nk.Release, nk.From)
				require.Contains(t, nk.Missing, c.missingAt)
				return
			}
			require.Equal(t, c.release, nk.Release, nk.Missing)
			require.Contains(t, nk.From, c.from)
			if c.edit[proxmoxESPMounts+"/5A1E-9C3B/loader/loader.conf"] != "" {
				require.Equal(t, proxmoxESPMounts+"/5A1E-9C3B/EFI/proxmox/"+c.release+"/initrd.img-"+c.release, nk.Initrd)
				return
			}
			require.Equal(t, "/boot/initrd.img-"+c.release, nk.Initrd)
		})
	}
}

// pveEntry is the loader entry zz-proxmox-boot's copy_and_config_kernels
// writes for kernel k (title, version, options, linux, initrd).
func pveEntry(k string) string {
	return "title    Proxmox Virtual Environment\nversion  " + k + "\noptions  root=ZFS=rpool/ROOT/pve-1 boot=zfs\nlinux    /EFI/proxmox/" + k + "/vmlinuz-" + k + "\ninitrd   /EFI/proxmox/" + k + "/initrd.img-" + k + "\n"
}

func loaderEFIVar(name string) string {
	return "/sys/firmware/efi/efivars/" + name + "-" + loaderEFIVendor
}

// GRUB ESPs (legacy BIOS): GRUB_DEFAULT as grub-mkconfig sources
// /etc/default/grub and grub.d, refresh's proxmox-kernel-pin.cfg among
// them, resolved against the kernels refresh copies; a default the ESP's
// grub.cfg or grubenv would decide is unknown.
func TestProxmoxNextKernelGRUB(t *testing.T) {
	pin := func(k string) string {
		return `GRUB_DEFAULT="gnulinux-advanced-` + pveRootID + `>gnulinux-` + k + `-advanced-` + pveRootID + `"` + "\n"
	}
	for name, c := range map[string]struct {
		edit    map[string]string
		release string
		from    string
		missing string
	}{
		"GRUB_DEFAULT=0: the newest":      {nil, "6.8.12-9-pve", "GRUB_DEFAULT=0 (/etc/default/grub:6): the first entry, the newest kernel", ""},
		"proxmox-kernel-pin.cfg":          {map[string]string{ProxmoxGrubPin: pin("6.8.12-4-pve"), ProxmoxPin: "6.8.12-4-pve\n"}, "6.8.12-4-pve", "(/etc/default/grub.d/proxmox-kernel-pin.cfg:1): the entry of 6.8.12-4-pve", ""},
		"pin changed, no refresh since":   {map[string]string{ProxmoxGrubPin: pin("6.8.12-4-pve"), ProxmoxPin: "6.5.13-6-pve\n"}, "6.8.12-4-pve", "/etc/kernel/proxmox-boot-pin says 6.5.13-6-pve, which the next proxmox-boot-tool refresh writes", ""},
		"pinned kernel not on the ESPs":   {map[string]string{ProxmoxGrubPin: pin("6.2.16-20-pve")}, "6.8.12-9-pve", "names no kernel refresh copies", ""},
		"GRUB_DEFAULT=saved: the grubenv": {map[string]string{"/etc/default/grub": "GRUB_DEFAULT=saved\nGRUB_CMDLINE_LINUX=\"root=ZFS=rpool/ROOT/pve-1 boot=zfs\"\n"}, "", "", "GRUB_DEFAULT=saved (/etc/default/grub:1) picks from the ESPs' grub.cfg (and grubenv), which are not mounted"},
	} {
		t.Run(name, func(t *testing.T) {
			nk := FindNextKernel(pveRoot(t, "proxmox-grub", c.edit))
			if c.missing != "" {
				require.Empty(t, nk.Release, nk.From)
				require.Contains(t, nk.Missing, c.missing)
				return
			}
			require.Equal(t, c.release, nk.Release, nk.Missing)
			require.Contains(t, nk.From, c.from)
			require.Equal(t, "/boot/initrd.img-"+c.release, nk.Initrd)
		})
	}
}

// Where the root does not tell which bootloader the ESPs hold, the answer
// stands only when both would boot the same kernel.
func TestProxmoxNextKernelModeUnknown(t *testing.T) {
	unknown := map[string]string{loaderInfoVar: "", "/proc/cmdline": "root=ZFS=rpool/ROOT/pve-1 boot=zfs\n"}
	nk := FindNextKernel(pveRoot(t, "proxmox-systemd-boot", unknown))
	require.Equal(t, "6.8.12-9-pve", nk.Release, nk.Missing)
	require.Contains(t, nk.From, "whichever its ESPs boot")

	unknown[ProxmoxPin] = "6.8.12-4-pve\n" // systemd-boot: pinned; GRUB: no snippet yet, the newest
	nk = FindNextKernel(pveRoot(t, "proxmox-systemd-boot", unknown))
	require.Empty(t, nk.Release)
	require.Contains(t, nk.Missing, "the two would boot different kernels")
}

func TestPinEntryKernel(t *testing.T) {
	require.Equal(t, "6.8.12-4-pve", pinEntryKernel("gnulinux-advanced-"+pveRootID+">gnulinux-6.8.12-4-pve-advanced-"+pveRootID))
	for _, v := range []string{"0", "saved", "gnulinux-advanced-a>gnulinux-6.8-advanced-b", "1>2", "gnulinux-advanced->gnulinux-6.8-advanced-"} {
		require.Empty(t, pinEntryKernel(v), v)
	}
}
