package grub

import (
	"os"
	"strings"
	"testing"
	"time"
)

// fuzzRequests are the edits FuzzEnsure tries; op picks one.
var fuzzRequests = []Request{
	{Ensure: params("intel_iommu=on", "iommu=pt")},
	{Ensure: params("iommu=pt")},
	{Remove: []string{"iommu", "intel_iommu"}},
	{Ensure: params("quiet"), Remove: []string{"splash"}},
	{Ensure: params("a=b", "iommu.passthrough=1")},
	{Ensure: params("intel_iommu=on", "iommu=pt"), NotOff: []string{"intel_iommu", "iommu", "intremap"}},
}

// FuzzEnsure edits fuzzed defaults files and checks every accepted edit with
// the bash oracle (checkEdit): bash's reading equals gpuprep's, the edited
// files source to exactly the old arguments minus the removed and plus the
// added ones, other lines are byte-identical, a second run is a no-op.
// Input: /etc/default/grub, then grub.d files, separated by NUL bytes.
//
//	go test ./grub -run '^$' -fuzz FuzzEnsure -fuzztime 20s
func FuzzEnsure(f *testing.F) {
	needBash(f)
	ents, _ := os.ReadDir("testdata")
	for _, e := range ents {
		if e.Name() == "fuzz" || e.Name() == "hostile" || e.Name() == "nextboot" {
			continue
		}
		files := fixtureFiles(f, e.Name())
		var parts []string
		for _, fl := range files {
			parts = append(parts, string(fl.Data))
		}
		for op := range fuzzRequests {
			f.Add(strings.Join(parts, "\x00"), uint8(op))
		}
	}
	f.Add("GRUB_CMDLINE_LINUX=x\\ y'a b'\"c $d\"\x00GRUB_CMDLINE_LINUX=\"$GRUB_CMDLINE_LINUX iommu=off\"", uint8(0))
	f.Add("A=1 B=$A GRUB_CMDLINE_LINUX_DEFAULT=$B; GRUB_CMDLINE_LINUX=#x", uint8(2))
	for _, c := range paramCases { // the ${X:-word} forms (paramexp.go)
		f.Add(strings.Join(c.files, "\x00"), uint8(len(c.name)))
	}
	if b, err := os.ReadFile("testdata/hostile/doubling/etc/default/grub"); err == nil {
		f.Add(string(b), uint8(0)) // refused by the expansion bounds (bounds.go)
	}
	f.Fuzz(func(t *testing.T, in string, op uint8) {
		if len(in) > 4096 {
			return
		}
		var files []File
		for i, p := range strings.Split(in, "\x00") {
			path := DefaultsFile
			if i > 0 {
				path = "/etc/default/grub.d/" + string(rune('a'+i%26)) + ".cfg"
			}
			files = append(files, File{path, []byte(p)})
		}
		req := fuzzRequests[int(op)%len(fuzzRequests)]
		var ed *Edit
		var err error
		done := make(chan struct{})
		var panicked any
		go func() {
			defer close(done)
			defer func() { panicked = recover() }()
			ed, err = EditFiles(files, req)
		}()
		select {
		case <-done:
		case <-time.After(3 * time.Second):
			t.Fatalf("EditFiles hangs on %q", in)
		}
		if panicked != nil {
			t.Fatalf("EditFiles panics on %q: %v", in, panicked)
		}
		if err != nil {
			return // refused: fine, as long as nothing is written
		}
		if _, err := bashSource(t, files); err != nil {
			return // not something grub-mkconfig would accept either
		}
		checkEdit(t, files, req, ed)
	})
}
