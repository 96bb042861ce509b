package preflight

import (
	"strings"

	"github.com/gpuprep/gpuprep/internal/initramfs"
	"github.com/gpuprep/gpuprep/internal/pci"
	"github.com/gpuprep/gpuprep/vfio"
)

// bootImageEvidence judges a pass for g, on VFIO now with binders that
// bind it at boot, by what the next boot loads first: its initramfs. When
// the image is readable the verdict rests on it (and names it); a module
// of the image that takes g at early boot, with the image not loading
// vfio-pci with g's ID, is the GPU coming back on its own driver at the
// next boot whatever the root's files say (a bind killed during
// update-initramfs, a hand edit not regenerated). When it is not, the
// verdict rests on the files and says so, and a file newer than every
// image (vfio.InitramfsStale) is a warning: the next boot may load an
// initramfs without them.
func bootImageEvidence(e *Env, img *vfio.BootImage, g *pci.Device, binders []string, byAddress bool, f *Finding) {
	if f.Status != Pass || len(binders) == 0 {
		return
	}
	defer nextKernelEvidence(img, f)
	if why := img.NoInitramfs(); why != "" {
		// the kernel mounts the root itself: the binders above are what
		// acts, initramfs configuration already discounted (earlyload.go)
		f.Message += "; at the next boot: " + strings.Join(binders, "; ") + " (evidence: the kernel's built-in modules, its command line and the root's files: " + why + ", so no initramfs configuration applies)"
		return
	}
	if !img.Readable() {
		f.Message += "; at the next boot: " + strings.Join(binders, "; ") + " (evidence: the root's files only: " + img.Unread() + ")"
		if why := vfio.InitramfsStale(e.Root); why != "" {
			f.Status = Warn
			f.Message += ", but " + why + ": the next boot may load it without them"
			f.Remedy = regenerateRemedy(e, img)
		}
		return
	}
	p := img.Booted.Path
	ib := img.Binding(e.Root, g)
	switch {
	case ib.Binds:
		f.Message += "; at the next boot: initramfs " + p + " " + ib.How
	case ib.Taker != "":
		f.Status = Fail
		f.Message += " until the next boot: initramfs " + p + " carries " + ib.Taker + ", which takes it at early boot (its modules.alias matches), and does not load vfio-pci with " +
			g.VendorID + ":" + g.DeviceID + ", so it comes back on " + ib.Taker + " whatever the root's files say (" + strings.Join(binders, "; ") + ")" + staleWhy(e)
		f.Remedy = regenerateRemedy(e, img)
	case ib.EarlyNoID != "" && !byAddress:
		f.Status = Fail
		f.Message += " until the next boot: initramfs " + p + " " + ib.EarlyNoID + ", and modprobe does not load a loaded module again, so the root's `options vfio-pci ids=` are not applied after the initramfs" + staleWhy(e)
		f.Remedy = regenerateRemedy(e, img)
	case ib.NoAliases:
		f.Status = Warn
		f.Message += "; at the next boot: initramfs " + p + " holds modules but no modules.alias, so which of them takes it at early boot is unknown"
		f.Remedy = regenerateRemedy(e, img)
	default:
		f.Message += "; at the next boot: initramfs " + p + " neither takes it nor binds it, and " + strings.Join(binders, "; ") + " binds it after the switch to the root"
	}
}

// nextKernelEvidence names the next boot's kernel where it is not the
// running one, and makes a pass a warning where it is unknown: the verdict
// then read the running kernel's modules and image, an assumption.
func nextKernelEvidence(img *vfio.BootImage, f *Finding) {
	if o := img.OtherKernel(); o != "" {
		f.Message += " (" + o + ")"
	}
	if why := img.KernelUnknown(); why != "" && f.Status == Pass {
		f.Status = Warn
		f.Message += "; but " + why
		if f.Remedy == "" {
			f.Remedy = "make the bootloader's next entry readable under the root (its menu or loader entries), then run gpuprep check again"
		}
	}
}

func staleWhy(e *Env) string {
	if why, decided := vfio.ImageStale(e.Root); decided && why != "" {
		return " (" + why + ")"
	}
	return ""
}

// regenerateRemedy is the distribution's initramfs command for the next
// boot's kernel (update-initramfs -u alone remakes the newest kernel's
// image, which may not be the one that boots).
func regenerateRemedy(e *Env, img *vfio.BootImage) string {
	var cmd string
	switch c := initramfs.Command(e.Root); {
	case c == nil:
		return "regenerate the initramfs of kernel " + img.Kernel + " so that it carries the root's VFIO configuration (no initramfs tool found: update-initramfs, dracut or mkinitcpio), then run gpuprep check again"
	case c[0] == "update-initramfs":
		cmd = "update-initramfs -u -k " + img.Kernel
	case c[0] == "dracut":
		cmd = "dracut -f --kver " + img.Kernel
	default:
		cmd = strings.Join(c, " ")
	}
	return "regenerate the initramfs (" + cmd + ") so that it carries the root's VFIO configuration, then run gpuprep check again"
}
