package grub

import (
	"path"
	"slices"
	"sort"
	"strings"

	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/kargs"
	"github.com/gpuprep/gpuprep/internal/kernelrelease"
)

// systemd-boot through kernel-install: /etc/kernel/cmdline is what
// kernel-install puts in the entry of each kernel it installs
// (kernel-install(8); 90-loaderentry.install writes its "options" line), so
// a change to the file reaches the next boot only once kernel-install add
// has run again. The entry systemd-boot boots is on the ESP or XBOOTLDR
// partition, mounted at /boot, /efi or /boot/efi (bootctl's search order,
// systemd's bootctl(1)).
var entryDirs = []string{"/boot/loader/entries", "/efi/loader/entries", "/boot/efi/loader/entries"}

// runningEntry is the type #1 entry of kernel kver ("version kver", or a
// linux path with kver as a directory or in vmlinuz-kver), nil when none
// is found.
func runningEntry(root *host.Root, kver string) *File {
	if kver == "" {
		return nil
	}
	for _, dir := range entryDirs {
		names, _ := root.Glob(dir + "/*.conf")
		sort.Strings(names)
		for _, n := range names {
			data, err := kargs.ReadFile(root, n)
			if err != nil {
				continue
			}
			if entryBoots(data, kver) {
				return &File{n, data}
			}
		}
	}
	return nil
}

func entryBoots(data []byte, kver string) bool {
	for _, l := range strings.Split(string(data), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "version":
			if f[1] == kver {
				return true
			}
		case "linux":
			if strings.Contains(f[1], "/"+kver+"/") || path.Base(f[1]) == "vmlinuz-"+kver {
				return true
			}
		}
	}
	return false
}

// entryLacks reports whether the running kernel's entry (systemd-boot)
// would not give the next boot what req asks for.
func (b *Boot) entryLacks(req Request) bool {
	if b.Entry == nil {
		return false
	}
	o := blsOptions(b.Entry.Data)
	add, del := needs(wordsArgs(o), Words(o), req)
	return len(add) > 0 || len(del) > 0
}

// kernelInstall is the kernel-install add of every kernel found, which
// makes their entries again from /etc/kernel/cmdline.
func (b *Boot) kernelInstall() [][]string {
	var out [][]string
	for _, k := range b.Kernels {
		out = append(out, []string{"kernel-install", "add", k, "/lib/modules/" + k + "/vmlinuz"})
	}
	return out
}

// detectSystemdBoot fills b for systemd-boot through kernel-install: the
// kernels it would make entries for, and the running kernel's entry.
func detectSystemdBoot(root *host.Root, b *Boot) *Boot {
	b.Kind = KindSystemdBoot
	for _, dir := range []string{"/usr/lib/modules", "/lib/modules"} {
		for _, k := range root.Names(dir) {
			if root.Exists(dir+"/"+k+"/vmlinuz") && !slices.Contains(b.Kernels, k) {
				b.Kernels = append(b.Kernels, k)
			}
		}
	}
	sort.Strings(b.Kernels)
	kver, _ := kernelrelease.Running(root)
	b.Entry = runningEntry(root, kver)
	return b
}
