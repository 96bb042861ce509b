package provision

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/gpuprep/gpuprep/internal/change"
	"github.com/gpuprep/gpuprep/internal/effect"
	"io"
	"io/fs"
	"os"
	"strings"

	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/journal"
	"github.com/gpuprep/gpuprep/vgpu"
)

// StepNFDTimer (apply --nfd-timer) installs a systemd timer that rewrites
// Node Feature Discovery's feature file with gpuprep's readiness.
const StepNFDTimer = "nfd-timer"

// The timer's units: the service runs the root-owned gpuprep
// (vgpu.InstalledBinary, the copy the vGPU boot unit runs too).
const (
	NFDServiceName = "gpuprep-nfd.service"
	NFDTimerName   = "gpuprep-nfd.timer"
	NFDService     = "/etc/systemd/system/" + NFDServiceName
	NFDTimer       = "/etc/systemd/system/" + NFDTimerName
	NFDFeatureDir  = "/etc/kubernetes/node-feature-discovery/features.d"
	// maxNFDBinary bounds the read of the running gpuprep.
	maxNFDBinary = 512 << 20
)

// NFDServiceContent is the oneshot that evaluates the node and replaces the
// feature file (gpuprep agent --once --feature-file: atomic, a dot-named
// temporary file NFD ignores). Read-only otherwise: the unit may write the
// features.d directory alone.
func NFDServiceContent() []byte {
	return []byte(`# Written by gpuprep apply --nfd-timer: gpuprep's readiness as Node Feature
# Discovery labels (feature.node.kubernetes.io/gpuprep.*), refreshed by ` + NFDTimerName + `.
[Unit]
Description=gpuprep: readiness for Node Feature Discovery
After=local-fs.target

[Service]
Type=oneshot
ExecStart=` + vgpu.InstalledBinary + ` agent --once --feature-file default --interval 5m
ProtectSystem=strict
ReadWritePaths=` + NFDFeatureDir + `
ProtectHome=yes
PrivateTmp=yes
PrivateNetwork=yes
NoNewPrivileges=yes
`)
}

// NFDTimerContent runs the service a minute after boot and every 5 minutes;
// the file's labels expire after 15 minutes (the agent's --nfd-ttl default
// for a 5-minute interval), so a timer that stops leaves no stale "ready".
func NFDTimerContent() []byte {
	return []byte(`# Written by gpuprep apply --nfd-timer.
[Unit]
Description=gpuprep: refresh the Node Feature Discovery feature file

[Timer]
OnBootSec=1min
OnUnitActiveSec=5min
AccuracySec=30s

[Install]
WantedBy=timers.target
`)
}

// nfdTimerPlan is what the step writes.
type nfdTimerPlan struct {
	binary []byte // the running gpuprep, to install as vgpu.InstalledBinary; nil: in place
}

// nfdUnitChanges are the writes that give the root the service and timer
// units as gpuprep writes them; none for a unit already so.
func (p *Plan) nfdUnitChanges() ([]change.File, error) {
	var files []change.File
	for _, f := range []struct {
		path string
		data []byte
	}{{NFDService, NFDServiceContent()}, {NFDTimer, NFDTimerContent()}} {
		old, err := p.root.ReadFile(f.path)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, &PlanError{Step: StepNFDTimer, Err: err}
		}
		if err == nil && string(old) == string(f.data) {
			continue
		}
		files = append(files, change.Between(f.path, old, err == nil, f.data))
	}
	return files, nil
}

// nfdTimerEnabled is whether systemd, where commands run, says the timer
// is enabled.
func (p *Plan) nfdTimerEnabled(ctx context.Context) bool {
	out, err := p.runner().Run(ctx, "systemctl", "is-enabled", NFDTimerName)
	return err == nil && strings.TrimSpace(string(out)) == "enabled"
}

