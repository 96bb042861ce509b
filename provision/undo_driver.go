package provision

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gpuprep/gpuprep/internal/effect"
	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/pci"
	"github.com/gpuprep/gpuprep/vfio"
	"github.com/gpuprep/gpuprep/vgpu"
)

// restoreDriver puts addr back on driver want ("" unbound). known are the
// drivers gpuprep's journal moved it from and to: a device on none of them
// (nor unbound, which every move passes through) was moved by something
// else since (the GPU Operator's driver container binding a GPU gpuprep
// left unbound), and is left where it is unless force: an error, as for a
// file edited since, so that the journal keeps it and rollback --force can
// still move it. On an NVSwitch board (hgx) a device on VFIO is left for
// the next boot unless force; a device whose driver is not loaded (nouveau,
// which apply unloaded and rollback never loads) is left unbound. Either is
// listed in res.Left, and left reports it: its entries are not recorded
// undone, so that a later rollback (--force, or after the boot) finishes it.
// Every outcome is logged on one line saying what became of the device.
func restoreDriver(e effect.Effector, addr, want string, known []string, hgx, force bool, res *RollbackResult) (left bool, err error) {
	dev := "/sys/bus/pci/devices/" + addr
	if !e.Root.Exists(dev) {
		return false, fmt.Errorf("%s: no such device", addr)
	}
	cur := e.Root.LinkBase(dev + "/driver")
	if held, err := holdBack(e, addr, cur, want, known, hgx, force, res); held {
		return true, err
	}
	ov, wantOv := overrides(e, dev, want)
	if cur == want && (ov == wantOv || want != "" && ov == "") {
		return false, nil
	}
	if err := clearForBind(e, dev, addr, cur, want, ov, wantOv, force); err != nil {
		return false, err
	}
	return bindBack(e, dev, addr, cur, want, res)
}

// holdBack reports whether addr, on cur, stays where it is (unless force):
// on a driver gpuprep never moved it to (an error, movedSince), or on VFIO
// on a board with NVSwitches (hgx: until the next boot, leaveForBoot).
func holdBack(e effect.Effector, addr, cur, want string, known []string, hgx, force bool, res *RollbackResult) (bool, error) {
	if force {
		return false, nil
	}
	if cur != "" && cur != want && !slices.Contains(known, cur) {
		return true, movedSince(e, addr, cur, want, res)
	}
	if pci.DriverIsVFIO(cur) && !pci.DriverIsVFIO(want) && hgx {
		leaveForBoot(e, addr, cur, want, res)
		return true, nil
	}
	return false, nil
}

// clearForBind takes addr off cur when that is not want, and sets its
// driver_override from ov to wantOv ("\n" clears it) when they differ.
func clearForBind(e effect.Effector, dev, addr, cur, want, ov, wantOv string, force bool) error {
	if cur != "" && cur != want {
		if err := unbindFrom(e, dev, addr, cur, force); err != nil {
			return err
		}
	}
	if ov == wantOv {
		return nil
	}
	v := wantOv
	if v == "" {
		v = "\n"
	}
	if err := writeAttr(e, dev+"/driver_override", v); err != nil {
		return fmt.Errorf("%s: driver_override: %w", addr, err)
	}
	return nil
}

// movedSince: addr is on cur, a driver gpuprep never moved it to; left
// there (until rollback --force), said in the error.
func movedSince(e effect.Effector, addr, cur, want string, res *RollbackResult) error {
	why := fmt.Sprintf("on %s now, a driver gpuprep never moved it to: something moved it since", cur)
	hint := "rollback --force puts it back on " + orNone(want)
	if want != "" && !e.Root.Exists("/sys/bus/pci/drivers/"+want) {
		hint = fmt.Sprintf("rollback --force takes it off %s; %s is not loaded", cur, want)
	}
	msg := fmt.Sprintf("%s: left on %s, not put back on %s: %s (%s)", addr, cur, orNone(want), why, hint)
	e.Logf("%s", msg)
	res.Left = append(res.Left, Left{Kind: "driver", Target: addr, Driver: cur, Want: want, Why: why, Until: LeftUntilForce})
	return errors.New(msg)
}

// leaveForBoot leaves addr, on VFIO on a board with NVSwitches, for the
// next boot.
func leaveForBoot(e effect.Effector, addr, cur, want string, res *RollbackResult) {
	// not live on a board with NVSwitches (as apply and vfio unbind):
	// the files restored above leave it to its driver at the next boot
	why := "on a board with NVSwitches, moving a GPU off vfio-pci while the system runs starts NVLink training that can hang it"
	e.Logf("%s: left on %s until the next boot, which gives it back to %s: %s (rollback --force moves it now)", addr, cur, orNone(want), why)
	res.Left = append(res.Left, Left{Kind: "driver", Target: addr, Driver: cur, Want: want, Why: why, Until: LeftUntilReboot})
	res.rebootFor("the devices left on vfio-pci go back to their driver at the next boot")
}

