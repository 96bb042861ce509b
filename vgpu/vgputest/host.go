// Package vgputest plays, on a fixture root, the host that `gpuprep vgpu
// install` changes: a synthetic NVIDIA vGPU manager .run (a real shell
// script, run by sh, followed by the gzipped tar that makeself puts after
// its header) that honours --silent and "installs" by writing the files and
// modules it would into the root, synthetic .deb (built
// with dpkg-deb) and .rpm (a stand-in) packages of it, and a host.Runner that
// executes that script, installs those packages and simulates modprobe,
// systemctl and sriov-manage against the root.
package vgputest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"sync"

	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/internal/host"
)

// FailEnv, set to 1 in the installer's environment, makes it fail as a
// kernel module build failure does.
const FailEnv = "FAKE_NVIDIA_INSTALLER_FAIL"

// RootEnv tells the synthetic installer which directory stands in for /.
const RootEnv = "FAKE_NVIDIA_ROOT"

// WriteInstaller writes a synthetic installer named
// NVIDIA-Linux-x86_64-<version>-<flavour>.run into dir and returns its path.
// flavour is "vgpu-kvm" for the vGPU manager ("grid" for the guest driver, ""
// for the plain driver). Its makeself-style header carries label and
// targetdir as NVIDIA's do.
func WriteInstaller(dir, version, flavour string) (string, error) {
	target := "NVIDIA-Linux-x86_64-" + version
	if flavour != "" {
		target += "-" + flavour
	}
	files := []string{"./nvidia-installer", "./kernel/nvidia.c"}
	if flavour == "vgpu-kvm" {
		files = append(files, "./nvidia-vgpu-mgr", "./nvidia-vgpud", "./sriov-manage", "./kernel/nvidia-vgpu-vfio/nvidia-vgpu-vfio.c")
	}
	payload, err := TarGz(files)
	if err != nil {
		return "", err
	}
	// the layout of makeself 2.1.x, which NVIDIA's .run files have: the
	// payload after the header's first LINES lines, filesizes its length
	// (makeself-header.sh of github.com/megastep/makeself)
	script := `#!/bin/sh
# This script was generated using Makeself 2.1.5 (synthetic, for gpuprep tests)
CRCsum="0000000000"
MD5="00000000000000000000000000000000"
TMPROOT=${TMPDIR:=/tmp}

label="NVIDIA Accelerated Graphics Driver for Linux-x86_64 ` + version + `"
script="./nvidia-installer"
targetdir="` + target + `"
filesizes="` + fmt.Sprint(len(payload)) + `"
keep=n
offset=` + "`head -n LINES \"$0\" | wc -c | tr -d \" \"`" + `

R="${` + RootEnv + `:?` + RootEnv + ` not set}"
silent=0
for a in "$@"; do
	case "$a" in
	--silent|-s) silent=1 ;;
	esac
done
mkdir -p "$R/var/log"
echo "${0##*/} $*" > "$R/var/log/nvidia-installer.log"
if [ "$silent" != 1 ]; then
	echo "nvidia-installer: interactive mode needs a terminal; use --silent" >&2
	exit 1
fi
if [ "${` + FailEnv + `:-}" = 1 ]; then
	echo "ERROR: An error occurred while performing the step: \"Building kernel modules\". See /var/log/nvidia-installer.log for details." >&2
	exit 1
fi
kver=$(cat "$R/proc/sys/kernel/osrelease")
mods="$R/lib/modules/$kver"
mkdir -p "$R/usr/bin" "$R/usr/lib/nvidia" "$R/lib/systemd/system" "$mods/kernel/drivers/video"
echo "version=` + version + `" > "$mods/kernel/drivers/video/nvidia.ko"
dep() { grep -qxF "$1" "$mods/modules.dep" 2>/dev/null || echo "$1" >> "$mods/modules.dep"; }
dep "kernel/drivers/video/nvidia.ko:"
echo '#!/bin/sh' > "$R/usr/bin/nvidia-smi"
echo '#!/bin/sh' > "$R/usr/bin/nvidia-installer"
# nvidia-installer's own record of what it installed, which its --uninstall
# reads (backup.c of github.com/NVIDIA/nvidia-installer: BACKUP_LOG
# /var/lib/nvidia/log; line 1 the version as
# create_backwards_compatible_version_string writes it, "1.0-<digits>
# (<version>)", line 2 the description, then "1: <file>" and its CRC for
# each INSTALLED_FILE, backup.h)
mkdir -p "$R/var/lib/nvidia"
log="$R/var/lib/nvidia/log"
printf '1.0-%s (%s)\n%s\n' "$(echo ` + version + ` | tr -d .)" ` + version + ` "NVIDIA Accelerated Graphics Driver for Linux-x86_64" > "$log"
inst() { printf '1: %s\n0\n' "$1" >> "$log"; }
inst "/lib/modules/$kver/kernel/drivers/video/nvidia.ko"; inst /usr/bin/nvidia-smi; inst /usr/bin/nvidia-installer
`
	if flavour == "vgpu-kvm" {
		script += `echo "version=` + version + `" > "$mods/kernel/drivers/video/nvidia-vgpu-vfio.ko"
if [ "${kver%%.*}" -lt 6 ]; then dep "kernel/drivers/video/nvidia-vgpu-vfio.ko: kernel/drivers/video/nvidia.ko"; fi
for b in nvidia-vgpu-mgr nvidia-vgpud; do echo '#!/bin/sh' > "$R/usr/bin/$b"; printf '[Unit]\nDescription=%s\n[Service]\nExecStart=/usr/bin/%s\n[Install]\nWantedBy=multi-user.target\n' $b $b > "$R/lib/systemd/system/$b.service"; done
echo '#!/bin/sh' > "$R/usr/lib/nvidia/sriov-manage"
inst "/lib/modules/$kver/kernel/drivers/video/nvidia-vgpu-vfio.ko"; inst /usr/lib/nvidia/sriov-manage
for b in nvidia-vgpu-mgr nvidia-vgpud; do inst "/usr/bin/$b"; inst "/lib/systemd/system/$b.service"; done
`
	}
	script += "exit 0\n"
	script = strings.Replace(script, "LINES", fmt.Sprint(strings.Count(script, "\n")), 1)
	p := filepath.Join(dir, target+".run")
	return p, os.WriteFile(p, append([]byte(script), payload...), 0o644)
}

