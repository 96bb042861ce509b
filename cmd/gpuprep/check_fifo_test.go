package main

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"
)

// A FIFO in a --root where a file belongs (a hostile or damaged snapshot)
// must not hang check: it finishes, and what it says names the file.
func TestCheckFinishesWithAFIFOInTheRoot(t *testing.T) {
	t.Setenv("NO_COLOR", "1")
	for _, p := range []string{"/proc/cmdline", "/etc/default/grub"} {
		t.Run(p, func(t *testing.T) {
			dir := fixtureRoot(t, "hgx-h200")
			f := filepath.Join(dir, p)
			if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
				t.Fatal(err)
			}
			if err := syscall.Mkfifo(f, 0o644); err != nil {
				t.Fatal(err)
			}
			type result struct {
				out, errs string
				code      int
			}
			done := make(chan result, 1)
			go func() {
				out, errs, code := gpuprep(t, "check", "--root", dir, "--mode", "vm-passthrough")
				done <- result{out, errs, code}
			}()
			select {
			case r := <-done:
				// the file named, with its line where a parser reads it
				if !regexp.MustCompile(regexp.QuoteMeta(p) + `(:1)?: not a regular file \(a FIFO\)`).MatchString(r.out + r.errs) {
					t.Errorf("exit %d; the report does not name %s as a FIFO:\n%s%s", r.code, p, r.out, r.errs)
				}
				if r.code == 0 {
					t.Errorf("exit 0 with %s unreadable", p)
				}
			case <-time.After(20 * time.Second):
				t.Fatalf("check hangs on a FIFO at %s", p)
			}
		})
	}
}