// planNFDTimer plans the step: the root-owned gpuprep, the two units (a
// diff each), and enabling the timer; nothing when all is in place.
func (p *Plan) planNFDTimer(ctx context.Context) error {
	if !p.opts.NFDTimer {
		return nil
	}
	s := &Step{ID: StepNFDTimer, Title: "install the " + NFDTimerName + " that refreshes Node Feature Discovery's feature file every 5 minutes"}
	tp := &nfdTimerPlan{}
	bin, sum, err := nfdBinary(p.root, p.opts.Binary)
	if err != nil {
		return &PlanError{Step: StepNFDTimer, Refused: true, Err: err}
	}
	if bin != nil {
		tp.binary = bin
		s.Notes = append(s.Notes, fmt.Sprintf("installs this gpuprep (SHA-256 %s) as %s, root's own, which the service runs", sum, vgpu.InstalledBinary))
	}
	if s.Files, err = p.nfdUnitChanges(); err != nil {
		return err
	}
	if len(s.Files) > 0 || tp.binary != nil || !p.nfdTimerEnabled(ctx) {
		s.argv = [][]string{{"systemctl", "daemon-reload"}, {"systemctl", "enable", "--now", NFDTimerName}}
		for _, a := range s.argv {
			s.Commands = append(s.Commands, host.ShellQuote(a))
		}
	}
	if len(s.Files) == 0 && tp.binary == nil && len(s.argv) == 0 {
		return nil
	}
	p.nfdTimer = tp
	p.Steps = append(p.Steps, s)
	return nil
}

// nfdBinary reads the running gpuprep (src, on this machine) and returns it
// with its SHA-256, or nil when root's vgpu.InstalledBinary is that already.
// A file there, or a directory above it, that someone other than root may
// write is refused: the service would run as root what they can change.
func nfdBinary(root *host.Root, src string) ([]byte, string, error) {
	f, err := os.Open(src)
	if err != nil {
		return nil, "", fmt.Errorf("reading the running gpuprep to install it as %s: %w", vgpu.InstalledBinary, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxNFDBinary+1))
	if err != nil {
		return nil, "", fmt.Errorf("reading the running gpuprep (%s): %w", src, err)
	}
	if len(data) > maxNFDBinary {
		return nil, "", fmt.Errorf("%s: more than %d MiB: not gpuprep", src, maxNFDBinary>>20)
	}
	if err := binarySafe(root); err != nil {
		return nil, "", err
	}
	sum := sha256.Sum256(data)
	if old, err := root.ReadFile(vgpu.InstalledBinary); err == nil && sha256.Sum256(old) == sum {
		return nil, "", nil
	}
	return data, hex.EncodeToString(sum[:]), nil
}

// binarySafe: vgpu.InstalledBinary, when there, is a regular file that it
// and the directories above it are root's (or this user's) and writable by
// no one else (host.SafePath).
func binarySafe(root *host.Root) error {
	euid := uint32(os.Geteuid())
	owners := host.Owners{Allow: func(u uint32) bool { return u == 0 || u == euid }, Name: "root"}
	if err := root.SafePath(vgpu.InstalledBinary, owners, true, true); err != nil {
		return fmt.Errorf("%w: the timer's service would run what its owner can change", err)
	}
	return nil
}

// installNFDTimer runs the step: the binary first (the units run it), then
// the units, each atomic, backed up and journalled (rollback disables and
// stops the timer, removes the files or puts the old ones back), then
// enables the timer.
func (p *Plan) installNFDTimer(ctx context.Context, e effect.Effector, s *Step) error {
	tp := p.nfdTimer
	if tp != nil && tp.binary != nil {
		res, err := journal.WriteFile(e.Root, vgpu.InstalledBinary, tp.binary, 0o755, "apply", utcNow(e))
		if err != nil {
			return fmt.Errorf("install %s: %w", vgpu.InstalledBinary, err)
		}
		if res.Changed {
			e.Logf("installed %s", vgpu.InstalledBinary)
		}
		got, err := e.Root.ReadFile(vgpu.InstalledBinary)
		if err != nil {
			return err
		}
		if sha256.Sum256(got) != sha256.Sum256(tp.binary) {
			return fmt.Errorf("%s: not the content installed", vgpu.InstalledBinary)
		}
		if err := binarySafe(e.Root); err != nil {
			return err
		}
	}
	// the one directory the service may write (ReadWritePaths)
	if err := journal.MkdirAll(e.Root, NFDFeatureDir, "apply", utcNow(e)); err != nil {
		return err
	}
	for _, f := range s.Files {
		if err := writeFile(e, f.Path, f.New); err != nil {
			return err
		}
	}
	for _, argv := range s.argv {
		e.Logf("run: %s", host.ShellQuote(argv))
		if out, err := e.Runner.Run(ctx, argv...); err != nil {
			return fmt.Errorf("%s: %w%s (the units are written; enable the timer by hand)", host.ShellQuote(argv), err, host.OutputTail(out))
		}
	}
	return nil
}