// TarGz is a gzip-compressed tar of empty files with these names, as a
// makeself payload holds.
func TarGz(names []string) ([]byte, error) {
	var buf bytes.Buffer
	z := gzip.NewWriter(&buf)
	tw := tar.NewWriter(z)
	for _, n := range names {
		if err := tw.WriteHeader(&tar.Header{Name: n, Mode: 0o644, Typeflag: tar.TypeReg}); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := z.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Host is a host.Runner for a fixture root. Commands:
//
//   - sh FILE.run ARGS: runs the synthetic installer with RootEnv set (and
//     InstallerEnv), which records what it installed in /var/lib/nvidia/log
//     as nvidia-installer does; /usr/bin/nvidia-installer --uninstall
//     --silent removes that (see uninstallRun);
//   - modprobe MOD: loads MOD when modules.dep lists it (nvidia's version
//     comes from its module file; nvidia binds the NVIDIA GPUs no driver
//     holds); modprobe -r MOD unbinds its devices and unloads it (Busy makes
//     it fail as "in use"); modprobe nvidia_vgpu_vfio also registers the mdev
//     GPUs on the nvidia driver (see MdevTypes) and starts their
//     mdevctl-defined mdevs, modprobe -r nvidia_vgpu_vfio unregisters them
//     (refused while an mdev exists);
//   - systemctl daemon-reload | enable [--now] UNIT (linked into its WantedBy=
//     targets' .wants, as systemctl links it) | disable [--now] UNIT | stop UNIT… | is-enabled
//     UNIT | is-active UNIT: state kept under /run/fake-systemd in the root;
//   - /usr/lib/nvidia/sriov-manage -e ADDR: creates every VF of ADDR with
//     nvidia/creatable_vgpu_types, and resets its heterogeneous vGPU mode;
//   - nvidia-smi -q -i ID, nvidia-smi vgpu -shm 0|1 -i ID: heterogeneous
//     vGPU mode (see HeteroDir and nvidiaSMI); UnbindLock makes the next runs fail with
//     "Cannot obtain unbindLock", ExitZeroNoVFs makes them exit 0 and do
//     nothing (as vGPU 17.2 did);
//   - update-initramfs -u: writes the running kernel's image
//     (fixture.Builder.Initramfs); dracut, mkinitcpio: succeed;
//   - dpkg-deb -f|-c FILE (run for real: they only read the file), rpm -qp
//     --qf … FILE and rpm -qlp FILE (answered from a WriteRPM file), and
//     [env VAR=…] apt-get install -y ./FILE, dpkg -i FILE, dnf install -y
//     FILE, rpm -Uvh [--replacepkgs] FILE: unpack the package into the root
//     and play DKMS's module build (FailPackage makes it fail); a .deb is
//     recorded as dpkg does (DpkgStatus, DpkgInfo), and apt-get remove -y
//     PKG or dpkg -r PKG removes it again; an .rpm is recorded in RPMDB,
//     which rpm -qf [--qf FMT] PATH and rpm -q NAME answer from, and
//     rpm -e NAME or dnf remove -y NAME removes it again.
//
// Anything else is an error. WriteAttr plays the vGPU sysfs attributes
// (current_vgpu_type, mdev create and remove).
type Host struct {
	Dir           string
	Root          *host.Root
	InstallerEnv  []string
	Busy          map[string]bool // modules modprobe -r cannot unload
	UnbindLock    int             // sriov-manage runs left that fail with unbindLock
	ExitZeroNoVFs bool
	FailPackage   bool // installing a package fails in DKMS's module build

	mu    sync.Mutex
	Calls [][]string
}

// New returns a Host for the fixture root dir.
func New(dir string) (*Host, error) {
	r, err := host.NewRoot(dir)
	if err != nil {
		return nil, err
	}
	return &Host{Dir: dir, Root: r, Busy: map[string]bool{}}, nil
}

// Commands returns the commands run so far, each joined with spaces,
// leaving out systemctl's and nvidia-smi's read-only queries.
func (h *Host) Commands() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, c := range h.Calls {
		if len(c) > 1 && c[0] == "systemctl" && strings.HasPrefix(c[1], "is-") || len(c) > 1 && c[0] == "nvidia-smi" && c[1] == "-q" {
			continue
		}
		if len(c) > 1 && (c[0] == "dpkg-deb" || c[0] == "rpm" && strings.HasPrefix(c[1], "-q")) {
			continue
		}
		out = append(out, strings.Join(c, " "))
	}
	return out
}

// Run implements host.Runner.
func (h *Host) Run(ctx context.Context, argv ...string) ([]byte, error) {
	h.mu.Lock()
	h.Calls = append(h.Calls, append([]string(nil), argv...))
	h.mu.Unlock()
	if len(argv) == 0 {
		return nil, errors.New("empty command")
	}
	b := fixture.New(h.Dir)
	argv = stripEnv(argv)
	if len(argv) == 0 {
		return nil, errors.New("env: no command")
	}
	switch argv[0] {
	case "sh":
		cmd := exec.CommandContext(ctx, "sh", argv[1:]...)
		cmd.Env = append(append(os.Environ(), RootEnv+"="+h.Dir), h.InstallerEnv...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return out, fmt.Errorf("sh: %w: %s", err, strings.TrimSpace(stderr.String()))
		}
		return out, nil
	case "modprobe":
		return nil, h.modprobe(b, argv[1:])
	case "systemctl":
		return h.systemctl(b, argv[1:])
	case "/usr/lib/nvidia/sriov-manage":
		return h.sriovManage(b, argv[1:])
	case "nvidia-smi", "/usr/bin/nvidia-smi":
		return h.nvidiaSMI(argv[1:])
	case "update-initramfs":
		kver, _ := h.Root.ReadString("/proc/sys/kernel/osrelease")
		return nil, b.Initramfs(kver).Err()
	case "dracut", "mkinitcpio":
		return nil, nil
	case "/usr/bin/nvidia-installer":
		return h.uninstallRun(b, argv[1:])
	case "dpkg-deb", "rpm", "apt-get", "dnf", "dpkg":
		return h.packageCommand(ctx, b, argv)
	}
	return nil, fmt.Errorf("%s: not simulated", argv[0])
}

func (h *Host) modprobe(b *fixture.Builder, args []string) error {
	remove := false
	var mod string
	for _, a := range args {
		switch {
		case a == "-r":
			remove = true
		case !strings.HasPrefix(a, "-"):
			mod = strings.ReplaceAll(a, "-", "_")
		}
	}
	if remove {
		return h.unload(b, mod)
	}
	if h.Root.Exists("/sys/module/" + mod) {
		return nil
	}
	kver, _ := h.Root.ReadString("/proc/sys/kernel/osrelease")
	dep, _ := h.Root.ReadString("/lib/modules/" + kver + "/modules.dep")
	for _, l := range strings.Split(dep, "\n") {
		f, _, _ := strings.Cut(l, ":")
		base := path.Base(f)
		if i := strings.Index(base, ".ko"); i > 0 && strings.ReplaceAll(base[:i], "-", "_") == mod {
			return h.load(b, mod, "/lib/modules/"+kver+"/"+f)
		}
	}
	return fmt.Errorf("modprobe: exit status 1: modprobe: FATAL: Module %s not found in directory /lib/modules/%s", mod, kver)
}

// load loads the module mod from its file ko: its init runs whole before
// it shows as loaded, so a modprobe killed half-way never leaves it
// listed with its devices unprobed or its mdev parents unregistered.
func (h *Host) load(b *fixture.Builder, mod, ko string) error {
	switch mod {
	case "nvidia":
		if err := h.probeNVIDIA(b); err != nil {
			return err
		}
	case "nvidia_vgpu_vfio":
		if err := h.registerMdev(); err != nil {
			return err
		}
	}
	if c, err := h.Root.ReadString(ko); err == nil && strings.HasPrefix(c, "version=") {
		b.File("/sys/module/"+mod+"/version", strings.TrimPrefix(c, "version=")+"\n")
	}
	b.Module(mod, nil)
	return b.Err()
}

// unload plays modprobe -r mod: refused while Busy, its devices unbound
// before it goes from the list.
func (h *Host) unload(b *fixture.Builder, mod string) error {
	if h.Busy[mod] {
		return fmt.Errorf("modprobe: exit status 1: modprobe: FATAL: Module %s is in use.", mod)
	}
	if !h.Root.Exists("/sys/module/" + mod) {
		return nil
	}
	if mod == "nvidia_vgpu_vfio" {
		if err := h.unregisterMdev(); err != nil {
			return err
		}
	}
	for _, a := range h.Root.Names("/sys/bus/pci/drivers/" + mod) {
		if !strings.HasPrefix(a, "0000:") {
			continue // bind, unbind, module
		}
		if dev, err := h.Root.Realpath("/sys/bus/pci/devices/" + a); err == nil {
			b.Remove(dev + "/driver").Remove("/sys/bus/pci/drivers/" + mod + "/" + a)
		}
	}
	if err := b.Err(); err != nil {
		return err
	}
	return os.RemoveAll(filepath.Join(h.Dir, "sys/module", mod))
}

// probeNVIDIA binds to nvidia every NVIDIA display controller (not a VF)
// that no driver holds, as loading the module does.
func (h *Host) probeNVIDIA(b *fixture.Builder) error {
	b.Mkdir("/sys/bus/pci/drivers/nvidia")
	for _, a := range h.Root.Names("/sys/bus/pci/devices") {
		dev := "/sys/bus/pci/devices/" + a
		v, _ := h.Root.ReadString(dev + "/vendor")
		c, _ := h.Root.ReadString(dev + "/class")
		if v != "0x10de" || !strings.HasPrefix(c, "0x03") || h.Root.Exists(dev+"/physfn") || h.Root.LinkBase(dev+"/driver") != "" {
			continue
		}
		real, err := h.Root.Realpath(dev)
		if err != nil {
			return err
		}
		b.Link("/sys/bus/pci/drivers/nvidia/"+a, real).Link(real+"/driver", "/sys/bus/pci/drivers/nvidia")
	}
	return b.Err()
}

const sysd = "/run/fake-systemd"

func (h *Host) systemctl(b *fixture.Builder, args []string) ([]byte, error) {
	if len(args) == 0 {
		return nil, errors.New("systemctl: no verb")
	}
	verb, units := args[0], args[1:]
	now := false
	if len(units) > 0 && units[0] == "--now" {
		now, units = true, units[1:]
	}
	switch verb {
	case "daemon-reload":
		return nil, nil
	case "is-enabled", "is-active":
		state := map[string][2]string{"is-enabled": {"enabled", "disabled"}, "is-active": {"active", "inactive"}}[verb]
		if h.Root.Exists(sysd + "/" + verb + "/" + units[0]) {
			return []byte(state[0] + "\n"), nil
		}
		return []byte(state[1] + "\n"), fmt.Errorf("systemctl: exit status 1")
	case "disable":
		for _, u := range units {
			h.unlinkWants(b, u)
			b.Remove(sysd + "/is-enabled/" + u)
			if now {
				b.Remove(sysd + "/is-active/" + u)
				daemonProcess(b, u, false)
			}
		}
		return nil, b.Err()
	case "enable", "stop", "start":
		for _, u := range units {
			if err := h.unitVerb(b, verb, u, now); err != nil {
				return nil, err
			}
		}
		return nil, b.Err()
	}
	return nil, fmt.Errorf("systemctl %s: not simulated", verb)
}

// unitExists reports whether a unit file u is installed.
func (h *Host) unitExists(u string) bool {
	for _, d := range []string{"/etc/systemd/system", "/usr/lib/systemd/system", "/lib/systemd/system"} {
		if h.Root.Exists(d + "/" + u) {
			return true
		}
	}
	return false
}

// unitVerb plays systemctl enable (now: --now), start or stop of the unit
// u, failing as systemctl does for a unit that is not installed.
func (h *Host) unitVerb(b *fixture.Builder, verb, u string, now bool) error {
	if !h.unitExists(u) {
		if verb == "stop" {
			return fmt.Errorf("systemctl: exit status 5: Failed to stop %s: Unit %s not loaded.", u, u)
		}
		return fmt.Errorf("systemctl: exit status 1: Failed to %s unit: Unit file %s does not exist.", verb, u)
	}
	switch verb {
	case "enable":
		h.linkWants(b, u)
		b.File(sysd+"/is-enabled/"+u, "")
		if now {
			daemonProcess(b, u, true)
			b.File(sysd+"/is-active/"+u, "")
		}
	case "start":
		// the process before the unit's state, as systemd has it:
		// a kill between (the crash tests kill at every write)
		// never leaves a unit "active" with no process
		daemonProcess(b, u, true)
		b.File(sysd+"/is-active/"+u, "")
	case "stop":
		b.Remove(sysd + "/is-active/" + u)
		daemonProcess(b, u, false)
	}
	return nil
}

// linkWants makes the links systemctl enable makes: one in
// /etc/systemd/system/TARGET.wants/ per WantedBy= of the unit's [Install]
// section, to the unit file (systemd's src/shared/install.c).
func (h *Host) linkWants(b *fixture.Builder, u string) {
	for _, d := range []string{"/etc/systemd/system", "/usr/lib/systemd/system", "/lib/systemd/system"} {
		text, err := h.Root.ReadString(d + "/" + u)
		if err != nil {
			continue
		}
		for _, t := range wantedBy(text) {
			b.Link("/etc/systemd/system/"+t+".wants/"+u, d+"/"+u)
		}
		return
	}
}

// unlinkWants removes the links systemctl disable removes: u in every
// /etc/systemd/system/*.wants directory.
func (h *Host) unlinkWants(b *fixture.Builder, u string) {
	for _, d := range h.Root.Names("/etc/systemd/system") {
		if strings.HasSuffix(d, ".wants") {
			b.Remove("/etc/systemd/system/" + d + "/" + u)
		}
	}
}

// wantedBy lists the WantedBy= targets of a unit file's [Install] section.
func wantedBy(text string) []string {
	var out []string
	install := false
	for _, l := range strings.Split(text, "\n") {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "[") {
			install = l == "[Install]"
			continue
		}
		if v, ok := strings.CutPrefix(l, "WantedBy="); ok && install {
			out = append(out, strings.Fields(v)...)
		}
	}
	return out
}

