package preflight

import (
	"path"
	"strings"
	"time"

	"github.com/gpuprep/gpuprep/internal/journal"
)

// The kubelet's --node-labels label a Node only when the kubelet creates
// it: tryRegisterWithAPIServer (kubernetes/kubernetes,
// pkg/kubelet/kubelet_node_status.go), finding the Node already there,
// reconciles the controller-managed attach-detach annotation, the default
// labels (updateDefaultLabels: hostname, OS, architecture, instance type,
// zone, region) and extended resources, never the --node-labels; the flag's
// help says "Labels to add when registering the node in the cluster". A
// label put into the kubelet's files after the kubelet registered the Node
// is therefore on the Node only if something else put it there (gpuprep
// label, kubectl label), which the host does not show.

// kubeletClientCerts is where the kubelet keeps the client certificates
// its TLS bootstrap and each rotation write (kubelet-client-DATE.pem,
// kubelet-client-current.pem linking to the newest): the first is written
// just before the kubelet registers its Node.
const kubeletClientCerts = "/var/lib/kubelet/pki"

// kubeletRegistered is the evidence that the kubelet has registered its
// Node, and when it did at the latest (the oldest client certificate, or
// kubeadm's /etc/kubernetes/kubelet.conf, which the kubelet writes after
// its bootstrap); ok false where there is none.
func kubeletRegistered(e *Env) (what string, at time.Time, ok bool) {
	consider := func(p string) {
		fi, err := e.Root.Lstat(p)
		if err != nil || !fi.Mode().IsRegular() {
			return
		}
		if !ok || fi.ModTime().Before(at) {
			what, at, ok = p, fi.ModTime(), true
		}
	}
	for _, n := range e.Root.Names(kubeletClientCerts) {
		if strings.HasPrefix(n, "kubelet-client-") && strings.HasSuffix(n, ".pem") && n != "kubelet-client-current.pem" {
			consider(path.Join(kubeletClientCerts, n))
		}
	}
	consider("/etc/kubernetes/kubelet.conf")
	return what, at, ok
}

// labelledThroughAPI reports whether gpuprep label journalled a change of
// the workload label on the Node (a label entry naming the key) after t.
func labelledThroughAPI(e *Env, t time.Time) bool {
	entries, err := journal.Read(e.Root)
	if err != nil {
		return false
	}
	for _, en := range entries {
		if en.Kind != journal.KindLabel || en.Time.Before(t) {
			continue
		}
		for _, k := range strings.Split(en.Label().Keys, ",") {
			if k == WorkloadLabel {
				return true
			}
		}
	}
	return false
}

// labelAfterRegistration turns f, a verdict on the label the kubelet's
// file sets, into a warning where that file changed after the kubelet
// registered the Node and gpuprep did not label the Node since: whether
// the Node carries the label is not known from the host.
func labelAfterRegistration(e *Env, file string, mode Mode, f *Finding) {
	if f.Status != Pass {
		return
	}
	reg, at, ok := kubeletRegistered(e)
	if !ok {
		return
	}
	fi, err := e.Root.Stat(file)
	if err == nil && !fi.ModTime().After(at) {
		return // the kubelet read it when it registered the Node
	}
	if labelledThroughAPI(e, at) {
		f.Message += "; gpuprep label set it on the Node through the API server (journal)"
		return
	}
	when := "at an unknown time"
	if err == nil {
		when = "at " + fi.ModTime().UTC().Format(time.RFC3339)
	}
	fix := "gpuprep label --mode " + string(mode)
	f.Status = Warn
	f.Message = "set in " + file + " " + when + ", after the kubelet registered the Node (" + reg + ", " + at.UTC().Format(time.RFC3339) +
		"): the kubelet applies --node-labels only when it creates the Node, so whether the Node carries the label is not known from the host"
	f.Remedy = fix + " (labels the Node through the API server), or check it: kubectl get node NODE -L " + WorkloadLabel
	f.Fixable, f.FixCommand = true, fix
}
