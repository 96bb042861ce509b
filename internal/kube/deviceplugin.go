package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
)

// The GPU Operator's sandbox device plugin DaemonSet and its container
// (NVIDIA/gpu-operator assets/state-sandbox-device-plugin/0500_daemonset.yaml
// at a22dbf67); the operator fills in the namespace it runs in and the
// image, repository/image:version from its values' sandboxDevicePlugin.
const (
	sandboxDaemonSet = "nvidia-sandbox-device-plugin-daemonset"
	sandboxContainer = "nvidia-sandbox-device-plugin-ctr"
)

// DevicePluginImage is the image of one sandbox device plugin DaemonSet.
type DevicePluginImage struct {
	Namespace, Image string
}

// SandboxDevicePluginImages finds the GPU Operator's sandbox device plugin
// DaemonSets, in whatever namespace the operator runs (a list of
// daemonsets.apps across namespaces, selected by name), and the image of
// their plugin container. None: the operator deploys no sandbox device
// plugin (sandboxWorkloads not enabled), or is not installed.
func (c *Client) SandboxDevicePluginImages(ctx context.Context) ([]DevicePluginImage, error) {
	raw, err := c.rest.Get().AbsPath("/apis/apps/v1/daemonsets").
		Param("fieldSelector", "metadata.name="+sandboxDaemonSet).Do(ctx).Raw()
	if err != nil {
		return nil, c.explain(err, "list", "daemonsets.apps", "")
	}
	var list struct {
		Items []struct {
			Metadata struct {
				Name, Namespace string
			} `json:"metadata"`
			Spec struct {
				Template struct {
					Spec struct {
						Containers []struct {
							Name, Image string
						} `json:"containers"`
					} `json:"spec"`
				} `json:"template"`
			} `json:"spec"`
		} `json:"items"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, fmt.Errorf("daemonsets %s: %w", sandboxDaemonSet, err)
	}
	var out []DevicePluginImage
	for _, ds := range list.Items {
		cs := ds.Spec.Template.Spec.Containers
		i := slices.IndexFunc(cs, func(c struct{ Name, Image string }) bool { return c.Name == sandboxContainer })
		if i < 0 {
			return nil, fmt.Errorf("DaemonSet %s/%s has no container %s: not the GPU Operator's sandbox device plugin as gpuprep knows it", ds.Metadata.Namespace, ds.Metadata.Name, sandboxContainer)
		}
		out = append(out, DevicePluginImage{Namespace: ds.Metadata.Namespace, Image: cs[i].Image})
	}
	return out, nil
}

// NodeResources is each node's allocatable resource names
// (.status.allocatable): what kubelet advertises for it, device plugins'
// resources among them.
func (c *Client) NodeResources(ctx context.Context) (map[string][]string, error) {
	raw, err := c.rest.Get().Resource("nodes").Do(ctx).Raw()
	if err != nil {
		return nil, c.explain(err, "list", "nodes", "")
	}
	var list struct {
		Items []struct {
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
			Status struct {
				Allocatable map[string]any `json:"allocatable"`
			} `json:"status"`
		} `json:"items"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, fmt.Errorf("nodes: %w", err)
	}
	out := map[string][]string{}
	for _, n := range list.Items {
		var rs []string
		for r := range n.Status.Allocatable {
			rs = append(rs, r)
		}
		slices.Sort(rs)
		out[n.Metadata.Name] = rs
	}
	return out, nil
}
