package kube

import (
	"strings"

	"github.com/gpuprep/gpuprep/internal/host"
)

// KubeletEnvFile is the kubelet environment file the distribution's kubelet
// package reads: an existing /etc/default/kubelet or /etc/sysconfig/kubelet,
// else the one of the OS family.
func KubeletEnvFile(root *host.Root) string {
	for _, f := range []string{"/etc/default/kubelet", "/etc/sysconfig/kubelet"} {
		if root.Exists(f) {
			return f
		}
	}
	osr, _ := root.ReadFile("/etc/os-release")
	for _, l := range strings.Split(string(osr), "\n") {
		if strings.HasPrefix(l, "ID=") || strings.HasPrefix(l, "ID_LIKE=") {
			v := strings.ToLower(l)
			for _, fam := range []string{"rhel", "fedora", "centos", "rocky", "almalinux", "ol", "amzn", "suse", "sles"} {
				for _, w := range strings.Fields(strings.Trim(v[strings.IndexByte(v, '=')+1:], `"'`)) {
					if w == fam {
						return "/etc/sysconfig/kubelet"
					}
				}
			}
		}
	}
	return "/etc/default/kubelet"
}
