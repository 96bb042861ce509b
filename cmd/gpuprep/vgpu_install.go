package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpuprep/gpuprep/internal/change"
	"github.com/gpuprep/gpuprep/internal/effect"
	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/sanitize"
	"github.com/gpuprep/gpuprep/vgpu"
)

// hostVGPUInstallRunner gives the runner an install runs commands through
// (deps.vgpuInstallRunner): against a root other than / only --dry-run
// works.
func hostVGPUInstallRunner(root *host.Root, dryRun bool) (host.Runner, error) {
	if root.IsLive() {
		return host.ExecRunner{}, nil
	}
	if dryRun {
		return host.NoRunner{}, nil
	}
	return nil, usageErr("--root %s: installing changes the running system; against another root only --dry-run works", root.Name())
}

func newVGPUInstallCmd(g *globals) *cobra.Command {
	var opts vgpu.InstallOptions
	var sel []string
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "install --driver NVIDIA-Linux-x86_64-VER-vgpu-kvm.run|PACKAGE.deb|PACKAGE.rpm",
		Short: "Install the NVIDIA vGPU manager, start its daemons, enable SR-IOV VFs (every step planned first)",
		Long: `install verifies that --driver is the vGPU manager for KVM hosts: for a
.run, the makeself header's targetdir names a vgpu-kvm build and the archive
holds nvidia-vgpu-mgr (both read by gpuprep itself: nothing in the file runs
to check it); for a .deb or .rpm, the package's file list (dpkg-deb -c,
rpm -qlp, run on this machine: they only read the file) holds
usr/bin/nvidia-vgpu-mgr, whatever the file is called. It checks the
prerequisites (kernel headers for the running kernel, cc, make and DKMS for a
.run, dpkg or rpm for a package, pci-pf-stub where a GPU uses SR-IOV, Secure
Boot and module signing keys), then: blacklists nouveau, unloads conflicting
modules, runs the installer (sh FILE --silent --dkms) or installs the package
with its dependencies (apt-get install -y ./FILE, or dpkg -i; dnf install -y
FILE, or rpm -Uvh), each from a root-only copy whose SHA-256 is that of the
file checked (a file changed since is refused, never run), loads nvidia and nvidia_vgpu_vfio
(where the build has it), enables and starts nvidia-vgpud and nvidia-vgpu-mgr,
enables the SR-IOV VFs of Ampere and newer GPUs (sriov-manage -e, retried,
verified) and writes a systemd unit that enables them at every boot.

Steps already in place are skipped: a re-run on an installed host does
nothing. A failed step stops the install and says what to do.

On a host with another version of the vGPU manager installed (told by
nvidia-installer's record /var/lib/nvidia/log, or dpkg's or rpm's), --driver
changes the version, as the GPU Operator's upgrade does: refused while a VM
holds a vGPU (each named, with its process); the installed version's
installer or package is kept under /var/lib/gpuprep/vgpu-manager (gpuprep
keeps a copy of each one it installs; for one installed otherwise, give it
with --previous-driver) and the change recorded and journalled; the vGPUs
are removed, the daemons stopped, the modules unloaded, the old manager
uninstalled the way it was installed (nvidia-installer --uninstall, apt-get
remove or dpkg -r, dnf remove or rpm -e), the new one installed, the vGPUs
made again (the same mdev UUIDs, the same VFs, the same types) and the
result verified. A run stopped on the way resumes from the record; gpuprep
rollback puts the previous version and its vGPUs back.

Exit codes: 0 done (or nothing to do), 1 a prerequisite is missing or a step
failed, 2 usage error (including a --driver that is not the vGPU manager).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.Driver == "" {
				return usageErr("--driver is required: the NVIDIA-Linux-x86_64-<ver>-vgpu-kvm.run (or the vGPU manager's .deb/.rpm) of the licensed vGPU download")
			}
			root, gpus, err := selectedGPUs(g, sel)
			if err != nil {
				return err
			}
			runner, err := g.dep().vgpuInstallRunner(root, dryRun)
			if err != nil {
				return err
			}
			for _, d := range gpus {
				opts.GPUs = append(opts.GPUs, vgpu.GPUInfo{Address: d.Address, DeviceID: d.DeviceID})
			}
			env := effect.Effector{Root: root, Runner: runner, Query: g.dep().vgpuQueryRunner(), Sysfs: g.dep().vgpuSysfs(root)}
			ctx := context.Background()
			plan, err := vgpu.PlanInstall(ctx, env, opts)
			var held *vgpu.HeldError
			if errors.As(err, &held) {
				return &exitError{code: exitNotReady, err: err}
			}
			if err != nil {
				return usageErr("%v", err)
			}
			out, errw := sanitize.NewWriter(cmd.OutOrStdout()), sanitize.NewWriter(cmd.ErrOrStderr())
			printInstallPlan(out, plan, dryRun)
			if miss := plan.Missing(); miss != nil {
				return &exitError{code: exitNotReady, err: miss}
			}
			if len(plan.Steps) == 0 {
				fmt.Fprintf(out, "nothing to do: the vGPU manager %s is installed, loaded and running", plan.Driver.Version)
				if len(plan.SRIOV) > 0 {
					fmt.Fprintf(out, ", VFs enabled on %s", strings.Join(plan.SRIOV, ", "))
				}
				fmt.Fprintln(out)
				return nil
			}
			if dryRun {
				return nil
			}
			n := 0
			err = plan.Execute(ctx, env, func(s vgpu.Step) {
				n++
				fmt.Fprintf(out, "done %d/%d: %s\n", n, len(plan.Steps), s.Title)
			})
			if err != nil {
				return &exitError{code: exitNotReady, err: err}
			}
			fmt.Fprintf(errw, "gpuprep: the vGPU manager %s is installed; next: gpuprep vgpu types, then gpuprep vgpu apply -f CONFIG -c NAME\n", plan.Driver.Version)
			return nil
		},
	}
	cmd.Flags().StringVar(&opts.Driver, "driver", "", "the vGPU manager: NVIDIA-Linux-x86_64-<ver>-vgpu-kvm.run, or its .deb/.rpm package")
	cmd.Flags().StringVar(&opts.Previous, "previous-driver", "", "changing the version: the installer or package of the vGPU manager installed now, kept so that rollback can put it back (not needed where gpuprep installed it)")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print the prerequisites and the plan (with file diffs), change nothing")
	cmd.Flags().StringArrayVar(&sel, "select", nil, "GPUs whose SR-IOV VFs are enabled (PCI address, VVVV:DDDD or VVVV); default every NVIDIA GPU")
	cmd.Flags().BoolVar(&opts.NoDKMS, "no-dkms", false, "build the modules for the running kernel only, without DKMS (a kernel update then needs a re-run; .run only)")
	cmd.Flags().StringVar(&opts.SigningKey, "signing-key", "", "Secure Boot: private key to sign the modules with (default: DKMS's or shim-signed's MOK when present; .run only: DKMS signs a package's)")
	cmd.Flags().StringVar(&opts.SigningCert, "signing-cert", "", "Secure Boot: the enrolled certificate of --signing-key")
	return cmd
}

func printInstallPlan(w io.Writer, p *vgpu.InstallPlan, dryRun bool) {
	d := p.Driver
	fmt.Fprintf(w, "vGPU manager %s (%s, %s)\n", d.Version, d.Name(), d.Path)
	if d.SHA256 != "" {
		fmt.Fprintf(w, "  SHA-256 %s: the installer runs from a copy only root can write, checked to have it\n", d.SHA256)
	}
	fmt.Fprintln(w, "prerequisites:")
	for _, q := range p.Prereqs {
		mark := "ok  "
		if !q.OK {
			mark = "MISSING"
		}
		fmt.Fprintf(w, "  %-7s %s: %s\n", mark, q.Name, q.Detail)
		if q.Remedy != "" {
			fmt.Fprintf(w, "          fix: %s\n", q.Remedy)
		}
	}
	for _, n := range p.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	if len(p.Steps) == 0 {
		return
	}
	verb := "plan"
	if dryRun {
		verb = "plan (--dry-run: nothing is changed)"
	}
	fmt.Fprintf(w, "%s:\n", verb)
	dry := change.Dry{W: w, Indent: "       ", Run: "$ "}
	for i, s := range p.Steps {
		fmt.Fprintf(w, "  %d. %s\n", i+1, s.Title)
		for _, c := range s.Commands {
			dry.Command(strings.Join(c, " "))
		}
		if s.File != nil {
			dry.Line("write " + s.File.Path)
			if dryRun {
				dry.Diff(*s.File)
			}
		}
	}
}