// daemonPIDs are the processes the vGPU manager's units run, as a started
// unit shows in the process list (/proc/PID/comm), which check reads.
var daemonPIDs = map[string]string{"nvidia-vgpu-mgr.service": "4240", "nvidia-vgpud.service": "4211"}

// daemonProcess starts (/proc/PID/comm written) or stops the daemon of unit u.
func daemonProcess(b *fixture.Builder, u string, start bool) {
	pid, ok := daemonPIDs[u]
	switch {
	case !ok:
	case start:
		b.File("/proc/"+pid+"/comm", strings.TrimSuffix(u, ".service")+"\n")
	default:
		b.Remove("/proc/" + pid)
	}
}

func (h *Host) sriovManage(b *fixture.Builder, args []string) ([]byte, error) {
	if !h.Root.Exists("/usr/lib/nvidia/sriov-manage") {
		return nil, errors.New("/usr/lib/nvidia/sriov-manage: no such file or directory")
	}
	if len(args) != 2 || args[0] != "-e" {
		return nil, fmt.Errorf("sriov-manage %v: not simulated", args)
	}
	addr := args[1]
	if h.UnbindLock > 0 {
		h.UnbindLock--
		return []byte("Enabling VFs on " + addr + "\n"), fmt.Errorf("sriov-manage: exit status 1: Cannot obtain unbindLock for %s", addr)
	}
	if h.ExitZeroNoVFs {
		return []byte("Enabling VFs on " + addr + "\n"), nil
	}
	if !h.Root.Exists("/sys/module/nvidia") {
		return nil, fmt.Errorf("sriov-manage: exit status 1: %s: the nvidia driver is not loaded", addr)
	}
	// sriov-manage rebinds the GPU: its heterogeneous vGPU mode is reset
	if err := h.SetHeterogeneous(addr, false); err != nil {
		return nil, err
	}
	if err := AddVFs(b, h.Root, addr); err != nil {
		return nil, err
	}
	return nil, h.registerVFParents(b, addr)
}

