package preflight

// uncaptured reports whether dir is absent from a root that is not the
// running system (--root: a snapshot, another tool's capture). On the
// running system the kernel creates /sys/class/iommu, /dev and /sys/module
// itself, so their absence there is evidence; in a capture it may be only
// what the capture left out, and a check must say it cannot tell.
func uncaptured(e *Env, dir string) bool {
	return !e.Root.IsLive() && !e.Root.Exists(dir)
}
