//go:build e2e

// Which kernel the next boot gets, for each GRUB_DEFAULT form, from a grub.cfg that the real grub-mkconfig
// (Debian bookworm's grub2-common, in a debootstrap root with grub-emu, cached as grub-emu-base) generated and
// a grubenv that the real grub-editenv wrote, read back by gpuprep (grub.FindNextKernel: the menu and
// grubenv) and booted by real GRUB: grub-emu (GRUB 2.06 in user space, its normal.mod's menu code) runs the
// generated grub.cfg and prints "Booting `TITLE'" and the entry's "Loading Linux RELEASE ..." before its
// linux command (which grub-emu 2.06 lacks) fails. GRUB_TIMEOUT=0 makes it boot the default at once.
//
//	go test -tags e2e ./e2e -run TestGrubMkconfigDefault -count=1 -v
//
// What GRUB boots is as the GRUB manual ("Simple configuration handling": GRUB_DEFAULT, GRUB_SAVEDEFAULT) and
// its source (grub-core/normal/menu.c run_menu, get_entry_number, grub_menu_execute_entry;
// util/grub.d/00_header.in's next_entry and saved_entry; 10_linux.in's submenu and entry ids) say:
// 10_linux writes the newest kernel first, then a submenu with an entry and a recovery entry per kernel,
// newest first.
package e2e

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuprep/gpuprep/grub"
	"github.com/gpuprep/gpuprep/internal/host"
)

// grubDefaultKernels are the stand-in kernels, newest first (10_linux's order: version_sort -r).
var grubDefaultKernels = []string{"6.1.0-99-amd64", "6.1.0-98-amd64", "6.1.0-97-amd64"}

func TestGrubMkconfigDefault(t *testing.T) {
	scratch := grubDefaultRoot(t)
	sub, suffix := grubSubmenuID(t, scratch)
	entryID := func(k string) string { return "gnulinux-" + k + "-advanced-" + suffix }
	newest, middle, oldest := grubDefaultKernels[0], grubDefaultKernels[1], grubDefaultKernels[2]
	for _, c := range []struct {
		name, def   string
		savedefault bool
		env         []string // grub-editenv set NAME=VALUE
		want        string
	}{
		{name: "index 0", def: "0", want: newest},
		{name: "submenu index", def: `"1>2"`, want: middle}, // 1>0 newest, 1>1 its recovery, 1>2 the next kernel
		{name: "submenu index past the end", def: `"1>9"`, want: newest},
		{name: "top index past the end", def: `"7>2"`, want: newest},
		{name: "plain entry, then more", def: `"0>2"`, want: newest},   // a plain entry boots whatever follows
		{name: "hex and trailing bytes", def: `"1>0x2"`, want: middle}, // grub_strtoul, base 0
		{name: "digits then other bytes", def: `"1>4 or so"`, want: oldest},
		{name: "title", def: `"Advanced options for Debian GNU/Linux>Debian GNU/Linux, with Linux ` + oldest + `"`, want: oldest},
		{name: "ids", def: `"` + sub + ">" + entryID(middle) + `"`, want: middle},
		{name: "id of a removed kernel", def: `"` + sub + ">" + entryID("6.1.0-5-amd64") + `"`, want: newest},
		{name: "saved", def: "saved", env: []string{"saved_entry=" + sub + ">" + entryID(oldest)}, want: oldest},
		{name: "saved, none saved", def: "saved", want: newest},
		{name: "saved, next_entry", def: "saved", env: []string{"saved_entry=" + sub + ">" + entryID(oldest), "next_entry=" + sub + ">" + entryID(middle)}, want: middle},
		{name: "index, next_entry", def: "0", env: []string{"next_entry=1>4"}, want: oldest},
		{name: "savedefault", def: "saved", savedefault: true, env: []string{"saved_entry=" + sub + ">" + entryID(middle)}, want: middle},
	} {
		t.Run(c.name, func(t *testing.T) {
			defaults := "GRUB_DEFAULT=" + c.def + "\nGRUB_TIMEOUT=0\nGRUB_TERMINAL=console\nGRUB_DISTRIBUTOR=Debian\nGRUB_CMDLINE_LINUX_DEFAULT=\"quiet\"\nGRUB_CMDLINE_LINUX=\"\"\n"
			if c.savedefault {
				defaults += "GRUB_SAVEDEFAULT=true\n"
			}
			grubWrite(t, filepath.Join(scratch, "etc/default/grub"), defaults)
			env := "/boot/grub/grubenv"
			_ = os.Remove(filepath.Join(scratch, env))
			grubRunCmd(t, "chroot", scratch, "grub-editenv", env, "create")
			if len(c.env) > 0 {
				grubRunCmd(t, append([]string{"chroot", scratch, "grub-editenv", env, "set"}, c.env...)...)
			}
			grubRunCmd(t, "chroot", scratch, "grub-mkconfig", "-o", "/boot/grub/grub.cfg")
			cfg, err := os.ReadFile(filepath.Join(scratch, "boot/grub/grub.cfg"))
			if err != nil {
				t.Fatal(err)
			}
			if c.savedefault != strings.Contains(string(cfg), "\tsavedefault\n") {
				t.Fatalf("GRUB_SAVEDEFAULT=%v, yet the entries' savedefault lines say otherwise:\n%s", c.savedefault, cfg)
			}
			root, err := host.NewRoot(scratch)
			if err != nil {
				t.Fatal(err)
			}
			nk := grub.FindNextKernel(root)
			t.Logf("GRUB_DEFAULT=%s %v: %s (%s%s)", c.def, c.env, nk.Release, nk.From, nk.Missing)
			booted := grubEmuBoots(t, scratch)
			t.Logf("grub-emu boots %s", booted)
			if booted != c.want {
				t.Errorf("GRUB boots %s where its manual and source say %s", booted, c.want)
			}
			if nk.Release != booted {
				t.Errorf("gpuprep reads the next kernel as %q (%s%s); GRUB boots %s", nk.Release, nk.From, nk.Missing, booted)
			}
		})
	}
}

