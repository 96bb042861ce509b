package preflight_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/internal/initramfs/mkimage"
	"github.com/gpuprep/gpuprep/preflight"
	"github.com/gpuprep/gpuprep/vfio"
)

// turingConf is what `gpuprep vfio bind --persist` writes for the Turing
// card's four functions (vfio/persist.go, planPersist).
const turingConf = "# gpuprep-devices: 0000:01:00.0=vfio-pci 0000:01:00.1=vfio-pci 0000:01:00.2=vfio-pci 0000:01:00.3=vfio-pci\n" +
	"softdep nouveau pre: vfio-pci\nsoftdep nvidia pre: vfio-pci\nsoftdep snd_hda_intel pre: vfio-pci\nsoftdep xhci_pci pre: vfio-pci\n" +
	"options vfio-pci ids=10de:10f8,10de:1ad8,10de:1ad9,10de:1e87\n"

// turingImage is the Debian 12 initramfs of the Turing node (initramfs-tools,
// nouveau copied in by the plymouth hook), with extra files.
func turingImage(extra map[string]string) map[string]string {
	k := "usr/lib/modules/6.1.0-18-amd64/"
	m := map[string]string{
		"conf/initramfs.conf":                           "MODULES=most\n",
		"scripts/functions":                             "load_modules()\n{\n\t:\n}\n",
		"etc/modprobe.d/intel-microcode-blacklist.conf": "blacklist microcode\n",
		k + "kernel/drivers/gpu/drm/nouveau/nouveau.ko": "ELF",
		k + "kernel/drivers/vfio/pci/vfio-pci.ko":       "ELF",
		k + "modules.alias":                             "alias pci:v000010DEd*sv*sd*bc03sc*i* nouveau\n",
	}
	for p, c := range extra {
		m[p] = c
	}
	return m
}

// boundTuring is the Turing card with every function on vfio-pci and
// gpuprep's persistent files written an hour ago; img (nil: none) is
// /boot/initrd.img-6.1.0-18-amd64, made at imgTime.
func boundTuring(t *testing.T, img []byte, imgTime time.Time) string {
	dir := t.TempDir()
	b := fixture.New(dir)
	fixture.TuringMultifunction(b)
	for _, a := range []string{"0000:01:00.0", "0000:01:00.1", "0000:01:00.2", "0000:01:00.3"} {
		b.Remove(b.DevPath(a)+"/driver").Link(b.DevPath(a)+"/driver", "/sys/bus/pci/drivers/vfio-pci")
	}
	b.Mkdir("/sys/bus/pci/drivers/vfio-pci")
	hourAgo := time.Now().Add(-time.Hour)
	b.File(vfio.ModprobeConf, turingConf).Touch(vfio.ModprobeConf, hourAgo)
	b.File(vfio.ModulesLoad, "vfio\nvfio_iommu_type1\nvfio_pci\n").Touch(vfio.ModulesLoad, hourAgo)
	if img != nil {
		b.Bytes("/boot/initrd.img-6.1.0-18-amd64", img).Touch("/boot/initrd.img-6.1.0-18-amd64", imgTime)
	}
	require.NoError(t, b.Err())
	return dir
}

// Killed during update-initramfs: gpuprep's files are written, the old
// initramfs (with nouveau, without them) is in place. The files alone say
// "bound at boot"; the image says the next boot hands the GPU to nouveau,
// and vfio.binding fails naming it.
func TestVFIOBindingStaleImageFails(t *testing.T) {
	mkimage.Need(t, "zstd")
	img := mkimage.Image(t, mkimage.Microcode, turingImage(nil), "zstd")
	_, res := runRoot(t, boundTuring(t, img, time.Now().Add(-24*time.Hour)))
	f := one(t, res, "vfio.binding", "0000:01:00.0", preflight.VMPassthrough)
	require.Equal(t, preflight.Fail, f.Status, f.Message)
	require.Contains(t, f.Message, "bound to vfio-pci until the next boot: initramfs /boot/initrd.img-6.1.0-18-amd64 carries nouveau, which takes it at early boot")
	require.Contains(t, f.Message, "the initramfs /boot/initrd.img-6.1.0-18-amd64 lacks "+vfio.ModprobeConf)
	require.Contains(t, f.Remedy, "regenerate the initramfs")
	require.Contains(t, res.Modes[preflight.VMPassthrough].Blockers, "vfio.binding")

	// the same image, newer than the files (made for them, mtimes say, but
	// without them): the image still decides
	_, res = runRoot(t, boundTuring(t, img, time.Now()))
	require.Equal(t, preflight.Fail, one(t, res, "vfio.binding", "0000:01:00.0", preflight.VMPassthrough).Status)
}

