package kube

import (
	"fmt"
	"github.com/gpuprep/gpuprep/internal/change"
	"regexp"
	"sync"

	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/kubeletargs"
)

// Label keys the GPU Operator reads.
const (
	WorkloadLabel   = "nvidia.com/gpu.workload.config"
	VGPUConfigLabel = "nvidia.com/vgpu.config"
)

var labelValueRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$`) })

// ValidateLabelValue checks a Kubernetes label value: at most 63
// characters, alphanumerics with '-', '_' and '.' inside.
func ValidateLabelValue(key, v string) error {
	if len(v) > 63 || !labelValueRe().MatchString(v) {
		return fmt.Errorf("label %s=%q: a label value is at most 63 characters: letters, digits, '-', '_' or '.', starting and ending with a letter or digit", key, v)
	}
	return nil
}

// Label is one key=value.
type Label = kubeletargs.Label

// EditError names the file and line gpuprep refuses to edit.
type EditError = kubeletargs.EditError

// ParseLabels parses a --node-labels value: "k=v,k2=v2".
func ParseLabels(s string) ([]Label, error) { return kubeletargs.ParseLabels(s) }

// MergeLabels sets the labels of set (in place where the key exists, at the
// end otherwise) and drops the keys of remove; everything else keeps its
// order.
func MergeLabels(have []Label, set []Label, remove []string) []Label {
	return kubeletargs.MergeLabels(have, set, remove)
}

// FormatLabels writes labels as a --node-labels value.
func FormatLabels(ls []Label) string { return kubeletargs.FormatLabels(ls) }

// EditKubeletLabels edits the kubelet's flags in root so that the labels it
// registers with (its effective --node-labels over all the environment files
// its unit reads, e.g. kubeadm-flags.env and /etc/default/kubelet) have set
// and lack remove: set goes into KubeletEnvFile's KUBELET_EXTRA_ARGS, the
// last on the command line, and the keys leave every other --node-labels.
// It returns the files that change.
func EditKubeletLabels(root *host.Root, set []Label, remove []string) ([]change.File, error) {
	return kubeletargs.Edit(root, KubeletEnvFile(root), set, remove)
}

// RemoveKubeletLabels removes keys from every --node-labels of the kubelet's
// environment files, for labels set elsewhere (a kubeadm JoinConfiguration,
// whose kubeletExtraArgs come before KUBELET_EXTRA_ARGS on the command line).
func RemoveKubeletLabels(root *host.Root, keys []string) ([]change.File, error) {
	return kubeletargs.Edit(root, "", nil, keys)
}