// grubDefaultRoot is a copy of TestGrubMkconfig's cached debootstrap root with the stand-in kernels (images,
// initramfs images, modules directories) and /proc, /sys and /dev bound for grub-probe.
func grubDefaultRoot(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (chroot, mounts)")
	}
	base := filepath.Join(tb.workDir, "grub-emu-base")
	if _, err := os.Stat(filepath.Join(base, "usr/bin/grub-emu")); err != nil {
		if _, err := exec.LookPath("debootstrap"); err != nil {
			t.Skip("debootstrap is not installed (apt-get install debootstrap)")
		}
		tmp := base + ".tmp"
		_ = os.RemoveAll(tmp)
		grubRunCmd(t, "debootstrap", "--variant=minbase", "--include=grub2-common,grub-pc-bin,grub-emu", "bookworm", tmp, debianMirror)
		if err := os.Rename(tmp, base); err != nil {
			t.Fatal(err)
		}
	}
	scratch := filepath.Join(t.TempDir(), "root")
	grubRunCmd(t, "cp", "-a", base, scratch)
	t.Cleanup(func() { _ = os.RemoveAll(scratch) })
	if _, err := exec.LookPath("script"); err != nil {
		t.Skip("script (util-linux) is not installed: grub-emu needs a terminal")
	}
	if err := os.MkdirAll(filepath.Join(scratch, "boot/grub"), 0o755); err != nil {
		t.Fatal(err)
	}
	// grub-emu loads its modules from the prefix, as grub-install would put them there
	grubRunCmd(t, "cp", "-a", filepath.Join(scratch, "usr/lib/grub/x86_64-emu"), filepath.Join(scratch, "boot/grub/"))
	for _, k := range grubDefaultKernels {
		grubWrite(t, filepath.Join(scratch, "boot/vmlinuz-"+k), "not a real kernel\n")
		grubWrite(t, filepath.Join(scratch, "boot/initrd.img-"+k), "not a real initrd\n")
		grubWrite(t, filepath.Join(scratch, "lib/modules", k, "modules.builtin"), "")
	}
	for _, m := range []string{"proc", "sys", "dev"} {
		target := filepath.Join(scratch, m)
		if err := syscall.Mount("/"+m, target, "", syscall.MS_BIND|syscall.MS_REC, ""); err != nil {
			t.Fatalf("bind-mount /%s: %v", m, err)
		}
		t.Cleanup(func() { _ = syscall.Unmount(target, syscall.MNT_DETACH) })
	}
	return scratch
}

// grubSubmenuID is the --id 10_linux gives its submenu ("gnulinux-advanced-" and the root's UUID, as
// grub-probe tells it; empty where it cannot), from a grub.cfg grub-mkconfig generates here, and that suffix,
// which its entries' ids end with.
func grubSubmenuID(t *testing.T, scratch string) (string, string) {
	t.Helper()
	grubWrite(t, filepath.Join(scratch, "etc/default/grub"), "GRUB_DEFAULT=0\nGRUB_DISTRIBUTOR=Debian\n")
	grubRunCmd(t, "chroot", scratch, "grub-mkconfig", "-o", "/boot/grub/grub.cfg")
	cfg, err := os.ReadFile(filepath.Join(scratch, "boot/grub/grub.cfg"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^submenu '[^']*' \$menuentry_id_option '(gnulinux-advanced-([^']*))'`).FindSubmatch(cfg)
	if m == nil {
		t.Fatalf("no submenu in the generated grub.cfg:\n%s", cfg)
	}
	return string(m[1]), string(m[2])
}

var grubEmuLoading = regexp.MustCompile(`Loading Linux (\S+) \.\.\.`)

// grubEmuBoots runs grub-emu on the root's /boot/grub/grub.cfg and grubenv (in a terminal, as it needs one)
// and returns the release of the Linux entry it boots: its "Loading Linux RELEASE ..." line.
func grubEmuBoots(t *testing.T, scratch string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "script", "-qec", "chroot "+scratch+" grub-emu -r host -d /boot/grub", "/dev/null")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 2 * time.Second
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var seen strings.Builder
	release := ""
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		seen.WriteString(sc.Text() + "\n")
		if m := grubEmuLoading.FindStringSubmatch(sc.Text()); m != nil {
			release = m[1]
			break
		}
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // it waits at its menu after the failed linux command
	_ = cmd.Wait()
	if release == "" {
		t.Fatalf("grub-emu booted no Linux entry:\n%s", seen.String())
	}
	return release
}
