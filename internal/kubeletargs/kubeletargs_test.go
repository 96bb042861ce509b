package kubeletargs

import (
	"github.com/gpuprep/gpuprep/internal/change"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/host"
)

const (
	wl   = "nvidia.com/gpu.workload.config"
	vcfg = "nvidia.com/vgpu.config"
)

func rootWith(t *testing.T, files map[string]string) *host.Root {
	t.Helper()
	dir := t.TempDir()
	for f, c := range files {
		p := filepath.Join(dir, f)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(c), 0o644))
	}
	r, err := host.NewRoot(dir)
	require.NoError(t, err)
	return r
}

const kubeadmDropIn = `[Service]
Environment="KUBELET_KUBECONFIG_ARGS=--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf --kubeconfig=/etc/kubernetes/kubelet.conf"
Environment="KUBELET_CONFIG_ARGS=--config=/var/lib/kubelet/config.yaml"
EnvironmentFile=-/var/lib/kubelet/kubeadm-flags.env
EnvironmentFile=-/etc/default/kubelet
ExecStart=
ExecStart=/usr/bin/kubelet $KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS $KUBELET_KUBEADM_ARGS $KUBELET_EXTRA_ARGS
`

// The kubelet merges repeated --node-labels, a later value of a key
// winning, over $KUBELET_KUBEADM_ARGS then $KUBELET_EXTRA_ARGS; a unit's
// drop-ins say which files and variables count.
func TestReadEffectiveLabels(t *testing.T) {
	for _, c := range []struct {
		name        string
		files       map[string]string
		value, file string
		found       bool
	}{
		{"repeated flags, the last wins", map[string]string{
			"/etc/default/kubelet": `KUBELET_EXTRA_ARGS="--node-labels=` + wl + `=vm-vgpu --node-labels ` + wl + `=vm-passthrough"` + "\n",
		}, "vm-passthrough", "/etc/default/kubelet", true},
		{"extra args after kubeadm args", map[string]string{
			"/etc/default/kubelet":               `KUBELET_EXTRA_ARGS="--node-labels=a=b"` + "\n",
			"/var/lib/kubelet/kubeadm-flags.env": `KUBELET_KUBEADM_ARGS="--node-labels=` + wl + `=vm-vgpu"` + "\n",
		}, "vm-vgpu", "/var/lib/kubelet/kubeadm-flags.env", true},
		{"empty items, as the kubelet skips them", map[string]string{
			"/etc/default/kubelet": `KUBELET_EXTRA_ARGS="--node-labels=a=b,,` + wl + `=vm-vgpu,"` + "\n",
		}, "vm-vgpu", "/etc/default/kubelet", true},
		{"no flag", map[string]string{"/etc/default/kubelet": "KUBELET_EXTRA_ARGS=--v=2\n"}, "", "", false},
		{"a drop-in's ExecStart comes last", map[string]string{
			"/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf": kubeadmDropIn,
			"/etc/systemd/system/kubelet.service.d/20-gpu.conf":         "[Service]\nExecStart=\nExecStart=/usr/bin/kubelet $KUBELET_EXTRA_ARGS --node-labels=" + wl + "=container\n",
			"/etc/default/kubelet":                                      `KUBELET_EXTRA_ARGS="--node-labels=` + wl + `=vm-vgpu"` + "\n",
		}, "container", "/etc/systemd/system/kubelet.service.d/20-gpu.conf", true},
		{"a file the unit does not read does not count", map[string]string{
			"/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf": kubeadmDropIn,
			"/etc/sysconfig/kubelet":                                    `KUBELET_EXTRA_ARGS="--node-labels=` + wl + `=vm-vgpu"` + "\n",
		}, "", "", false},
		{"Environment= in a drop-in, overridden by an environment file", map[string]string{
			"/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf": kubeadmDropIn,
			"/etc/systemd/system/kubelet.service.d/30-env.conf":         "[Service]\nEnvironment=\"KUBELET_EXTRA_ARGS=--node-labels=" + wl + "=vm-vgpu\"\n",
		}, "vm-vgpu", "/etc/systemd/system/kubelet.service.d/30-env.conf", true},
	} {
		v, f, ok := Read(rootWith(t, c.files)).Lookup(wl)
		require.Equal(t, c.found, ok, c.name)
		require.Equal(t, c.value, v, c.name)
		require.Equal(t, c.file, f, c.name)
	}
}

func apply(t *testing.T, r *host.Root, edits []change.File) {
	t.Helper()
	for _, e := range edits {
		p, err := r.Path(e.Path)
		require.NoError(t, err)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, e.New, 0o644))
	}
}

func content(t *testing.T, r *host.Root, p string) string {
	t.Helper()
	b, err := r.ReadFile(p)
	require.NoError(t, err)
	return string(b)
}