// registerVFParents makes the VFs of addr mdev parents where its VFs are
// (VFParents) and nvidia_vgpu_vfio is loaded, as the VFs' probe does then.
func (h *Host) registerVFParents(b *fixture.Builder, addr string) error {
	pfDir, err := h.Root.Realpath("/sys/bus/pci/devices/" + addr)
	if err != nil || !VFParents[h.deviceID(pfDir)] || !h.Root.Exists("/sys/module/nvidia_vgpu_vfio") {
		return err
	}
	for _, l := range h.Root.Names(pfDir) {
		if !strings.HasPrefix(l, "virtfn") {
			continue
		}
		vf, err := h.Root.Realpath(pfDir + "/" + l)
		if err != nil {
			return err
		}
		if err := h.registerParent(b, path.Base(vf), vf); err != nil {
			return err
		}
	}
	return nil
}

// offersTypes reports whether a creatable_vgpu_types text lists a type (a
// line "<id> : <name>"), not just its header.
func offersTypes(creatable string) bool {
	for _, l := range strings.Split(creatable, "\n") {
		id, _, ok := strings.Cut(l, ":")
		if id = strings.TrimSpace(id); ok && id != "" && strings.Trim(id, "0123456789") == "" {
			return true
		}
	}
	return false
}

// AddVFs creates every VF of the PF addr (sriov_totalvfs of them), bound to
// nvidia with the vendor-specific nvidia/ directory offering the types its
// enabled VFs offer (an L40S's when none is), and sets sriov_numvfs. The VFs
// of a GPU whose VFs are mdev parents (VFParents) get no nvidia/ directory:
// Host.Run's sriov-manage makes them mdev parents.
func AddVFs(b *fixture.Builder, root *host.Root, addr string) error {
	pfDir, err := root.Realpath("/sys/bus/pci/devices/" + addr)
	if err != nil {
		return err
	}
	tot, _ := root.ReadString(pfDir + "/sriov_totalvfs")
	var n int
	_, _ = fmt.Sscan(tot, &n) // none: 0
	var dom, bus, dev, fn int
	if _, err := fmt.Sscanf(addr, "%04x:%02x:%02x.%d", &dom, &bus, &dev, &fn); err != nil {
		return err
	}
	devID, _ := root.ReadString(pfDir + "/device")
	var id uint16
	_, _ = fmt.Sscanf(devID, "0x%x", &id) // none: 0
	// the types are the GPU's: those its enabled VFs offer, else an L40S's
	creatable := L40SCreatable
	for _, l := range root.Names(pfDir) {
		if c, _ := root.ReadFile(pfDir + "/" + l + "/nvidia/creatable_vgpu_types"); strings.HasPrefix(l, "virtfn") && offersTypes(string(c)) {
			creatable = string(c)
			break
		}
	}
	parent := "parent-of-" + addr
	b.Adopt(parent, path.Dir(pfDir)).Adopt(addr, pfDir)
	for i := 0; i < n; i++ {
		devfn := dev<<3 | fn + 4 + i
		vf := fmt.Sprintf("%04x:%02x:%02x.%d", dom, bus, devfn>>3, devfn&7)
		// physfn before the VF shows in /sys/bus/pci/devices, as the
		// kernel adds a VF whole: one seen without it (the process making
		// it killed) would pass for a GPU of its own
		if vfDir := path.Dir(pfDir) + "/" + vf; !root.Exists(vfDir + "/physfn") {
			b.Link(vfDir+"/physfn", pfDir)
		}
		files := map[string]string{"nvidia/creatable_vgpu_types": creatable, "nvidia/current_vgpu_type": "0\n"}
		if VFParents[strings.TrimSpace(devID)] {
			files = nil
		}
		b.PCI(fixture.PCI{Addr: vf, Parent: parent, Vendor: 0x10de, Device: id, Class: 0x030200, Driver: "nvidia",
			Group: 200 + bus*16 + i, PCIeType: fixture.PCIeEndpoint, Files: files})
		b.Link(pfDir+fmt.Sprintf("/virtfn%d", i), b.DevPath(vf))
	}
	b.File(pfDir+"/sriov_numvfs", fmt.Sprintf("%d\n", n))
	return b.Err()
}

// InstallerCopy is where gpuprep vgpu install runs the installer run from
// on the fixture root dir: its verified copy (vgpu.InstallerScratch), named
// by the SHA-256 of run's content.
func InstallerCopy(dir, run string) string {
	b, err := os.ReadFile(run)
	if err != nil {
		return "unreadable " + run
	}
	sum := sha256.Sum256(b)
	return filepath.Join(dir, "var/lib/gpuprep/installer", hex.EncodeToString(sum[:]), filepath.Base(run))
}
