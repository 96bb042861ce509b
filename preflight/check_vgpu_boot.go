package preflight

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/pci"
	"github.com/gpuprep/gpuprep/internal/plural"
	"github.com/gpuprep/gpuprep/vgpu"
)

// vgpuBootSubject is the subject of the finding on whether the vGPUs of the
// vendor-specific VFIO interface are created again at boot.
const vgpuBootSubject = vgpu.ApplyUnit

// checkVGPUBoot judges whether the vGPUs that exist now on the VFs of the
// vendor-specific VFIO interface (live: by GPU) are created again at the
// next boot. They are not by themselves: the VFs and their
// nvidia/current_vgpu_type are lost at every reboot or driver reload
// (cozystack PR #70, NVIDIA/gpu-operator#2600), and nothing in NVIDIA's
// stack writes current_vgpu_type (vgpu-device-manager creates mdevs only,
// NVIDIA/gpu-operator#2594). What gpuprep installs for it (vgpu apply
// --persist, apply --mode vm-vgpu) is vgpu.ApplyUnit: enabled (a link in
// /etc/systemd/system/<target>.wants, as systemctl enable makes for each
// WantedBy= target), running the root-owned vgpu.InstalledBinary as
// `vgpu apply -f FILE -c NAME [--select X]…`, whose config asks for these
// vGPUs; and vgpu.SRIOVUnit, which the unit wants, enabling the VFs first.
// What is missing is a warn naming it: the node works now, and the next
// boot leaves it without its vGPUs (a warn, as a configured-but-not-running
// kernel argument is). Another tool of the site's own may recreate them:
// gpuprep cannot see that, and the warn says so.
func checkVGPUBoot(e *Env, live map[string][]vgpu.Instance) []Finding {
	if len(live) == 0 {
		return nil
	}
	n, gpus := 0, make([]string, 0, len(live))
	for _, g := range slices.Sorted(maps.Keys(live)) {
		n += len(live[g])
		gpus = append(gpus, g)
	}
	what := fmt.Sprintf("%s on the VFs of %s (vendor-specific VFIO)", plural.N(n, "vGPU"), strings.Join(gpus, ", "))
	fix := "gpuprep vgpu apply -f vgpu-config.yaml -c NAME --persist"
	warn := func(missing, remedy string) []Finding {
		return []Finding{{Status: Warn, Subject: vgpuBootSubject,
			Message: what + " exist now, but nothing gpuprep can see creates them again at the next boot: the VFs and their nvidia/current_vgpu_type are lost at every reboot or driver reload, and nothing in NVIDIA's stack writes current_vgpu_type; " + missing + " (a unit of your own that does it is not seen here)",
			Remedy:  remedy, Fixable: true, FixCommand: fix}}
	}
	persist := "install it: " + fix + " (with the config that lists these vGPUs), or gpuprep apply --mode vm-vgpu --vgpu-config-file vgpu-config.yaml --vgpu-config NAME"
	u, err := readBootUnit(e.Root, vgpu.ApplyUnit)
	if err != nil {
		return warn(err.Error(), persist)
	}
	if !u.enabled(e.Root, vgpu.ApplyUnitName) {
		return warn(fmt.Sprintf("%s is not enabled (no link to it in %s)", vgpu.ApplyUnit, strings.Join(u.wantsDirs(), ", ")),
			"systemctl enable "+vgpu.ApplyUnitName+" (or "+fix+", which writes and enables it)")
	}
	if len(u.exec) == 0 {
		return warn(vgpu.ApplyUnit+" has no ExecStart=", persist)
	}
	bin := u.exec[0]
	if bin != vgpu.InstalledBinary {
		return warn(fmt.Sprintf("%s runs %s, not the root-owned copy of gpuprep it installs (%s)", vgpu.ApplyUnit, quoteArg(bin), vgpu.InstalledBinary), persist)
	}
	if err := e.Root.SafePath(bin, bootOwners(), false, true); err != nil {
		return warn(fmt.Sprintf("%s runs %s, which must be a regular file that only root can change: %v", vgpu.ApplyUnit, bin, err), persist)
	}
	args, err := parseApplyArgs(u.exec[1:])
	if err != nil {
		return warn(fmt.Sprintf("%s: ExecStart= %v", vgpu.ApplyUnit, err), persist)
	}
	if missing := unlisted(e, args, live); missing != "" {
		return warn(missing, persist)
	}
	if !e.Root.Exists(vgpu.SRIOVUnit) {
		return warn(fmt.Sprintf("%s wants %s, which enables the VFs at boot before the vGPUs are created on them, and there is none", vgpu.ApplyUnitName, vgpu.SRIOVUnit),
			"gpuprep vgpu install --driver "+e.vgpuInstaller()+" (writes and enables it), or a unit of your own that runs /usr/lib/nvidia/sriov-manage -e for these GPUs before "+vgpu.ApplyUnitName)
	}
	return []Finding{{Status: Pass, Subject: vgpuBootSubject,
		Message: fmt.Sprintf("%s are created again at boot: %s (enabled, after %s) runs the root-owned %s vgpu apply with config %q of %s, which lists them", what, vgpu.ApplyUnitName, vgpu.SRIOVUnitName, bin, args.config, args.file)}}
}

