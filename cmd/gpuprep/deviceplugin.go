package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/gpuprep/gpuprep/internal/deviceplugin"
	"github.com/gpuprep/gpuprep/internal/kube"
)

// addDevicePluginFlag adds --device-plugin-version; cluster says whether
// the command reads the release from a cluster (--kubeconfig).
func addDevicePluginFlag(fs *pflag.FlagSet, v *string, cluster bool) {
	def := deviceplugin.Default + ", what the GPU Operator deploys"
	if cluster {
		def = "with --kubeconfig or --apply the release the cluster runs, else " + def
	}
	// the help names no table entry: building it must not parse the table
	// on every start
	fs.StringVar(v, "device-plugin-version", "", "NVIDIA sandbox device plugin release to name resources for, as the pci.ids bundled in its image names devices (releases "+
		deviceplugin.Oldest+" and later that gpuprep knows; default: "+def+")")
}

// devicePlugin is the sandbox device plugin release resource names are made
// for, and the cluster it was read from.
type devicePlugin struct {
	rel    deviceplugin.Release
	client *kube.Client // nil: no cluster
	note   string       // which release, and why
}

// newDevicePlugin chooses the release: version when given; else, with a
// cluster (kubeconfig, cluster true), the one its GPU Operator runs; else
// deviceplugin.Default. A release gpuprep has no pci.ids for is refused:
// its names cannot be known.
func newDevicePlugin(ctx context.Context, version, kubeconfig string, cluster bool) (*devicePlugin, error) {
	d := &devicePlugin{}
	running, where := "", ""
	if cluster {
		c, err := kube.NewClient(kubeconfig)
		if err != nil {
			return nil, usageErr("%v", err)
		}
		d.client = c
		if running, where, err = clusterRelease(ctx, c); err != nil {
			return nil, &exitError{code: exitNotReady, err: err}
		}
	}
	tag, why := version, "--device-plugin-version"
	switch {
	case version != "" && running != "" && running != version:
		why += "; the cluster runs " + running + " (" + where + "), whose names may differ"
	case version != "":
	case running != "":
		tag, why = running, "the release the cluster runs: "+where
	case cluster:
		tag, why = deviceplugin.Default, "the GPU Operator's default; "+where
	default:
		tag, why = deviceplugin.Default, "what the GPU Operator deploys by default; --kubeconfig reads the cluster's"
	}
	rel, err := deviceplugin.Lookup(tag)
	switch {
	case err != nil && version != "":
		return nil, usageErr("--device-plugin-version: %v", err)
	case err != nil:
		return nil, &exitError{code: exitUnknown, err: fmt.Errorf("%s: %v", where, err)}
	}
	d.rel = rel
	d.note = fmt.Sprintf("resource names as NVIDIA's sandbox device plugin %s names them (%s)", rel, why)
	return d, nil
}

// clusterRelease is the tag of the sandbox device plugin image the cluster's
// GPU Operator runs ("" when it runs none) and where it was found.
func clusterRelease(ctx context.Context, c *kube.Client) (tag, where string, err error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	imgs, err := c.SandboxDevicePluginImages(ctx)
	if err != nil {
		return "", "", err
	}
	if len(imgs) == 0 {
		return "", "no sandbox device plugin DaemonSet (nvidia-sandbox-device-plugin-daemonset) on " + c.Server, nil
	}
	var seen []string
	for _, img := range imgs {
		t, err := deviceplugin.ImageTag(img.Image)
		if err != nil {
			return "", "", fmt.Errorf("sandbox device plugin DaemonSet in namespace %s: %v: give --device-plugin-version", img.Namespace, err)
		}
		if tag != "" && t != tag {
			return "", "", fmt.Errorf("sandbox device plugin DaemonSets run different releases (%s): give --device-plugin-version", strings.Join(append(seen, img.Namespace+" "+t), ", "))
		}
		tag = t
		seen = append(seen, img.Namespace+" "+t)
	}
	return tag, "DaemonSet " + imgs[0].Namespace + "/nvidia-sandbox-device-plugin-daemonset, image " + imgs[0].Image, nil
}

// name renames the hosts' devices for d's release; the notes say which
// devices the release cannot advertise (and so are left out), with their
// hosts.
func (d *devicePlugin) name(hosts []kube.Host) []string {
	var order []string
	where := map[string][]string{}
	for _, h := range hosts {
		for _, n := range h.Report.NameResources(d.rel) {
			if _, ok := where[n]; !ok {
				order = append(order, n)
			}
			where[n] = appendUnique(where[n], h.Name)
		}
	}
	notes := []string{d.note}
	for _, n := range order {
		notes = append(notes, n+": left out (hosts "+strings.Join(where[n], ", ")+")")
	}
	return notes
}

// advertised checks p's resource names against what the cluster's nodes
// advertise (.status.allocatable): a note for each entry no node
// advertises. Nothing without a cluster.
func (d *devicePlugin) advertised(ctx context.Context, p *kube.KubeVirtPatch) []string {
	if d.client == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	nodes, err := d.client.NodeResources(ctx)
	if err != nil {
		return []string{"not checked against the nodes' resources: " + err.Error()}
	}
	var names []string
	phd := p.Spec.Configuration.PermittedHostDevices
	for _, e := range phd.PCIHostDevices {
		names = append(names, e.ResourceName)
	}
	for _, e := range phd.MediatedDevices {
		names = append(names, e.ResourceName)
	}
	seen := "no node advertises any nvidia.com/ resource yet (the sandbox device plugin advertises a GPU once its node is labelled for VMs and the GPU is on vfio-pci)"
	if adv := deviceplugin.Advertised(nodes); len(adv) > 0 {
		seen = "nodes advertise " + strings.Join(adv, ", ")
	}
	var notes []string
	for _, n := range deviceplugin.Unadvertised(names, nodes) {
		notes = append(notes, fmt.Sprintf("permittedHostDevices %s: no node of %d advertises it; %s", n, len(nodes), seen))
	}
	return notes
}

func appendUnique(s []string, v string) []string {
	for _, x := range s {
		if x == v {
			return s
		}
	}
	return append(s, v)
}
