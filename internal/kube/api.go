package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"
)

// Client talks to the Kubernetes API through client-go's REST client over
// Node objects only. It deliberately avoids the typed clientset, whose
// package initialisation registers every API group (about 10 ms of CPU and
// 14 MiB on every gpuprep start, measured), which `gpuprep check` must not pay.
type Client struct {
	rest   rest.Interface
	Server string
	User   string
	// beforePatch, when set (tests), runs between reading the Node and
	// patching it: where a concurrent writer would strike.
	beforePatch func()
}

// node is the part of a Node gpuprep reads.
type node struct {
	Metadata struct {
		Name            string            `json:"name"`
		ResourceVersion string            `json:"resourceVersion"`
		Labels          map[string]string `json:"labels"`
	} `json:"metadata"`
}

func (c *Client) getNode(ctx context.Context, name string) (*node, error) {
	raw, err := c.rest.Get().Resource("nodes").Name(name).Do(ctx).Raw()
	if err != nil {
		return nil, err
	}
	n := &node{}
	if err := json.Unmarshal(raw, n); err != nil {
		return nil, fmt.Errorf("node %s: %w", name, err)
	}
	return n, nil
}

// NewClient loads a kubeconfig: path when given, else $KUBECONFIG, else
// ~/.kube/config (client-go's loading rules).
func NewClient(path string) (*Client, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if path != "" {
		rules.ExplicitPath = path
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{})
	cfg, err := cc.ClientConfig()
	if clientcmd.IsEmptyConfig(err) && path == "" {
		return nil, noKubeconfig(rules)
	}
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	return newClient(cfg, cc)
}

// KubeconfigPath is the file NewClient(path) loads its kubeconfig from,
// absolute: what the journal records, so that rollback (run from another
// directory, or under sudo with another $KUBECONFIG and home) finds the same
// one. "" when no single file says it: $KUBECONFIG lists several (client-go
// merges them) or none exists (client-go's in-cluster configuration); rollback
// then loads the default again.
func KubeconfigPath(path string) string {
	if path != "" {
		if abs, err := filepath.Abs(path); err == nil {
			return abs
		}
		return path
	}
	var found []string
	for _, p := range clientcmd.NewDefaultClientConfigLoadingRules().GetLoadingPrecedence() {
		if p == "" {
			continue
		}
		if _, err := os.Stat(p); err == nil {
			found = append(found, p)
		}
	}
	if len(found) != 1 {
		return ""
	}
	if abs, err := filepath.Abs(found[0]); err == nil {
		return abs
	}
	return found[0]
}

func newClient(cfg *rest.Config, cc clientcmd.ClientConfig) (*Client, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = "gpuprep"
	cfg.APIPath = "/api"
	cfg.GroupVersion = &schema.GroupVersion{Version: "v1"}
	sch := runtime.NewScheme()
	metav1.AddToGroupVersion(sch, schema.GroupVersion{Version: "v1"})
	cfg.NegotiatedSerializer = serializer.NewCodecFactory(sch).WithoutConversion()
	rc, err := rest.RESTClientFor(cfg)
	if err != nil {
		return nil, err
	}
	c := &Client{rest: rc, Server: cfg.Host}
	if cc != nil {
		if raw, err := cc.RawConfig(); err == nil {
			if ctx := raw.Contexts[raw.CurrentContext]; ctx != nil {
				c.User = ctx.AuthInfo
			}
		}
	}
	return c, nil
}

// LabelResult says what LabelNode did.
type LabelResult struct {
	Changed bool
	Before  map[string]string // the node's labels gpuprep manages, before
	After   map[string]string
}

// LabelNode sets and removes labels on the node with a JSON merge patch
// guarded by the node's resourceVersion (a conflict is retried), and changes
// nothing when the labels are already right. dryRun asks the API server to
// validate without persisting. Errors say what went wrong in terms a
// cluster admin acts on: node not found, RBAC verb and resource, API server
// unreachable.
func (c *Client) LabelNode(ctx context.Context, name string, set []Label, remove []string, dryRun bool) (*LabelResult, error) {
	res := &LabelResult{Before: map[string]string{}, After: map[string]string{}}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := c.getNode(ctx, name)
		if err != nil {
			return c.explain(err, "get", "nodes", name)
		}
		labels := n.Metadata.Labels
		patch := map[string]any{}
		for _, l := range set {
			if v, ok := labels[l.Key]; ok {
				res.Before[l.Key] = v
			}
			res.After[l.Key] = l.Value
			if labels[l.Key] != l.Value || !has(labels, l.Key) {
				patch[l.Key] = l.Value
			}
		}
		for _, k := range remove {
			if v, ok := labels[k]; ok {
				res.Before[k] = v
				patch[k] = nil
			}
		}
		if len(patch) == 0 {
			res.Changed = false
			return nil
		}
		if c.beforePatch != nil {
			c.beforePatch()
		}
		body, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": patch, "resourceVersion": n.Metadata.ResourceVersion}})
		req := c.rest.Patch(types.MergePatchType).Resource("nodes").Name(name).Param("fieldManager", "gpuprep").Body(body)
		if dryRun {
			req = req.Param("dryRun", metav1.DryRunAll)
		}
		if err := req.Do(ctx).Error(); err != nil {
			if apierrors.IsConflict(err) {
				return err // retried
			}
			return c.explain(err, "patch", "nodes", name)
		}
		res.Changed = true
		return nil
	})
	return res, err
}

func has(m map[string]string, k string) bool {
	_, ok := m[k]
	return ok
}

// explain turns API errors into what to do about them. resource is
// "nodes" (core group) or "kubevirts.kubevirt.io".
func (c *Client) explain(err error, verb, resource, name string) error {
	var netErr net.Error
	group := ""
	res := resource
	if i := strings.IndexByte(resource, '.'); i > 0 {
		res, group = resource[:i], resource[i+1:]
	}
	switch {
	case apierrors.IsNotFound(err) && res == "nodes":
		return fmt.Errorf("node %q not found on %s: has it joined the cluster? (before it joins: gpuprep label --before-join)", name, c.Server)
	case apierrors.IsNotFound(err):
		return fmt.Errorf("%s not found on %s: %v", resource, c.Server, apierrors.ReasonForError(err))
	case apierrors.IsForbidden(err):
		who := c.User
		if who == "" {
			who = "this kubeconfig's user"
		}
		return fmt.Errorf("forbidden: %s may not %s %s (RBAC: grant verb %q on resource %q in API group %q)", who, verb, res, verb, res, group)
	case apierrors.IsUnauthorized(err):
		return fmt.Errorf("unauthorized at %s: the kubeconfig's credentials were refused", c.Server)
	case errors.As(err, &netErr) || strings.Contains(err.Error(), "connection refused") || strings.Contains(err.Error(), "no such host"):
		return fmt.Errorf("API server %s unreachable: %v", c.Server, err)
	}
	return fmt.Errorf("%s %s %s: %w", verb, res, name, err)
}
