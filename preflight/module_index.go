package preflight

import (
	"os"
	"strings"
)

// unreadableModuleIndex is vfio.modules' error when the running kernel's
// module index (modules.dep: the modules installed; modules.builtin: those
// built in) cannot be read, so whether the modules in unknown can be
// loaded cannot be told: a root captured without /lib/modules, a kernel
// whose modules a package upgrade removed, an index depmod never wrote.
// What cannot be read is no evidence that they are missing.
func unreadableModuleIndex(e *Env, base string, unknown []string, errDep, errBuiltin error) Finding {
	why := indexUnread(e, base, errDep, errBuiltin)
	return Finding{Status: Error, Subject: base,
		Message: "cannot tell whether " + strings.Join(unknown, ", ") + " can be loaded on kernel " + e.Host.Kernel + ": its module index cannot be read (" + why + ")",
		Remedy:  "on the node: install the running kernel's modules package (or boot a kernel whose modules are installed) and run depmod; with --root: give it a root that holds " + base}
}

// indexUnread says what of the module index under base cannot be read.
func indexUnread(e *Env, base string, errDep, errBuiltin error) string {
	var why string
	if !e.Root.Exists(base) {
		why = base + " is missing"
		if others := e.Root.Names("/lib/modules"); len(others) > 0 {
			why += " (/lib/modules holds " + strings.Join(others, ", ") + ")"
		}
	} else {
		var bad []string
		for _, f := range []struct {
			name string
			err  error
		}{{"modules.dep", errDep}, {"modules.builtin", errBuiltin}} {
			switch {
			case f.err == nil:
			case os.IsNotExist(f.err):
				bad = append(bad, base+"/"+f.name+" missing")
			default:
				bad = append(bad, base+"/"+f.name+" not readable ("+f.err.Error()+")")
			}
		}
		why = strings.Join(bad, ", ")
	}
	return why
}

// noModuleTree is vfio.modules' fail on the running system itself when the
// running kernel has no /lib/modules/RELEASE (a package upgrade removed it,
// a kernel built without modules): modprobe looks for modules only there,
// and a built-in vfio_pci or vfio_iommu_type1 would show in /sys/module
// (each has parameters, which a built-in module keeps there). On another
// root (--root) a missing tree may be one its capture left out: that is
// unreadableModuleIndex's error.
// vfio itself is left out of the evidence: it may have no parameters, and a
// built-in vfio_pci needs a built-in vfio anyway.
func noModuleTree(e *Env, base string, unknown []string) (Finding, bool) {
	var sure []string
	for _, m := range unknown {
		if m != "vfio" {
			sure = append(sure, m)
		}
	}
	if len(sure) == 0 {
		return Finding{}, false
	}
	return Finding{Status: Fail, Subject: base,
		Message: "kernel " + e.Host.Kernel + " has no " + base + ", where modprobe looks for its modules, and " + strings.Join(sure, ", ") + " not in the running kernel (no /sys/module entry): vfio-pci cannot be loaded",
		Remedy:  "install the modules package of the running kernel (or boot a kernel whose modules are installed) and run depmod"}, true
}
