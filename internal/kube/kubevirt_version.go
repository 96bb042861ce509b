package kube

import (
	"fmt"
	"regexp"
	"strconv"
	"sync"
)

// KubeVirtVersion is a KubeVirt release, major.minor, which says what its
// virt-handler can allocate (kubevirt config --kubevirt-version).
type KubeVirtVersion struct{ Major, Minor int }

// DefaultKubeVirtVersion is what kubevirt config assumes without
// --kubevirt-version: v1.9, the current KubeVirt release (v1.9.0, commit
// 79d34c1762169e5b0370ec491cef5ca12e6b504c, 2026-07-27).
var DefaultKubeVirtVersion = KubeVirtVersion{1, 9}

// VendorVGPUSince is the first KubeVirt release whose own PCI device plugin
// allocates the VFs of vendor-specific VFIO vGPUs: kubevirt/kubevirt PR
// #16890 ("vGPU: SRIOV support", commit 3851301d07, "pci device plugin:
// Support SRIOV based vGPU"), in v1.9.0 (pkg/virt-handler/device-manager/
// nvidia.go shouldPermitNvidia: a device on driver nvidia that is not a
// Physical Function, no sriov_totalvfs, and whose nvidia/current_vgpu_type
// is neither empty nor 0, common.go HasVGPUProfile). Before it (v1.8.4 and
// every earlier tag, pci_device.go discoverPermittedHostPCIDevices) the PCI
// device plugin takes devices on vfio-pci only, and nothing in KubeVirt can
// allocate such a VF.
var VendorVGPUSince = KubeVirtVersion{1, 9}

var kubevirtVersionRe = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^v?(\d{1,4})\.(\d{1,4})(?:\.\d{1,4})?(?:-[0-9A-Za-z.]{1,40})?$`)
})

// ParseKubeVirtVersion reads "1.9", "v1.9.0" or "v1.9.0-rc.1" (the
// pre-release counts as its release: v1.9.0-rc has PR #16890 too).
func ParseKubeVirtVersion(s string) (KubeVirtVersion, error) {
	m := kubevirtVersionRe().FindStringSubmatch(s)
	if m == nil {
		return KubeVirtVersion{}, fmt.Errorf("--kubevirt-version %q: want a KubeVirt release, MAJOR.MINOR[.PATCH] (e.g. 1.9 or v1.9.0)", s)
	}
	maj, _ := strconv.Atoi(m[1])
	min, _ := strconv.Atoi(m[2])
	return KubeVirtVersion{maj, min}, nil
}

// AtLeast reports whether v is o or later.
func (v KubeVirtVersion) AtLeast(o KubeVirtVersion) bool {
	return v.Major > o.Major || v.Major == o.Major && v.Minor >= o.Minor
}

func (v KubeVirtVersion) String() string { return fmt.Sprintf("%d.%d", v.Major, v.Minor) }

// orDefault is v, or DefaultKubeVirtVersion when v is not set.
func (v KubeVirtVersion) orDefault() KubeVirtVersion {
	if v == (KubeVirtVersion{}) {
		return DefaultKubeVirtVersion
	}
	return v
}
