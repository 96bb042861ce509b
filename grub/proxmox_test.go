package grub

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/internal/host"
)

// proxmoxRoot builds a fixture.BootChain loader in state, then applies
// edit (files to write; "" removes one).
func proxmoxRoot(t *testing.T, loader, state string, edit map[string]string) *host.Root {
	t.Helper()
	dir := t.TempDir()
	b := fixture.New(dir)
	fixture.BootChain(loader, state)(b)
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

const loaderInfoVar = "/sys/firmware/efi/efivars/LoaderInfo-4a67b082-0a4c-41cf-b6c7-440b29bb8c4f"

// utf16Var is an efivarfs LoaderInfo file holding s.
func utf16Var(s string) string {
	out := []byte{6, 0, 0, 0}
	for _, c := range s + "\x00" {
		out = append(out, byte(c), 0)
	}
	return string(out)
}

// Which bootloader proxmox-boot-tool's ESPs hold is told by the evidence
// its own scripts decide by (legacy BIOS: GRUB) or by how the node booted
// (LoaderInfo, set by systemd-boot and by GRUB's bli module; GRUB's
// BOOT_IMAGE=; systemd-boot's initrd=\EFI\proxmox\…); without any, the mode
// is unknown and said so, never guessed.
func TestProxmoxESPMode(t *testing.T) {
	for name, c := range map[string]struct {
		loader string
		edit   map[string]string
		mode   string
		why    string
	}{
		"systemd-boot LoaderInfo": {"proxmox-systemd-boot", nil, ESPSystemdBoot, "systemd-boot 252.33-1~deb12u1 (EFI variable LoaderInfo)"},
		"GRUB's bli LoaderInfo":   {"proxmox-systemd-boot", map[string]string{loaderInfoVar: utf16Var("GRUB 2.12"), "/proc/cmdline": "root=ZFS=rpool/ROOT/pve-1 boot=zfs\n"}, ESPGRUB, "GRUB 2.12 (EFI variable LoaderInfo)"},
		"systemd-boot initrd=":    {"proxmox-systemd-boot", map[string]string{loaderInfoVar: ""}, ESPSystemdBoot, `initrd=\EFI\proxmox\6.8.12-4-pve\initrd.img-6.8.12-4-pve`},
		"GRUB BOOT_IMAGE=":        {"proxmox-systemd-boot", map[string]string{loaderInfoVar: "", "/proc/cmdline": "BOOT_IMAGE=/vmlinuz-6.8.12-4-pve root=ZFS=rpool/ROOT/pve-1 ro boot=zfs\n"}, ESPGRUB, "BOOT_IMAGE="},
		"legacy BIOS":             {"proxmox-grub", nil, ESPGRUB, "legacy BIOS"},
		"nothing tells":           {"proxmox-systemd-boot", map[string]string{loaderInfoVar: "", "/proc/cmdline": "root=ZFS=rpool/ROOT/pve-1 boot=zfs\n"}, "", "does not tell"},
	} {
		t.Run(name, func(t *testing.T) {
			r := proxmoxRoot(t, c.loader, fixture.BootMissing, c.edit)
			b, err := Detect(r)
			require.NoError(t, err)
			require.Equal(t, KindProxmox, b.Kind)
			require.Equal(t, c.mode, b.ESPMode)
			require.Contains(t, b.ESPModeWhy, c.why)
			require.Equal(t, ProxmoxRefresh, b.Regenerate)
		})
	}
}

// Without /etc/kernel/proxmox-boot-uuids the node boots plain GRUB
// (zz-proxmox-boot skips the ESP sync); a file that lists no UUID the tool
// accepts is an error naming it, not a guess.
func TestProxmoxBootUUIDs(t *testing.T) {
	b, err := Detect(proxmoxRoot(t, "proxmox-plain-grub", fixture.BootMissing, nil))
	require.NoError(t, err)
	require.Equal(t, KindGRUB, b.Kind)

	_, err = Detect(proxmoxRoot(t, "proxmox-systemd-boot", fixture.BootMissing, map[string]string{ProxmoxBootUUIDs: "not-an-esp\n"}))
	require.ErrorIs(t, err, ErrUnknownBoot)
	require.ErrorContains(t, err, ProxmoxBootUUIDs)
}

// On systemd-boot ESPs the edit goes to the first line of
// /etc/kernel/cmdline (what proxmox-boot-tool copies into the entries),
// /etc/default/grub is left alone, and proxmox-boot-tool refresh runs.
func TestProxmoxSystemdBootPlan(t *testing.T) {
	b, err := Detect(proxmoxRoot(t, "proxmox-systemd-boot", fixture.BootMissing, nil))
	require.NoError(t, err)
	p, err := b.PlanEdit(intelMode, true)
	require.NoError(t, err)
	require.Len(t, p.Changes, 1)
	require.Equal(t, KernelCmdlineFile, p.Changes[0].Path)
	require.Equal(t, "root=ZFS=rpool/ROOT/pve-1 boot=zfs intel_iommu=on iommu=pt\n", string(p.Changes[0].New))
	require.Equal(t, [][]string{{"proxmox-boot-tool", "refresh"}}, p.Commands)
	require.Equal(t, []string{"intel_iommu=on", "iommu=pt"}, p.Added)

	p, err = b.PlanEdit(intelMode, false)
	require.NoError(t, err)
	require.Empty(t, p.Commands)
	require.Contains(t, p.Notes[0], "not running proxmox-boot-tool refresh")

	src, err := b.Source("")
	require.NoError(t, err)
	require.Equal(t, KernelCmdlineFile, src.File)
	require.Equal(t, "root=ZFS=rpool/ROOT/pve-1 boot=zfs", src.Cmdline)
}

// proxmox-boot-tool reads only the first line (get_first_line): arguments
// on later lines do not count, the edit goes on the first line before a CR
// ending it, and a first line without root= (where refresh stops) is
// refused with the file and line before anything changes.
func TestProxmoxCmdlineFirstLine(t *testing.T) {
	for name, c := range map[string]struct{ in, want, err string }{
		"later lines ignored": {in: "root=ZFS=rpool/ROOT/pve-1 boot=zfs\nintel_iommu=on iommu=pt\n", want: "root=ZFS=rpool/ROOT/pve-1 boot=zfs intel_iommu=on iommu=pt\nintel_iommu=on iommu=pt\n"},
		"CRLF":                {in: "root=ZFS=rpool/ROOT/pve-1 boot=zfs\r\n", want: "root=ZFS=rpool/ROOT/pve-1 boot=zfs intel_iommu=on iommu=pt\r\n"},
		"no newline":          {in: "root=ZFS=rpool/ROOT/pve-1 boot=zfs", want: "root=ZFS=rpool/ROOT/pve-1 boot=zfs intel_iommu=on iommu=pt"},
		"removal":             {in: "root=ZFS=rpool/ROOT/pve-1 intel_iommu=off boot=zfs\n", want: "root=ZFS=rpool/ROOT/pve-1 boot=zfs intel_iommu=on iommu=pt\n"},
		"no root=":            {in: "boot=zfs quiet\n", err: KernelCmdlineFile + ":1: no root= argument"},
		"root= on line two":   {in: "\nroot=ZFS=rpool/ROOT/pve-1 boot=zfs\n", err: "this file's arguments are on later lines"},
	} {
		t.Run(name, func(t *testing.T) {
			b, err := Detect(proxmoxRoot(t, "proxmox-systemd-boot", fixture.BootMissing, map[string]string{KernelCmdlineFile: c.in}))
			require.NoError(t, err)
			req := intelMode
			req.NotOff = []string{"intel_iommu"}
			p, err := b.PlanEdit(req, true)
			if c.err != "" {
				require.ErrorContains(t, err, c.err)
				return
			}
			require.NoError(t, err)
			require.Len(t, p.Changes, 1)
			require.Equal(t, c.want, string(p.Changes[0].New))
			src, err := b.Source("")
			require.NoError(t, err)
			require.NotContains(t, src.Cmdline, "iommu=pt", "later lines are not read")
		})
	}
}

// On GRUB ESPs the edit goes to /etc/default/grub and the ESPs get it from
// proxmox-boot-tool refresh (not update-grub: /boot/grub/grub.cfg is not
// what boots, and its content decides nothing); where the root does not
// tell the mode, both files are edited and a note says why.
func TestProxmoxGrubAndUnknownPlans(t *testing.T) {
	r := proxmoxRoot(t, "proxmox-grub", fixture.BootMissing, nil)
	b, err := Detect(r)
	require.NoError(t, err)
	p, err := b.PlanEdit(intelMode, true)
	require.NoError(t, err)
	require.Len(t, p.Changes, 1)
	require.Equal(t, DefaultsFile, p.Changes[0].Path)
	require.Contains(t, string(p.Changes[0].New), `GRUB_CMDLINE_LINUX_DEFAULT="quiet intel_iommu=on iommu=pt"`)
	require.Equal(t, [][]string{{"proxmox-boot-tool", "refresh"}}, p.Commands)
	_, lacks := MenuLacks(r, intelMode)
	require.True(t, lacks, "the fixture's /boot/grub/grub.cfg lacks them")
	_, lacks = b.BootMenuLacks(r, intelMode)
	require.False(t, lacks, "and is not what boots")

	b, err = Detect(proxmoxRoot(t, "proxmox-systemd-boot", fixture.BootMissing, map[string]string{loaderInfoVar: "", "/proc/cmdline": "root=ZFS=rpool/ROOT/pve-1 boot=zfs\n"}))
	require.NoError(t, err)
	p, err = b.PlanEdit(intelMode, true)
	require.NoError(t, err)
	var paths []string
	for _, c := range p.Changes {
		paths = append(paths, c.Path)
	}
	require.Equal(t, []string{KernelCmdlineFile, DefaultsFile}, paths)
	require.Equal(t, [][]string{{"proxmox-boot-tool", "refresh"}}, p.Commands)
	require.Contains(t, p.Notes[0], "both /etc/kernel/cmdline (systemd-boot) and /etc/default/grub (GRUB) are edited")
	_, err = b.Source("")
	require.ErrorIs(t, err, ErrUnknownBoot)
}

// Without /etc/kernel/cmdline, proxmox-boot-tool refresh gives the
// systemd-boot ESPs the running command line, initrd= left out: that is
// what is read, and the edit creates the file from it (a new file, so
// rollback removes it); a running command line without root= would make
// the created file stop refresh, and is refused.
func TestProxmoxWithoutKernelCmdline(t *testing.T) {
	b, err := Detect(proxmoxRoot(t, "proxmox-systemd-boot", fixture.BootMissing, map[string]string{KernelCmdlineFile: ""}))
	require.NoError(t, err)
	src, err := b.Source("")
	require.NoError(t, err)
	require.Equal(t, ProxmoxRunningSource, src.File)
	require.Equal(t, "root=ZFS=rpool/ROOT/pve-1 boot=zfs", src.Cmdline)
	p, err := b.PlanEdit(intelMode, true)
	require.NoError(t, err)
	require.Len(t, p.Changes, 1)
	require.Nil(t, p.Changes[0].Old)
	require.Equal(t, "root=ZFS=rpool/ROOT/pve-1 boot=zfs intel_iommu=on iommu=pt\n", string(p.Changes[0].New))
	require.Equal(t, [][]string{{"proxmox-boot-tool", "refresh"}}, p.Commands)
	require.Contains(t, p.Notes[0], "created from the running command line")

	b, err = Detect(proxmoxRoot(t, "proxmox-systemd-boot", fixture.BootMissing, map[string]string{KernelCmdlineFile: "", "/proc/cmdline": `initrd=\EFI\proxmox\6.8.12-4-pve\initrd.img-6.8.12-4-pve boot=zfs` + "\n"}))
	require.NoError(t, err)
	_, err = b.PlanEdit(intelMode, true)
	require.ErrorContains(t, err, "no root= argument")
}
