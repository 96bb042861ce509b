package kube

import (
	"context"
	"fmt"
)

// DeveloperConfiguration is the KubeVirt CR's developerConfiguration, as
// far as a patch sets it.
type DeveloperConfiguration struct {
	FeatureGates []string `json:"featureGates" yaml:"featureGates"`
}

// MediatedDevicesConfiguration is the KubeVirt CR's
// mediatedDevicesConfiguration, as far as a patch sets it.
type MediatedDevicesConfiguration struct {
	Enabled *bool `json:"enabled" yaml:"enabled"`
}

// GPUGateGASince is the first KubeVirt release where the GPU feature gate
// is GA, and listing it only earns a deprecation warning
// ("feature gate GPU is deprecated (feature state is "General
// Availability")…"): kubevirt/kubevirt v1.4.0,
// pkg/virt-config/deprecation/feature-gates.go (GPUGate = "GPU" // GA);
// v1.3.0 lists it among the active gates (pkg/virt-config/feature-gates.go).
var GPUGateGASince = KubeVirtVersion{1, 4}

// MDEVConfigurationSince is the first KubeVirt release with
// mediatedDevicesConfiguration.enabled, which "Replaces the deprecated
// DisableMDEVConfiguration feature gate" (kubevirt/kubevirt v1.8.0,
// staging/src/kubevirt.io/api/core/v1/types.go, MediatedDevicesConfiguration;
// the gate is Deprecated: v1.8.0 and warned about when listed).
var MDEVConfigurationSince = KubeVirtVersion{1, 8}

// configureFor sets what release v wants so that VMs get GPUs, and, where
// vGPU types are permitted, KubeVirt leaves the mdevs to the GPU Operator
// (its vgpu-device-manager creates them; KubeVirt's own handling would
// remove them): the GPU gate before v1.4, DisableMDEVConfiguration before
// v1.8, mediatedDevicesConfiguration.enabled: false from v1.8. The note
// says which release was assumed and what that meant.
func (p *KubeVirtPatch) configureFor(v KubeVirtVersion, from string, mdevs bool) []string {
	var gates []string
	if !v.AtLeast(GPUGateGASince) {
		gates = append(gates, "GPU")
	}
	switch {
	case mdevs && !v.AtLeast(MDEVConfigurationSince):
		gates = append(gates, "DisableMDEVConfiguration")
	case mdevs:
		off := false
		p.Spec.Configuration.MediatedDevicesConfiguration = &MediatedDevicesConfiguration{Enabled: &off}
	}
	if len(gates) > 0 {
		p.Spec.Configuration.DeveloperConfiguration = &DeveloperConfiguration{FeatureGates: gates}
	}
	if from == "" {
		from = "--kubevirt-version"
	}
	what := fmt.Sprintf("KubeVirt %s assumed (%s): ", v, from)
	if !v.AtLeast(GPUGateGASince) {
		what += "feature gate GPU (GA from " + GPUGateGASince.String() + ")"
	} else {
		what += "no GPU feature gate (GA since " + GPUGateGASince.String() + "; listing it earns a deprecation warning)"
	}
	switch {
	case mdevs && !v.AtLeast(MDEVConfigurationSince):
		what += "; feature gate DisableMDEVConfiguration, so that KubeVirt leaves the mdevs to the GPU Operator"
	case mdevs:
		what += "; mediatedDevicesConfiguration.enabled: false (DisableMDEVConfiguration is deprecated since " + MDEVConfigurationSince.String() + "), so that KubeVirt leaves the mdevs to the GPU Operator"
	}
	return []string{what}
}

// KubeVirtRelease reads the release the cluster's KubeVirt runs: the CR's
// status.observedKubeVirtVersion (virt-operator's "v1.9.0"); "" when the
// CR reports none yet.
func (c *Client) KubeVirtRelease(ctx context.Context, namespace, name string) (string, error) {
	cr, err := c.findKubeVirt(ctx, namespace, name)
	if err != nil {
		return "", err
	}
	return cr.Status.ObservedKubeVirtVersion, nil
}