// bootOwners: root, and this user when gpuprep does not run as root (a
// fixture or a copy of a root this user made), as vgpu's own install
// judges the copy it makes.
func bootOwners() host.Owners {
	euid := uint32(os.Geteuid())
	return host.Owners{Allow: func(u uint32) bool { return u == 0 || u == euid }, Name: "root"}
}

// applyArgs are the arguments of a `gpuprep vgpu apply` the boot unit runs.
type applyArgs struct {
	file, config string
	selects      []string
}

// parseApplyArgs reads `vgpu apply -f FILE -c NAME [--select X]… [--prune]`
// (what vgpu.PlanPersist writes; --flag=value too).
func parseApplyArgs(argv []string) (applyArgs, error) {
	var a applyArgs
	if len(argv) < 2 || argv[0] != "vgpu" || argv[1] != "apply" {
		return a, fmt.Errorf("does not run gpuprep vgpu apply (%s)", quoteArgs(argv))
	}
	for i := 2; i < len(argv); i++ {
		flag, val, inline := strings.Cut(argv[i], "=")
		switch flag {
		case "-f", "--file", "-c", "--config", "--select":
		case "--prune":
			continue
		default:
			return a, fmt.Errorf("gpuprep vgpu apply with an argument gpuprep does not write there: %s", quoteArg(argv[i]))
		}
		if !inline {
			if i+1 >= len(argv) {
				return a, fmt.Errorf("%s without a value", flag)
			}
			i++
			val = argv[i]
		}
		switch flag {
		case "-f", "--file":
			a.file = val
		case "-c", "--config":
			a.config = val
		default:
			a.selects = append(a.selects, val)
		}
	}
	if a.file == "" || a.config == "" {
		return a, fmt.Errorf("gpuprep vgpu apply without -f FILE and -c NAME (%s)", quoteArgs(argv))
	}
	return a, nil
}

// unlisted says which of the live vGPUs the unit's config does not ask for
// (they would not be created at boot), or why that cannot be told; "" when
// it asks for every one.
func unlisted(e *Env, a applyArgs, live map[string][]vgpu.Instance) string {
	b, err := e.Root.ReadFile(a.file)
	if err != nil {
		return fmt.Sprintf("%s runs gpuprep vgpu apply -f %s, which cannot be read: %v", vgpu.ApplyUnitName, a.file, err)
	}
	cfg, err := vgpu.ParseConfig(a.file, b)
	if err != nil {
		return fmt.Sprintf("%s runs gpuprep vgpu apply with a config that does not parse: %v", vgpu.ApplyUnitName, err)
	}
	sets, err := cfg.Select(a.config)
	if err != nil {
		return fmt.Sprintf("%s runs gpuprep vgpu apply -c %s: %v", vgpu.ApplyUnitName, a.config, err)
	}
	sel, err := pci.ParseSelector(a.selects)
	if err != nil {
		return fmt.Sprintf("%s runs gpuprep vgpu apply with --select %s: %v", vgpu.ApplyUnitName, strings.Join(a.selects, ","), err)
	}
	devs, err := sel.Select(e.Inv)
	if err != nil {
		return fmt.Sprintf("%s runs gpuprep vgpu apply with --select %s, which selects no GPU here: %v", vgpu.ApplyUnitName, strings.Join(a.selects, ","), err)
	}
	wants, _, err := vgpu.Wants(a.file, a.config, sets, vgpu.ConfigGPUs(e.Root, e.Inv.Devices, devs))
	if err != nil {
		return fmt.Sprintf("%s runs gpuprep vgpu apply with config %q, which does not fit this host: %v", vgpu.ApplyUnitName, a.config, err)
	}
	var missing []string
	for _, g := range slices.Sorted(maps.Keys(live)) {
		count := map[string]int{}
		var order []string
		for _, x := range live[g] {
			if count[x.Type] == 0 {
				order = append(order, x.Type)
			}
			count[x.Type]++
		}
		for _, t := range order {
			want := 0
			for _, w := range wants {
				if w.GPU == g && vgpu.TypeMatches(w.Type, t) {
					want += w.Count
				}
			}
			if want < count[t] {
				missing = append(missing, fmt.Sprintf("%d× %s on %s (it asks for %d)", count[t], t, g, want))
			}
		}
	}
	if len(missing) == 0 {
		return ""
	}
	return fmt.Sprintf("%s creates config %q of %s at boot, which does not ask for %s", vgpu.ApplyUnitName, a.config, a.file, strings.Join(missing, ", "))
}

