package vgpu

import (
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/kernelrelease"
	"github.com/gpuprep/gpuprep/internal/plural"
)

// Prereq is one prerequisite of installing the vGPU manager.
type Prereq struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
	Remedy string `json:"remedy,omitempty"`
}

// GPUInfo is what the install plan needs to know of a GPU.
type GPUInfo struct {
	Address  string
	DeviceID string // four lower-case hex digits
}

// UsesSRIOV reports whether a GPU runs vGPU on SR-IOV virtual functions:
// Ampere and newer do; Turing and older use mdev on the PF although many
// report sriov_totalvfs > 0 (a T4 reports 16). Before the vGPU manager is
// installed nothing else tells them apart, so the decision is made from the
// device ID (Turing and older are below 0x2000, and TU116/TU117 sit in
// 0x2180–0x21ff) together with sriov_totalvfs.
func UsesSRIOV(root *host.Root, g GPUInfo) bool {
	if readInt(root, "/sys/bus/pci/devices/"+g.Address+"/sriov_totalvfs") <= 0 {
		return false
	}
	id, err := strconv.ParseUint(g.DeviceID, 16, 16)
	if err != nil {
		return false
	}
	return id >= 0x2000 && !(id >= 0x2180 && id <= 0x21ff)
}

// SecureBootVar is the EFI variable that holds the Secure Boot state.
const SecureBootVar = "/sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c"

// SecureBoot reports whether Secure Boot is on: the variable holds 4
// attribute bytes, then 1 when enabled. known is false when the variable is
// absent (BIOS boot, or efivarfs not mounted).
func SecureBoot(root *host.Root) (on, known bool) {
	b, err := root.ReadFile(SecureBootVar)
	if err != nil || len(b) < 5 {
		return false, false
	}
	return b[4] == 1, true
}

// signingKeyPairs are module signing keys configured on common distributions:
// DKMS's own (Ubuntu 22.04+, DKMS 3) and shim-signed's MOK (Ubuntu).
var signingKeyPairs = [][2]string{
	{"/var/lib/dkms/mok.key", "/var/lib/dkms/mok.pub"},
	{"/var/lib/shim-signed/mok/MOK.priv", "/var/lib/shim-signed/mok/MOK.der"},
}

// ModuleAvailable reports whether the kernel module name (dashes and
// underscores alike) is built in to kernel kver or listed in its modules.dep.
func ModuleAvailable(root *host.Root, kver, name string) bool {
	want := strings.ReplaceAll(name, "-", "_")
	for _, f := range []string{"modules.dep", "modules.builtin"} {
		b, err := root.ReadFile("/lib/modules/" + kver + "/" + f)
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n") {
			mod, _, _ := strings.Cut(l, ":")
			base := path.Base(strings.TrimSpace(mod))
			if i := strings.Index(base, ".ko"); i > 0 {
				base = base[:i]
			}
			if strings.ReplaceAll(base, "-", "_") == want {
				return true
			}
		}
	}
	return false
}

// distro is the package-manager family of the root: "deb", "rpm", "suse" or "".
func distro(root *host.Root) string {
	b, _ := root.ReadFile("/etc/os-release")
	ids := ""
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok && (k == "ID" || k == "ID_LIKE") {
			ids += " " + strings.Trim(v, `"'`)
		}
	}
	switch {
	case strings.Contains(ids, "debian") || strings.Contains(ids, "ubuntu"):
		return "deb"
	case strings.Contains(ids, "suse"):
		return "suse"
	case strings.Contains(ids, "rhel") || strings.Contains(ids, "fedora") || strings.Contains(ids, "centos"):
		return "rpm"
	}
	return ""
}

func isUbuntu(root *host.Root) bool {
	b, _ := root.ReadFile("/etc/os-release")
	return strings.Contains(string(b), "ID=ubuntu")
}

func pkgHint(root *host.Root, deb, rpm, suse string) string {
	switch distro(root) {
	case "deb":
		return "apt-get install " + deb
	case "rpm":
		return "dnf install " + rpm
	case "suse":
		return "zypper install " + suse
	}
	return "install " + deb + " (Debian/Ubuntu) or " + rpm + " (RHEL family) with the distribution's package manager"
}

