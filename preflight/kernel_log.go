package preflight

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/gpuprep/gpuprep/internal/host"
)

// kernelLog is the part of the running kernel's log the checks use as
// evidence, or why it could not be read.
type kernelLog struct {
	Lines []string // lines that matched logKeep, in log order
	Err   error
}

// maxLogLines and maxLogLine bound what is kept of a kernel log (a host's
// log is hostile input as much as its files are: any root process can
// write to /dev/kmsg).
const (
	maxLogLines = 256
	maxLogLine  = 240
)

// logKeep are the kernel log messages the checks read, each from the source
// that prints it: arch/arm64/kvm/arm.c (kvm_info prefixes "kvm [PID]: ")
// arch/arm64/kernel/smp.c (hyp_mode_check) and the GICv3 ITS probe
// (drivers/irqchip/irq-gic-v3-its.c: "ITS %pR", "ITS@%pa: …").
// The ACS override patch's warning (acsOverrideLog) and NVIDIA's Xid 79
// (fallenOffLog) are kept too.
var logKeep = []string{"kvm [", "CPU: All CPU(s) started at", "CPU: CPUs started in inconsistent modes", "ITS [mem ", "ITS@0x", acsOverrideLog, fallenOffLog}

// liveKernelLog reads the kernel log, and only on the running system: a
// root that is not / (a snapshot, a mounted disk) has no log of its own,
// and dmesg there (even in a chroot) would show this machine's.
func liveKernelLog(root *host.Root, runner host.Runner) func() ([]byte, error) {
	return func() ([]byte, error) {
		if !root.IsLive() || runner == nil {
			return nil, errors.New("the root is not the running system, whose kernel log it would need")
		}
		return readKernelLog(root, runner)
	}
}

// readKernelLog runs dmesg, else journalctl -k -b: the journal keeps this
// boot's kernel messages after the ring buffer has rotated them out, and is
// readable by the adm and systemd-journal groups where kernel.dmesg_restrict
// keeps dmesg to root.
func readKernelLog(root *host.Root, runner host.Runner) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := runner.Run(ctx, "dmesg")
	if err == nil {
		return out, nil
	}
	jout, jerr := runner.Run(ctx, "journalctl", "-k", "-b", "--no-pager", "-q")
	if jerr == nil && len(jout) > 0 {
		return jout, nil
	}
	why := "dmesg: " + err.Error()
	if s, rerr := root.ReadString("/proc/sys/kernel/dmesg_restrict"); rerr == nil && strings.TrimSpace(s) == "1" {
		why = "dmesg is restricted to root (kernel.dmesg_restrict = 1): " + err.Error()
	}
	if jerr != nil {
		why += "; journalctl -k: " + jerr.Error()
	}
	return nil, errors.New(why)
}

// Log is the kernel log evidence, read once per Env.
func (e *Env) Log() kernelLog {
	e.mu.Lock()
	if e.klog == nil {
		e.klog = sync.OnceValue(func() kernelLog { return parseKernelLog(e.KernelLog) })
	}
	f := e.klog
	e.mu.Unlock()
	return f()
}

func parseKernelLog(read func() ([]byte, error)) kernelLog {
	if read == nil {
		return kernelLog{Err: errors.New("no kernel log reader")}
	}
	b, err := read()
	if err != nil {
		return kernelLog{Err: err}
	}
	var l kernelLog
	for _, line := range strings.Split(string(b), "\n") {
		for _, k := range logKeep {
			if i := strings.Index(line, k); i >= 0 && len(l.Lines) < maxLogLines {
				if j := strings.Index(line, "NVRM: "); k == fallenOffLog && j >= 0 && j < i {
					// the driver's line names the GPU before the words
					i = j
				}
				kept := strings.TrimSpace(line[i:])
				if len(kept) > maxLogLine {
					kept = strings.ToValidUTF8(kept[:maxLogLine], "") + "…"
				}
				l.Lines = append(l.Lines, kept)
				break
			}
		}
	}
	return l
}

// Find returns the first kept line holding s.
func (l kernelLog) Find(s string) (string, bool) {
	for _, line := range l.Lines {
		if strings.Contains(line, s) {
			return line, true
		}
	}
	return "", false
}