// bootUnit is what check reads of a systemd unit file: its ExecStart=
// command line (split as systemd does, the last one) and its WantedBy=
// targets.
type bootUnit struct {
	exec     []string
	wantedBy []string
}

// readBootUnit reads the unit file p, which must be a regular file (a link
// to /dev/null is a masked unit).
func readBootUnit(root *host.Root, p string) (*bootUnit, error) {
	fi, err := root.Lstat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("there is no %s", p)
	case err != nil:
		return nil, err
	case !fi.Mode().IsRegular():
		return nil, fmt.Errorf("%s is not a regular file (%s: a link to /dev/null is a masked unit)", p, host.KindOf(fi.Mode()))
	}
	b, err := root.ReadFile(p)
	if err != nil {
		return nil, err
	}
	u := &bootUnit{}
	section := ""
	for i, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSpace(l)
		switch {
		case l == "" || l[0] == '#' || l[0] == ';':
			continue
		case l[0] == '[':
			section = l
			continue
		}
		key, val, ok := strings.Cut(l, "=")
		if !ok {
			continue
		}
		switch key = strings.TrimSpace(key); {
		case section == "[Service]" && key == "ExecStart":
			argv, err := splitExec(strings.TrimSpace(val))
			if err != nil {
				return nil, fmt.Errorf("%s:%d: ExecStart=: %v", p, i+1, err)
			}
			u.exec = argv
		case section == "[Install]" && key == "WantedBy":
			u.wantedBy = append(u.wantedBy, strings.Fields(val)...)
		}
	}
	return u, nil
}

// wantsDirs are where systemctl enable links the unit (one per WantedBy=
// target, in /etc/systemd/system).
func (u *bootUnit) wantsDirs() []string {
	var out []string
	for _, t := range u.wantedBy {
		if t != "" && !strings.ContainsAny(t, "/\x00") {
			out = append(out, "/etc/systemd/system/"+t+".wants")
		}
	}
	if len(out) == 0 {
		out = append(out, "no WantedBy= target")
	}
	return out
}

// enabled reports whether a link to unit name is in the wants directory of
// one of its WantedBy= targets (what systemctl enable made).
func (u *bootUnit) enabled(root *host.Root, name string) bool {
	for _, d := range u.wantsDirs() {
		if !strings.HasPrefix(d, "/") {
			continue
		}
		if fi, err := root.Lstat(path.Join(d, name)); err == nil && fi.Mode()&fs.ModeSymlink != 0 && root.Exists(path.Join(d, name)) {
			return true
		}
	}
	return false
}

// splitExec splits an ExecStart= command line as systemd does for what
// gpuprep writes (vgpu.ApplyUnitContent): words separated by white space,
// double-quoted words with \\ and \" escapes; %% is %, $$ is $. A leading
// special prefix (@, -, :, +, !) is refused: gpuprep writes none.
func splitExec(s string) ([]string, error) {
	if s != "" && strings.ContainsRune("@-:+!", rune(s[0])) {
		return nil, fmt.Errorf("a special prefix %q, which gpuprep does not write", s[:1])
	}
	var out []string
	var cur strings.Builder
	in, quoted := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quoted && c == '\\' && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
		case c == '"':
			quoted, in = !quoted, true
		case !quoted && (c == ' ' || c == '\t'):
			if in {
				out = append(out, cur.String())
				cur.Reset()
				in = false
			}
		case (c == '%' || c == '$') && i+1 < len(s) && s[i+1] == c:
			i++
			cur.WriteByte(c)
			in = true
		default:
			cur.WriteByte(c)
			in = true
		}
	}
	if quoted {
		return nil, errors.New("an unterminated quote")
	}
	if in {
		out = append(out, cur.String())
	}
	return out, nil
}

func quoteArg(s string) string { return fmt.Sprintf("%q", s) }

func quoteArgs(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = quoteArg(a)
	}
	return strings.Join(q, " ")
}
