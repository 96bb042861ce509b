package kube

import (
	"context"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
)

// kubeVirtCR is the part of the KubeVirt custom resource gpuprep reads.
type kubeVirtCR struct {
	Metadata struct {
		Name            string `json:"name"`
		Namespace       string `json:"namespace"`
		ResourceVersion string `json:"resourceVersion"`
	} `json:"metadata"`
	Spec struct {
		Configuration struct {
			DeveloperConfiguration struct {
				FeatureGates []string `json:"featureGates"`
			} `json:"developerConfiguration"`
			MediatedDevicesConfiguration *MediatedDevicesConfiguration `json:"mediatedDevicesConfiguration"`
			PermittedHostDevices         struct {
				PCIHostDevices  []PCIHostDevice  `json:"pciHostDevices"`
				MediatedDevices []MediatedDevice `json:"mediatedDevices"`
			} `json:"permittedHostDevices"`
		} `json:"configuration"`
	} `json:"spec"`
	Status struct {
		ObservedKubeVirtVersion string `json:"observedKubeVirtVersion"`
	} `json:"status"`
}

// ApplyResult says what ApplyKubeVirt changed.
type ApplyResult struct {
	Namespace, Name string
	Changed         bool
	Added           []string // feature gates and devices added
}

// ApplyKubeVirt merges p into the cluster's KubeVirt CR: feature gates and
// permitted devices are added to what the CR already has (a plain merge
// patch would replace those lists), and entries for the same selector are
// updated in place. The patch carries the CR's resourceVersion; a conflict
// is retried. With no CR, or several and no name, it says so.
func (c *Client) ApplyKubeVirt(ctx context.Context, p *KubeVirtPatch, namespace, name string, dryRun bool) (*ApplyResult, error) {
	res := &ApplyResult{}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cr, err := c.findKubeVirt(ctx, namespace, name)
		if err != nil {
			return err
		}
		res.Namespace, res.Name, res.Added, res.Changed = cr.Metadata.Namespace, cr.Metadata.Name, nil, false
		conf := mergeKubeVirt(cr, p, res)
		if len(res.Added) == 0 {
			return nil
		}
		body, _ := json.Marshal(map[string]any{
			"metadata": map[string]any{"resourceVersion": cr.Metadata.ResourceVersion},
			"spec":     map[string]any{"configuration": conf},
		})
		req := c.rest.Patch(types.MergePatchType).
			AbsPath("/apis/kubevirt.io/v1/namespaces", cr.Metadata.Namespace, "kubevirts", cr.Metadata.Name).
			Param("fieldManager", "gpuprep").Body(body)
		if dryRun {
			req = req.Param("dryRun", "All")
		}
		if err := req.Do(ctx).Error(); err != nil {
			return c.explain(err, "patch", "kubevirts.kubevirt.io", cr.Metadata.Name)
		}
		res.Changed = true
		return nil
	})
	return res, err
}

// mergeKubeVirt is the configuration of the merge patch that adds p to the
// CR cr, recording in res.Added what it adds or updates.
func mergeKubeVirt(cr *kubeVirtCR, p *KubeVirtPatch, res *ApplyResult) map[string]any {
	cfg := cr.Spec.Configuration
	gates := cfg.DeveloperConfiguration.FeatureGates
	if dc := p.Spec.Configuration.DeveloperConfiguration; dc != nil {
		for _, g := range dc.FeatureGates {
			if !contains(gates, g) {
				gates = append(gates, g)
				res.Added = append(res.Added, "featureGate "+g)
			}
		}
	}
	mdc := p.Spec.Configuration.MediatedDevicesConfiguration
	if cur := cfg.MediatedDevicesConfiguration; mdc != nil && (cur == nil || cur.Enabled == nil || *cur.Enabled != *mdc.Enabled) {
		res.Added = append(res.Added, fmt.Sprintf("mediatedDevicesConfiguration.enabled: %t", *mdc.Enabled))
	} else {
		mdc = nil // as it is: not in the patch
	}
	pcis := mergeDevices(cfg.PermittedHostDevices.PCIHostDevices, p.Spec.Configuration.PermittedHostDevices.PCIHostDevices,
		func(d PCIHostDevice) string { return d.PCIVendorSelector }, func(d PCIHostDevice) string { return "pciHostDevice " + d.PCIVendorSelector + " " + d.ResourceName }, res)
	mdevs := mergeDevices(cfg.PermittedHostDevices.MediatedDevices, p.Spec.Configuration.PermittedHostDevices.MediatedDevices,
		func(d MediatedDevice) string { return d.MdevNameSelector }, func(d MediatedDevice) string { return "mediatedDevice " + d.MdevNameSelector }, res)
	phd := map[string]any{"pciHostDevices": pcis}
	if len(mdevs) > 0 {
		phd["mediatedDevices"] = mdevs
	}
	conf := map[string]any{"permittedHostDevices": phd}
	if len(gates) > 0 {
		conf["developerConfiguration"] = map[string]any{"featureGates": gates}
	}
	if mdc != nil {
		conf["mediatedDevicesConfiguration"] = map[string]any{"enabled": *mdc.Enabled} // a merge patch keeps its other fields
	}
	return conf
}

// mergeDevices adds each of add to have, in place of the entry with the
// same selector (sel), recording in res.Added each added (named by what)
// or updated.
func mergeDevices[D comparable](have, add []D, sel, what func(D) string, res *ApplyResult) []D {
	for _, d := range add {
		i := indexOf(len(have), func(i int) bool { return sel(have[i]) == sel(d) })
		switch {
		case i < 0:
			have = append(have, d)
			res.Added = append(res.Added, what(d))
		case have[i] != d:
			have[i] = d
			res.Added = append(res.Added, what(d)+" (updated)")
		}
	}
	return have
}

func (c *Client) findKubeVirt(ctx context.Context, namespace, name string) (*kubeVirtCR, error) {
	path := "/apis/kubevirt.io/v1/kubevirts"
	if namespace != "" {
		path = "/apis/kubevirt.io/v1/namespaces/" + namespace + "/kubevirts"
	}
	raw, err := c.rest.Get().AbsPath(path).Do(ctx).Raw()
	if err != nil {
		return nil, c.explain(err, "list", "kubevirts.kubevirt.io", "")
	}
	var list struct {
		Items []kubeVirtCR `json:"items"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, err
	}
	var found []kubeVirtCR
	for _, it := range list.Items {
		if name == "" || it.Metadata.Name == name {
			found = append(found, it)
		}
	}
	switch len(found) {
	case 0:
		return nil, fmt.Errorf("no KubeVirt resource found on %s (is KubeVirt installed?)", c.Server)
	case 1:
		return &found[0], nil
	}
	return nil, fmt.Errorf("%d KubeVirt resources on %s: choose one with --name and --namespace", len(found), c.Server)
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func indexOf(n int, f func(int) bool) int {
	for i := 0; i < n; i++ {
		if f(i) {
			return i
		}
	}
	return -1
}
