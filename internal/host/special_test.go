package host

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// withinSecond fails the test when f takes longer than a second: a read
// that blocks on a FIFO never returns, and the test must say so instead of
// hanging until go test's own timeout.
func withinSecond(t *testing.T, what string, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(time.Second):
		t.Fatalf("%s blocked on a FIFO", what)
		return nil
	}
}

func TestReadsRefuseFIFOsWithoutBlocking(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "etc/default"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "etc/default/grub"), 0o644); err != nil {
		t.Fatal(err)
	}
	fast, err := NewRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	walk, _ := NewRoot(dir)
	walk.rfd.off.Store(true) // the path taken without openat2 (and on the live root)
	for name, r := range map[string]*Root{"openat2": fast, "walk": walk} {
		reads := map[string]func() error{
			"ReadFile": func() error { _, err := r.ReadFile("/etc/default/grub"); return err },
			"Open": func() error {
				f, err := r.Open("/etc/default/grub")
				if err == nil {
					err = f.Close()
				}
				return err
			},
			"ReadAt": func() error { _, err := r.ReadAt("/etc/default/grub", 0, 8); return err },
			"Dir.ReadString": func() error {
				d, err := r.OpenDir("/etc/default")
				if err != nil {
					return err
				}
				defer d.Close()
				_, err = d.ReadString("grub")
				return err
			},
		}
		for op, f := range reads {
			err := withinSecond(t, name+" "+op, f)
			if !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), "/etc/default/grub") || !strings.Contains(err.Error(), "FIFO") {
				t.Errorf("%s %s: %v, want an error naming /etc/default/grub as a FIFO", name, op, err)
			}
			if strings.Contains(err.Error(), dir) {
				t.Errorf("%s %s: %v names the file on this machine, not the host path", name, op, err)
			}
		}
	}
}

func TestReadsStillReadRegularFiles(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "cmdline"), []byte("quiet iommu=pt\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r, _ := NewRoot(dir)
	walk, _ := NewRoot(dir)
	walk.rfd.off.Store(true)
	for _, r := range []*Root{r, walk} {
		if s, err := r.ReadString("/cmdline"); err != nil || s != "quiet iommu=pt" {
			t.Errorf("ReadString = %q, %v", s, err)
		}
		b, err := r.ReadAt("/cmdline", 6, 5)
		if err != nil || string(b) != "iommu" {
			t.Errorf("ReadAt = %q, %v", b, err)
		}
	}
}
