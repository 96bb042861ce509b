package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
)

// An Ubuntu cloud image under GRUB_FORCE_PARTUUID boots without an
// initramfs (its grub.cfg entry's else branch, grubenv without
// initrdfail=1): grub show says so (nextBoot.noInitramfs), from the reader
// check's VFIO verdicts use.
func TestGrubShowInitrdless(t *testing.T) {
	root := bootChainRoot(t, "grub-dropin-only", fixture.BootRunning)
	const k = "6.8.0-45-generic"
	menu := "menuentry 'Ubuntu' --class ubuntu $menuentry_id_option 'gnulinux-simple-b993fcf5' {\n\trecordfail\n" +
		"\tif [ \"${initrdfail}\" = 1 ]; then\n\t  linux\t/boot/vmlinuz-" + k + " root=PARTUUID=26f22d2b ro console=tty1 console=ttyS0\n\t  initrd\t/boot/initrd.img-" + k + "\n" +
		"\telse\n\t  linux\t/boot/vmlinuz-" + k + " root=PARTUUID=26f22d2b ro console=tty1 console=ttyS0 panic=-1\n\tfi\n\tinitrdfail\n}\n"
	require.NoError(t, fixture.New(root).File("/boot/grub/grub.cfg", menu).File("/boot/initrd.img-"+k, "image").Err())
	out, errs, code := gpuprep(t, "grub", "show", "--root", root, "-o", "json")
	require.Equal(t, 0, code, errs)
	var show showReport
	require.NoError(t, json.Unmarshal([]byte(out), &show), out)
	require.Equal(t, k, show.NextBoot.Kernel, out)
	require.True(t, show.NextBoot.NoInitramfs, out)
	require.Empty(t, show.NextBoot.Initrd, out)
	out, _, _ = gpuprep(t, "grub", "show", "--root", root)
	require.True(t, strings.Contains(out, "; no initramfs"), out)
}