// Edit leaves the kubelet with the wanted labels over all its flag
// sources: the key leaves every --node-labels, set goes last.
func TestEditEffective(t *testing.T) {
	set := []Label{{Key: wl, Value: "container"}}
	for _, c := range []struct {
		name  string
		files map[string]string
		want  map[string]string // file: content after
	}{
		{"repeated flags: every occurrence of the key", map[string]string{
			"/etc/default/kubelet": `KUBELET_EXTRA_ARGS="--node-labels=` + wl + `=vm-vgpu --node-labels ` + wl + `=vm-passthrough"` + "\n",
		}, map[string]string{"/etc/default/kubelet": `KUBELET_EXTRA_ARGS="--node-labels ` + wl + `=container"` + "\n"}},
		{"repeated flags, other labels kept", map[string]string{
			"/etc/default/kubelet": `KUBELET_EXTRA_ARGS="--node-labels=a=b --node-labels=` + wl + `=vm-vgpu,c=d --v=2"` + "\n",
		}, map[string]string{"/etc/default/kubelet": `KUBELET_EXTRA_ARGS="--node-labels=a=b --node-labels=` + wl + `=container,c=d --v=2"` + "\n"}},
		{"the key only in the first flag", map[string]string{
			"/etc/default/kubelet": `KUBELET_EXTRA_ARGS="--node-labels=` + wl + `=vm-vgpu,a=b --node-labels=c=d"` + "\n",
		}, map[string]string{"/etc/default/kubelet": `KUBELET_EXTRA_ARGS="--node-labels=a=b --node-labels=c=d,` + wl + `=container"` + "\n"}},
		{"stale labels in kubeadm-flags.env", map[string]string{
			"/var/lib/kubelet/kubeadm-flags.env": `KUBELET_KUBEADM_ARGS="--container-runtime-endpoint=unix:///run/containerd/containerd.sock --node-labels=` + wl + `=vm-vgpu,` + vcfg + `=A10-8Q,zone=r1"` + "\n",
		}, map[string]string{
			"/var/lib/kubelet/kubeadm-flags.env": `KUBELET_KUBEADM_ARGS="--container-runtime-endpoint=unix:///run/containerd/containerd.sock --node-labels=zone=r1"` + "\n",
			"/etc/default/kubelet":               `KUBELET_EXTRA_ARGS="--node-labels=` + wl + `=container"` + "\n",
		}},
	} {
		r := rootWith(t, c.files)
		edits, err := Edit(r, "/etc/default/kubelet", set, []string{vcfg})
		require.NoError(t, err, c.name)
		require.Len(t, edits, len(c.want), c.name)
		apply(t, r, edits)
		for f, want := range c.want {
			require.Equal(t, want, content(t, r, f), c.name)
		}
		eff := Read(r).Effective()
		require.Equal(t, "container", eff[wl].Value, c.name)
		require.NotContains(t, eff, vcfg, c.name)
		again, err := Edit(r, "/etc/default/kubelet", set, []string{vcfg})
		require.NoError(t, err, c.name)
		require.Empty(t, again, "%s: a second run changes nothing", c.name)
	}
}

func TestEditRefuses(t *testing.T) {
	set := []Label{{Key: wl, Value: "container"}}
	r := rootWith(t, map[string]string{
		"/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf": kubeadmDropIn,
		"/etc/systemd/system/kubelet.service.d/20-gpu.conf":         "[Service]\nExecStart=\nExecStart=/usr/bin/kubelet $KUBELET_EXTRA_ARGS --node-labels=" + wl + "=vm-vgpu\n",
	})
	_, err := Edit(r, "/etc/default/kubelet", set, nil)
	require.ErrorContains(t, err, "/etc/systemd/system/kubelet.service.d/20-gpu.conf:3: the kubelet would still register "+wl+"=vm-vgpu from here (on ExecStart)")

	r = rootWith(t, map[string]string{"/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf": kubeadmDropIn})
	_, err = Edit(r, "/etc/sysconfig/kubelet", set, nil)
	require.ErrorContains(t, err, "does not read /etc/sysconfig/kubelet")

	r = rootWith(t, map[string]string{"/var/lib/kubelet/kubeadm-flags.env": "KUBELET_KUBEADM_ARGS=\"$X --node-labels=" + wl + "=vm-vgpu\"\n"})
	_, err = Edit(r, "/etc/default/kubelet", set, nil)
	require.ErrorContains(t, err, "/var/lib/kubelet/kubeadm-flags.env:1: KUBELET_KUBEADM_ARGS refers to variables")
	// a value gpuprep cannot edit that does not hold the keys is left alone
	r = rootWith(t, map[string]string{"/var/lib/kubelet/kubeadm-flags.env": "KUBELET_KUBEADM_ARGS=\"$X --node-labels=zone=r1\"\n"})
	edits, err := Edit(r, "/etc/default/kubelet", set, nil)
	require.NoError(t, err)
	require.Len(t, edits, 1)
	require.Equal(t, "/etc/default/kubelet", edits[0].Path)
}