// overrides are addr's driver_override now and the one want needs.
func overrides(e effect.Effector, dev, want string) (ov, wantOv string) {
	ov, _ = e.Root.ReadString(dev + "/driver_override")
	if ov == "(null)" {
		ov = ""
	}
	if pci.DriverIsVFIO(want) {
		wantOv = want
	}
	return ov, wantOv
}

// unbindFrom takes addr off cur; not off VFIO while its IOMMU group is
// held open (a VM), unless force.
func unbindFrom(e effect.Effector, dev, addr, cur string, force bool) error {
	if pci.DriverIsVFIO(cur) && !force {
		if g := e.Root.LinkBase(dev + "/iommu_group"); g != "" {
			if hs := vfio.Holders(e.Root, vfio.GroupNode(g)); len(hs) > 0 {
				var names []string
				for _, h := range hs {
					names = append(names, fmt.Sprintf("%s (pid %d)", h.Comm, h.PID))
				}
				return fmt.Errorf("%s: IOMMU group %s is in use (a VM?): /dev/vfio/%s is held open by %s; stop it or pass --force", addr, g, g, strings.Join(names, ", "))
			}
		}
	}
	if err := writeAttr(e, dev+"/driver/unbind", addr); err != nil {
		return fmt.Errorf("%s: unbind from %s: %w", addr, cur, err)
	}
	return nil
}

// bindBack binds addr, off cur, to want; left: want is not loaded, and
// addr stays unbound.
func bindBack(e effect.Effector, dev, addr, cur, want string, res *RollbackResult) (left bool, err error) {
	w := func(p, v string) error { return writeAttr(e, p, v) }
	action := "left unbound (it had no driver)"
	if want != "" && e.Root.LinkBase(dev+"/driver") != want {
		if !e.Root.Exists("/sys/bus/pci/drivers/" + want) {
			why, until := driverNotLoaded(e.Root, want)
			if cur != "" {
				e.Logf("%s: %s -> none: left unbound, not put back on %s: %s", addr, cur, want, why)
				res.Undone = append(res.Undone, Undo{Kind: "driver", Target: addr, Action: "left unbound (" + want + " not loaded)"})
			} else {
				e.Logf("%s: left unbound, not put back on %s: %s", addr, want, why)
			}
			res.Left = append(res.Left, Left{Kind: "driver", Target: addr, Want: want, Why: why, Until: until})
			if until == LeftUntilReboot {
				res.rebootFor(fmt.Sprintf("the next boot loads %s for the devices left unbound (or: modprobe %s)", want, want))
			}
			return true, nil
		}
		if err := w("/sys/bus/pci/drivers/"+want+"/bind", addr); err != nil {
			return false, fmt.Errorf("%s: bind to %s: %w", addr, want, err)
		}
		if d := e.Root.LinkBase(dev + "/driver"); d != want {
			return false, fmt.Errorf("%s: on %q, not %s, after the bind", addr, d, want)
		}
		action = "back on " + want
	} else if want != "" {
		action = "back on " + want
	}
	e.Logf("%s: %s -> %s", addr, orNone(cur), orNone(want))
	res.Undone = append(res.Undone, Undo{Kind: "driver", Target: addr, Action: action})
	return false, nil
}

// driverNotLoaded says why a device is left off drv, a driver that is not
// loaded, and what puts it back: the next boot, which loads it, unless a
// modprobe.d file other than gpuprep's (which rollback removes) blacklists
// it.
func driverNotLoaded(root *host.Root, drv string) (why, until string) {
	why = fmt.Sprintf("%s, its driver before gpuprep, is not loaded", drv)
	if drv == "nouveau" {
		why += " (apply unloaded it; rollback does not load it)"
		if !vgpu.PlanNouveauBlacklist(root, vgpu.NouveauBlacklist, vfio.ModprobeConf).Write {
			return why + "; modprobe.d blacklists it, not gpuprep: load it yourself (modprobe nouveau)", LeftUntilManual
		}
	}
	return why + "; the next boot loads it (or: modprobe " + drv + ")", LeftUntilReboot
}

// nvswitchBoard reports whether the host has NVIDIA NVSwitches: an HGX
// board, where GPUs do not leave vfio-pci live.
func nvswitchBoard(root *host.Root) bool {
	inv, err := pci.Discover(root)
	return err == nil && len(pci.NVSwitches(inv)) > 0
}

// writeAttr is one sysfs write with a time limit (a bind can hang in a probe).
func writeAttr(e effect.Effector, p, v string) error {
	done := make(chan error, 1)
	go func() { done <- e.Sysfs.WriteAttr(p, v) }()
	t := time.NewTimer(vfio.DefaultTimeout)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		return fmt.Errorf("write %q to %s: no answer after %s", strings.TrimSpace(v), p, vfio.DefaultTimeout)
	}
}