// A fresh image carrying gpuprep's options passes and names the image and
// what loads vfio-pci there (the softdep on nouveau, which udev loads by
// alias before conf/modules); one where
// nothing in the image takes the GPU passes on the root's files, saying so.
func TestVFIOBindingFreshImagePasses(t *testing.T) {
	mkimage.Need(t, "zstd")
	img := mkimage.Image(t, mkimage.Microcode, turingImage(map[string]string{
		"conf/modules": "vfio-pci\n", "etc/modprobe.d/gpuprep-vfio.conf": turingConf}), "zstd")
	_, res := runRoot(t, boundTuring(t, img, time.Now()))
	f := one(t, res, "vfio.binding", "0000:01:00.0", preflight.VMPassthrough)
	require.Equal(t, preflight.Pass, f.Status, f.Message)
	require.Equal(t, "bound to vfio-pci; at the next boot: initramfs /boot/initrd.img-6.1.0-18-amd64 loads vfio-pci (etc/modprobe.d/gpuprep-vfio.conf:2 (softdep nouveau pre: vfio-pci)) with ids=10de:10f8,10de:1ad8,10de:1ad9,10de:1e87 (etc/modprobe.d/gpuprep-vfio.conf:6)", f.Message)

	noGPUDriver := turingImage(map[string]string{"etc/modprobe.d/gpuprep-vfio.conf": turingConf})
	delete(noGPUDriver, "usr/lib/modules/6.1.0-18-amd64/kernel/drivers/gpu/drm/nouveau/nouveau.ko")
	_, res = runRoot(t, boundTuring(t, mkimage.Image(t, nil, noGPUDriver, "zstd"), time.Now()))
	f = one(t, res, "vfio.binding", "0000:01:00.0", preflight.VMPassthrough)
	require.Equal(t, preflight.Pass, f.Status, f.Message)
	require.Contains(t, f.Message, "initramfs /boot/initrd.img-6.1.0-18-amd64 neither takes it nor binds it, and gpuprep's persistent configuration")
}

// An image gpuprep cannot read: the verdict rests on the files and says
// so; with the files newer than the image, it is a warning, not a pass.
func TestVFIOBindingUnreadableImage(t *testing.T) {
	garbage := []byte("BZh91AY&SY not read")
	dir := boundTuring(t, garbage, time.Now().Add(-24*time.Hour))
	_, res := runRoot(t, dir)
	f := one(t, res, "vfio.binding", "0000:01:00.0", preflight.VMPassthrough)
	require.Equal(t, preflight.Warn, f.Status, f.Message)
	require.Contains(t, f.Message, "(evidence: the root's files only: the initramfs /boot/initrd.img-6.1.0-18-amd64 could not be read whole")
	require.Contains(t, f.Message, "compressed with bzip2")
	require.Contains(t, f.Message, "is older than "+vfio.ModprobeConf)

	now := time.Now()
	require.NoError(t, os.Chtimes(filepath.Join(dir, "boot/initrd.img-6.1.0-18-amd64"), now, now))
	_, res = runRoot(t, dir)
	f = one(t, res, "vfio.binding", "0000:01:00.0", preflight.VMPassthrough)
	require.Equal(t, preflight.Pass, f.Status, f.Message)
	require.Contains(t, f.Message, "evidence: the root's files only")
}
