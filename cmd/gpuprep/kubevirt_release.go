package main

import (
	"context"
	"time"

	"github.com/gpuprep/gpuprep/internal/kube"
)

// clusterKubeVirt returns the release the cluster's KubeVirt CR reports
// (status.observedKubeVirtVersion) and where it came from; def, with a
// source saying why, when the CR reports none or cannot be read.
func clusterKubeVirt(ctx context.Context, kubeconfig, namespace, name string, def kube.KubeVirtVersion) (kube.KubeVirtVersion, string, error) {
	client, err := kube.NewClient(kubeconfig)
	if err != nil {
		return def, "", usageErr("%v", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	rel, err := client.KubeVirtRelease(ctx, namespace, name)
	if err != nil {
		// no KubeVirt (yet), or not readable: the default, and why (--apply
		// then fails on the CR itself)
		return def, "the default: the cluster's KubeVirt CR could not be read: " + err.Error(), nil
	}
	if rel == "" {
		return def, "the default: the cluster's KubeVirt CR reports no status.observedKubeVirtVersion yet", nil
	}
	v, err := kube.ParseKubeVirtVersion(rel)
	if err != nil {
		return def, "", &exitError{code: exitNotReady, err: err}
	}
	return v, "the cluster's KubeVirt CR, status.observedKubeVirtVersion " + rel, nil
}
