package vfio

import (
	"strings"

	"github.com/gpuprep/gpuprep/grub"
	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/kernelrelease"
)

// nextKernel is the kernel release whose modules (modules.builtin,
// modules.dep), configuration and initramfs the persistence verdicts read:
// the one the bootloader boots next (grub.FindNextKernel). Where that
// cannot be told, the running kernel's release, and nk.Release is "" with
// nk.Missing saying what was missing: a verdict resting on it is an
// assumption, not evidence.
func nextKernel(root *host.Root) (kver string, nk grub.NextKernel) {
	nk = grub.FindNextKernel(root)
	if nk.Release != "" {
		return nk.Release, nk
	}
	k, _ := kernelrelease.Running(root)
	return strings.TrimSpace(k), nk
}
