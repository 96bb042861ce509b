package vfio

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/internal/host"
)

// InitramfsStale compares every initramfs image of an installed kernel (or
// mkinitcpio preset) with the newest of gpuprep's files: stale only when
// none is as new as them; leftovers and backups do not count.
func TestInitramfsStale(t *testing.T) {
	now := time.Now()
	hourAgo, dayAgo := now.Add(-time.Hour), now.Add(-24*time.Hour)
	for _, c := range []struct {
		name  string
		build func(b *fixture.Builder)
		stale string // "" not stale, else a part of the reason
	}{
		{"no gpuprep file", func(b *fixture.Builder) {
			b.File("/boot/initrd.img-6.8.0-45-generic", "old").Touch("/boot/initrd.img-6.8.0-45-generic", dayAgo)
		}, ""},
		{"no image", func(b *fixture.Builder) { b.File(ModprobeConf, "x") }, ""},
		{"image older", func(b *fixture.Builder) {
			b.File("/boot/initrd.img-6.8.0-45-generic", "old").Touch("/boot/initrd.img-6.8.0-45-generic", dayAgo)
			b.File(ModprobeConf, "x").Touch(ModprobeConf, hourAgo).File(ModulesLoad, "y")
		}, "the initramfs (/boot/initrd.img-6.8.0-45-generic) is older than " + ModulesLoad},
		{"image newer", func(b *fixture.Builder) {
			b.File(ModprobeConf, "x").Touch(ModprobeConf, dayAgo)
			b.File("/boot/initrd.img-6.8.0-45-generic", "new").Touch("/boot/initrd.img-6.8.0-45-generic", hourAgo)
		}, ""},
		{"same time", func(b *fixture.Builder) {
			b.File(ModprobeConf, "x").Touch(ModprobeConf, hourAgo)
			b.File("/boot/initrd.img-6.8.0-45-generic", "new").Touch("/boot/initrd.img-6.8.0-45-generic", hourAgo)
		}, ""},
		{"a killed update-initramfs's leftover is no image", func(b *fixture.Builder) {
			b.File("/boot/initrd.img-6.8.0-45-generic", "old").Touch("/boot/initrd.img-6.8.0-45-generic", dayAgo)
			b.File(ModprobeConf, "x").Touch(ModprobeConf, hourAgo)
			b.File("/boot/initrd.img-6.8.0-45-generic.new", "half")
			b.File("/boot/initrd.img-6.8.0-45-generic.bak", "copy")
		}, "the initramfs (/boot/initrd.img-6.8.0-45-generic) is older"},
		{"another kernel's image was remade (update-initramfs -u: the newest kernel's)", func(b *fixture.Builder) {
			b.File("/lib/modules/6.8.0-50-generic/modules.dep", "")
			b.File("/boot/initrd.img-6.8.0-45-generic", "old").Touch("/boot/initrd.img-6.8.0-45-generic", dayAgo)
			b.File(ModprobeConf, "x").Touch(ModprobeConf, hourAgo)
			b.File("/boot/initrd.img-6.8.0-50-generic", "new")
		}, ""},
		{"every kernel's image older", func(b *fixture.Builder) {
			b.File("/lib/modules/6.8.0-50-generic/modules.dep", "")
			b.File("/boot/initrd.img-6.8.0-45-generic", "old").Touch("/boot/initrd.img-6.8.0-45-generic", dayAgo)
			b.File("/boot/initramfs-6.8.0-50-generic.img", "old").Touch("/boot/initramfs-6.8.0-50-generic.img", dayAgo)
			b.File(UdevRule, "x").Touch(UdevRule, hourAgo)
		}, "(/boot/initrd.img-6.8.0-45-generic, /boot/initramfs-6.8.0-50-generic.img) is older than " + UdevRule},
		{"an image of a kernel no longer installed does not count", func(b *fixture.Builder) {
			b.File("/boot/initrd.img-6.8.0-45-generic", "old").Touch("/boot/initrd.img-6.8.0-45-generic", dayAgo)
			b.File(ModprobeConf, "x").Touch(ModprobeConf, hourAgo)
			b.File("/boot/initrd.img-5.4.0-1-generic", "newer, but not a kernel here")
		}, "the initramfs (/boot/initrd.img-6.8.0-45-generic) is older"},
		{"mkinitcpio", func(b *fixture.Builder) {
			b.File("/etc/mkinitcpio.d/linux.preset", "PRESETS=('default')\n")
			b.File("/boot/initramfs-linux.img", "old").Touch("/boot/initramfs-linux.img", dayAgo)
			b.File(ModprobeConf, "x").Touch(ModprobeConf, hourAgo)
		}, "the initramfs (/boot/initramfs-linux.img) is older"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			b := fixture.New(dir).File("/lib/modules/6.8.0-45-generic/modules.dep", "")
			c.build(b)
			require.NoError(t, b.Err())
			root, err := host.NewRoot(dir)
			require.NoError(t, err)
			got := InitramfsStale(root)
			if c.stale == "" {
				require.Empty(t, got)
				return
			}
			require.Contains(t, got, c.stale)
		})
	}
}