// KernelRelease is the running kernel's release, from the root.
func KernelRelease(root *host.Root) string {
	s, _ := kernelrelease.Running(root)
	return s
}

// pfStubPrereq is the pci-pf-stub module, which sriov-manage needs to
// enable the VFs of the sriov GPUs: loaded, or there for kernel kver.
func pfStubPrereq(root *host.Root, kver string, sriov []string) Prereq {
	p := Prereq{Name: "pci-pf-stub", OK: root.Exists("/sys/module/pci_pf_stub") || ModuleAvailable(root, kver, "pci-pf-stub"),
		Detail: "module pci-pf-stub, which sriov-manage needs to enable the VFs of " + strings.Join(sriov, ", ")}
	if !p.OK {
		p.Detail = "no module pci-pf-stub for " + kver + ": sriov-manage needs it to enable the VFs of " + strings.Join(sriov, ", ")
		if isUbuntu(root) {
			p.Remedy = "apt-get install linux-modules-extra-" + kver
		} else {
			p.Remedy = "install the kernel's extra modules package that has pci-pf-stub.ko (CONFIG_PCI_PF_STUB)"
		}
	}
	return p
}

// CheckPrereqs checks what building and loading the vGPU manager's kernel
// modules needs, in the root. format is the driver's (FormatRun, FormatDeb,
// FormatRPM): a package brings its DKMS dependency (and the compiler with
// it) through the package manager, so for one the package tool is checked
// instead of the compiler and DKMS. sriov lists the GPUs that use SR-IOV.
func CheckPrereqs(root *host.Root, opts InstallOptions, format string, sriov []string) []Prereq {
	var out []Prereq
	kver := KernelRelease(root)
	if kver == "" {
		return []Prereq{{Name: "kernel", Detail: "cannot read the running kernel's release (/proc/sys/kernel/osrelease)",
			Remedy: "run gpuprep on the host itself (with /proc mounted)"}}
	}

	hdr := Prereq{Name: "kernel headers", Detail: "no headers for the running kernel " + kver + " (looked for /lib/modules/" + kver + "/build, /usr/src/linux-headers-" + kver + ", /usr/src/kernels/" + kver + ")",
		Remedy: pkgHint(root, "linux-headers-"+kver, "kernel-devel-"+kver, "kernel-default-devel")}
	for _, d := range []string{"/lib/modules/" + kver + "/build", "/usr/src/linux-headers-" + kver, "/usr/src/kernels/" + kver} {
		if root.Exists(d + "/Makefile") {
			hdr.OK, hdr.Detail, hdr.Remedy = true, "kernel headers for "+kver+" in "+d, ""
			break
		}
	}
	out = append(out, hdr)

	if format == FormatDeb || format == FormatRPM {
		out = append(out, packageTool(root, format))
	} else {
		out = append(out, buildTools(root, opts, kver)...)
	}

	if len(sriov) > 0 {
		out = append(out, pfStubPrereq(root, kver, sriov))
	}

	sb := Prereq{Name: "secure boot", OK: true}
	on, known := SecureBoot(root)
	switch {
	case !known:
		sb.Detail = "Secure Boot state unknown (no " + path.Base(SecureBootVar) + "): legacy boot or efivarfs not mounted; unsigned modules load"
	case !on:
		sb.Detail = "Secure Boot off: unsigned modules load"
	default:
		key, cert := SigningKeys(root, opts)
		if key == "" {
			sb.OK = false
			sb.Detail = "Secure Boot is on and no module signing key is configured: the kernel would refuse the unsigned nvidia modules"
			sb.Remedy = "create a key pair and enrol it (e.g. `update-secureboot-policy --new-key` on Ubuntu, or openssl + `mokutil --import KEY.der`, then reboot to confirm), and pass --signing-key/--signing-cert; or turn Secure Boot off in the firmware"
			if format == FormatDeb || format == FormatRPM {
				sb.Detail = "Secure Boot is on and DKMS has no module signing key: the kernel would refuse the nvidia modules DKMS builds for the package"
				sb.Remedy = "create DKMS's key pair (/var/lib/dkms/mok.key, mok.pub: `update-secureboot-policy --new-key` on Ubuntu, or openssl, or mok_signing_key in /etc/dkms/framework.conf) and enrol it (`mokutil --import /var/lib/dkms/mok.pub`, then reboot to confirm); or turn Secure Boot off in the firmware"
			}
		} else {
			sb.Detail = "Secure Boot on: the modules are signed with " + key + " (" + cert + "), which must be enrolled (mokutil --test-key " + cert + ")"
		}
	}
	out = append(out, sb)
	return out
}

