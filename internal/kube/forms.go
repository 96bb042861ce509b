package kube

import (
	"errors"
	"regexp"
	"strings"
	"sync"
	"unicode"

	"k8s.io/apimachinery/pkg/api/validate/content"

	"github.com/gpuprep/gpuprep/vgpu"
)

// The forms of the host values that become values of the documents gpuprep
// emits (or name a host in their notes). A report's value that is not in
// its form is refused (CheckHost): the report did not come from gpuprep
// check as it is.
var (
	pciIDRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9a-fA-F]{4}$`) })
	// a PCI address as sysfs names it: domain (4 hex digits, more for a
	// VMD domain), bus, device, function
	pciAddrRe = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-1][0-9a-fA-F]\.[0-7]$`)
	})
	groupRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9]{1,10}$`) })
	// an mdev type's directory: the kernel names it "<parent's driver>-<the
	// vendor driver's type name>" (mdev_type_add); NVIDIA's driver numbers
	// its types (nvidia-256)
	mdevTypeIDRe       = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_]+-[A-Za-z0-9_.:+-]+$`) })
	nvidiaMdevTypeIDRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^nvidia-[0-9]{1,6}$`) })
	// a vGPU type of the vendor-specific VFIO framework: the number
	// creatable_vgpu_types lists it by
	sriovTypeIDRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9]{1,6}$`) })
	// a vGPU type's name as NVIDIA names them ("GRID T4-1Q", "NVIDIA
	// A100-4-20C", "NVIDIA H200X-141C"): words of letters and digits joined
	// by one space, '-', '_' or '.'
	vgpuTypeNameRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9]+([ ._-][A-Za-z0-9]+)*$`) })
)

// checkPCIID: a PCI vendor or device ID is four hex digits.
func checkPCIID(s string) error {
	if !pciIDRe().MatchString(s) {
		return errors.New("not a PCI ID (four hex digits)")
	}
	return nil
}

// checkPCIAddress: a PCI address as in sysfs (0000:13:00.0).
func checkPCIAddress(s string) error {
	if !pciAddrRe().MatchString(s) {
		return errors.New("not a PCI address (DDDD:BB:DD.F)")
	}
	return nil
}

// checkIOMMUGroup: an IOMMU group is a number, or unknown ("").
func checkIOMMUGroup(s string) error {
	if s != "" && !groupRe().MatchString(s) {
		return errors.New("not an IOMMU group number")
	}
	return nil
}

// checkResourceName: what NVIDIA's device plugins advertise is an extended
// resource name under nvidia.com/, by Kubernetes' rules
// (IsExtendedResourceName): a qualified name, also with the quota prefix
// "requests.".
func checkResourceName(s string) error {
	if !strings.HasPrefix(s, "nvidia.com/") {
		return errors.New("not an NVIDIA extended resource name (nvidia.com/NAME)")
	}
	for _, q := range []string{s, "requests." + s} {
		if errs := content.IsLabelKey(q); len(errs) > 0 {
			return errors.New("not a Kubernetes extended resource name: " + strings.Join(errs, "; "))
		}
	}
	return nil
}

// checkVGPUTypeID: an mdev type's directory name (of NVIDIA's driver:
// nvidia-NNN), or a number on the vendor-specific VFIO framework.
func checkVGPUTypeID(iface, vendor, id string) error {
	switch {
	case iface == "sriov" && !sriovTypeIDRe().MatchString(id):
		return errors.New("not a vGPU type number (creatable_vgpu_types)")
	case iface == "mdev" && vendor == "10de" && !nvidiaMdevTypeIDRe().MatchString(id):
		return errors.New("not an NVIDIA mdev type (nvidia-NNN)")
	case iface == "mdev" && !mdevTypeIDRe().MatchString(id):
		return errors.New("not an mdev type (DRIVER-TYPE)")
	}
	return nil
}

// checkVGPUTypeName: a vGPU type's name, which KubeVirt's mdevNameSelector
// matches and whose resource name (spaces as '_') must be an extended
// resource name.
func checkVGPUTypeName(s string) error {
	if !vgpuTypeNameRe().MatchString(s) {
		return errors.New("not a vGPU type name (letters and digits, words joined by a space, '-', '_' or '.')")
	}
	return checkResourceName(vgpu.ResourceName(s))
}

// checkHostName: a host's name in a report (its hostname, or its name in
// the inventory): a DNS name or an address, as Ansible reads host names
// (letters and digits of any script, '.', '-', '_'), with the ':' and
// brackets of an IPv6 address and the '@' and '+' of an alias.
func checkHostName(s string) error {
	if s == "" || len(s) > 253 || s[0] == '-' {
		return errors.New("not a host name")
	}
	for _, r := range s {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) && !strings.ContainsRune("._-:[]@+", r) {
			return errors.New("not a host name (letters, digits, '.', '-', '_'; ':' and brackets of an IPv6 address)")
		}
	}
	return nil
}
