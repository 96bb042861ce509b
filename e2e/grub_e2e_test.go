//go:build e2e

// A real grub-mkconfig: `gpuprep grub ensure --mode vm-passthrough --root SCRATCH` in a scratch Debian root
// made with debootstrap (Debian's grub2-common and grub-pc-bin), and the generated grub.cfg is read back.
//
//	go test -tags e2e -v -run TestGrubMkconfig ./e2e/
//
// Needs root and debootstrap (Debian package). The pristine root is cached in
// $GPUPREP_E2E_DIR/grub-base (default /var/tmp/gpuprep-e2e); each run copies it.
package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

const grubKernel = "6.1.0-99-amd64" // a stand-in kernel image: grub-mkconfig only needs the file

// debianMirror is the Debian archive debootstrap fetches from (also reboot_e2e_test.go's).
const debianMirror = "http://deb.debian.org/debian"

func TestGrubMkconfig(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (debootstrap, chroot, mounts)")
	}
	if _, err := exec.LookPath("debootstrap"); err != nil {
		t.Skip("debootstrap is not installed (apt-get install debootstrap)")
	}
	t0 := time.Now()
	base := filepath.Join(tb.workDir, "grub-base")
	if _, err := os.Stat(filepath.Join(base, "usr/sbin/grub-mkconfig")); err != nil {
		tmp := base + ".tmp"
		_ = os.RemoveAll(tmp) // an interrupted run's; debootstrap fails on what is left
		grubRunCmd(t, "debootstrap", "--variant=minbase", "--include=grub2-common,grub-pc-bin", "bookworm", tmp, debianMirror)
		if err := os.Rename(tmp, base); err != nil {
			t.Fatal(err)
		}
		t.Logf("debootstrap took %.1fs", time.Since(t0).Seconds())
	}
	scratch := filepath.Join(t.TempDir(), "root")
	grubRunCmd(t, "cp", "-a", base, scratch)
	t.Cleanup(func() { _ = os.RemoveAll(scratch) }) // under t.TempDir, removed again

	// What the grub-pc package would add: /etc/default/grub (Debian's, as shipped), a kernel image.
	defaults, err := os.ReadFile(filepath.Join(tb.root, "grub", "testdata", "debian", "etc", "default", "grub"))
	if err != nil {
		t.Fatal(err)
	}
	grubWrite(t, filepath.Join(scratch, "etc/default/grub"), string(defaults))
	grubWrite(t, filepath.Join(scratch, "boot/vmlinuz-"+grubKernel), "not a real kernel\n")
	grubWrite(t, filepath.Join(scratch, "boot/initrd.img-"+grubKernel), "not a real initrd\n")
	if err := os.MkdirAll(filepath.Join(scratch, "boot/grub"), 0o755); err != nil {
		t.Fatal(err)
	}
	// grub-mkconfig runs grub-probe, which needs /proc, /sys and /dev.
	for _, m := range []string{"proc", "sys", "dev"} {
		target := filepath.Join(scratch, m)
		if err := syscall.Mount("/"+m, target, "", syscall.MS_BIND|syscall.MS_REC, ""); err != nil {
			t.Fatalf("bind-mount /%s: %v", m, err)
		}
		t.Cleanup(func() { _ = syscall.Unmount(target, syscall.MNT_DETACH) })
	}

	bin := tb.bin
	if bin == "" {
		bin = filepath.Join(t.TempDir(), "gpuprep")
		build := exec.Command(goTool(), "build", "-o", bin, "./cmd/gpuprep")
		build.Dir, build.Env = tb.root, append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
	}
	gp := func(args ...string) (string, int) {
		cmd := exec.Command(bin, append(args, "--root", scratch, "--system-disk")...) // a debootstrapped root: its grub-mkconfig runs
		cmd.Env = append(os.Environ(), "PATH=/usr/sbin:/usr/bin:/sbin:/bin")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		t.Logf("gpuprep %s → %d\n%s", strings.Join(args, " "), code, out.String())
		return out.String(), code
	}

	// The wanted arguments follow this machine's IOMMU (through the bind-mounted /sys and /proc).
	out, code := gp("grub", "show", "--mode", "vm-passthrough", "-o", "json")
	if code != 0 {
		t.Fatalf("grub show: exit %d", code)
	}
	var show struct {
		Args []struct{ Wanted, State string }
	}
	if err := json.Unmarshal([]byte(out), &show); err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, a := range show.Args {
		want = append(want, a.Wanted)
	}

	t1 := time.Now()
	out, code = gp("grub", "ensure", "--mode", "vm-passthrough")
	if code != 4 && code != 0 {
		t.Fatalf("grub ensure: exit %d", code)
	}
	if !strings.Contains(out, "ran: update-grub") {
		t.Fatalf("update-grub did not run")
	}
	t.Logf("grub ensure with update-grub took %.1fs", time.Since(t1).Seconds())
	normal, recovery := grubLinuxLines(t, filepath.Join(scratch, "boot/grub/grub.cfg"))
	t.Logf("generated:\n%s\n%s", strings.Join(normal, "\n"), strings.Join(recovery, "\n"))
	for _, l := range normal {
		for _, w := range want {
			if !grubHasWord(l, w) {
				t.Errorf("generated linux line lacks %s: %s", w, l)
			}
		}
	}
	for _, l := range recovery {
		for _, w := range want {
			if grubHasWord(l, w) {
				t.Errorf("recovery entry got %s (gpuprep edits GRUB_CMDLINE_LINUX_DEFAULT): %s", w, l)
			}
		}
	}

	// A second run changes nothing and runs nothing.
	cfg1, _ := os.ReadFile(filepath.Join(scratch, "boot/grub/grub.cfg"))
	out, _ = gp("grub", "ensure", "--mode", "vm-passthrough")
	if !strings.Contains(out, "nothing to change") || strings.Contains(out, "ran:") {
		t.Errorf("second run was not a no-op")
	}
	cfg2, _ := os.ReadFile(filepath.Join(scratch, "boot/grub/grub.cfg"))
	if !bytes.Equal(cfg1, cfg2) {
		t.Errorf("grub.cfg changed on the second run")
	}

	// remove takes them out again.
	keys := []string{"grub", "remove"}
	for _, w := range want {
		keys = append(keys, strings.SplitN(w, "=", 2)[0])
	}
	if _, code = gp(keys...); code != 0 && code != 4 {
		t.Fatalf("grub remove: exit %d", code)
	}
	normal, _ = grubLinuxLines(t, filepath.Join(scratch, "boot/grub/grub.cfg"))
	for _, l := range normal {
		for _, w := range want {
			if grubHasWord(l, w) {
				t.Errorf("linux line still has %s after remove: %s", w, l)
			}
		}
	}
	got, _ := os.ReadFile(filepath.Join(scratch, "etc/default/grub"))
	if !bytes.Equal(got, defaults) {
		t.Errorf("ensure then remove did not restore /etc/default/grub byte for byte")
	}

	// Explicit arguments (the Intel set, whatever this machine's IOMMU).
	if _, code = gp("grub", "ensure", "intel_iommu=on", "iommu=pt"); code != 0 && code != 4 {
		t.Fatalf("grub ensure intel_iommu=on iommu=pt: exit %d", code)
	}
	normal, _ = grubLinuxLines(t, filepath.Join(scratch, "boot/grub/grub.cfg"))
	t.Logf("generated:\n%s", strings.Join(normal, "\n"))
	for _, l := range normal {
		if !strings.HasSuffix(l, " quiet intel_iommu=on iommu=pt") {
			t.Errorf("linux line does not end with quiet intel_iommu=on iommu=pt: %s", l)
		}
	}
	t.Logf("TestGrubMkconfig took %.1fs in all", time.Since(t0).Seconds())
}

func grubRunCmd(t *testing.T, argv ...string) {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, out)
	}
}

func grubWrite(t *testing.T, p, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

var grubLinuxLine = regexp.MustCompile(`(?m)^\s*linux\s+/boot/vmlinuz-\S+.*$`)

// linuxLines returns the generated linux lines of the normal and the recovery entries.
func grubLinuxLines(t *testing.T, cfg string) (normal, recovery []string) {
	t.Helper()
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range grubLinuxLine.FindAllString(string(b), -1) {
		if grubHasWord(l, "single") {
			recovery = append(recovery, l)
		} else {
			normal = append(normal, l)
		}
	}
	if len(normal) == 0 {
		t.Fatalf("no linux line for %s in %s:\n%s", grubKernel, cfg, b)
	}
	return normal, recovery
}

func grubHasWord(line, w string) bool {
	for _, f := range strings.Fields(line) {
		if f == w {
			return true
		}
	}
	return false
}