// packageTool checks that the tool that installs a .deb (dpkg, and apt-get
// for its dependencies) or an .rpm (rpm, and dnf) is in the root.
func packageTool(root *host.Root, format string) Prereq {
	tool, resolver, other := "dpkg", "apt-get", "the .rpm"
	if format == FormatRPM {
		tool, resolver, other = "rpm", "dnf", "the .deb"
	}
	p := Prereq{Name: "package tool", OK: true}
	switch {
	case root.FindProgram(tool) == "":
		p.OK = false
		p.Detail = "no " + tool + ": this host does not install ." + format + " packages"
		p.Remedy = "use the vGPU manager package for this distribution (" + other + ") or the .run from the same NVIDIA download"
	case root.FindProgram(resolver) != "":
		p.Detail = resolver + " installs the ." + format + " with its dependencies (DKMS builds the modules)"
	case root.FindProgram("dkms") != "":
		p.Detail = "no " + resolver + ": " + tool + " installs the ." + format + " without resolving its dependencies (dkms is there)"
	default:
		p.OK = false
		p.Detail = "no " + resolver + " and no dkms: " + tool + " alone does not install the ." + format + "'s dependencies"
		p.Remedy = "install dkms and the compiler with the distribution's package manager"
	}
	return p
}

// buildTools checks what the .run builds its modules with: a compiler,
// make and DKMS.
func buildTools(root *host.Root, opts InstallOptions, kver string) []Prereq {
	cc := root.FindProgram("cc", "gcc")
	mk := root.FindProgram("make")
	tc := Prereq{Name: "compiler", OK: cc != "" && mk != "", Detail: "C compiler " + orNone(cc) + ", make " + orNone(mk)}
	if !tc.OK {
		var miss []string
		if cc == "" {
			miss = append(miss, "no C compiler (cc or gcc)")
		}
		if mk == "" {
			miss = append(miss, "no make")
		}
		tc.Detail = strings.Join(miss, " and ") + " on PATH (" + host.ProgramPath() + "): the installer builds the kernel modules"
		tc.Remedy = pkgHint(root, "build-essential", "gcc make", "gcc make")
	}
	out := []Prereq{tc}

	dkms := root.FindProgram("dkms")
	switch {
	case opts.NoDKMS:
		out = append(out, Prereq{Name: "dkms", OK: true, Detail: "--no-dkms: the modules are built for " + kver + " only; after a kernel update run gpuprep vgpu install again"})
	case dkms != "":
		out = append(out, Prereq{Name: "dkms", OK: true, Detail: dkms + ": the modules are registered with DKMS and rebuilt for new kernels"})
	default:
		out = append(out, Prereq{Name: "dkms", Detail: "no dkms: without it the next kernel update leaves the host without the vGPU manager",
			Remedy: pkgHint(root, "dkms", "dkms (from EPEL)", "dkms") + ", or pass --no-dkms to build for this kernel only"})
	}

	return out
}

// SigningKeys returns the module signing key pair to use: the options', else
// one found in the root.
func SigningKeys(root *host.Root, opts InstallOptions) (key, cert string) {
	if opts.SigningKey != "" || opts.SigningCert != "" {
		return opts.SigningKey, opts.SigningCert
	}
	for _, kp := range signingKeyPairs {
		if root.Exists(kp[0]) && root.Exists(kp[1]) {
			return kp[0], kp[1]
		}
	}
	return "", ""
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// PrereqError is returned when prerequisites are missing.
type PrereqError struct{ Missing []Prereq }

func (e *PrereqError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s of the vGPU manager missing:", plural.N(len(e.Missing), "prerequisite"))
	for _, p := range e.Missing {
		fmt.Fprintf(&b, "\n  - %s: %s", p.Name, p.Detail)
		if p.Remedy != "" {
			fmt.Fprintf(&b, "\n    fix: %s", p.Remedy)
		}
	}
	return b.String()
}
