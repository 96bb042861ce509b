package kube

import (
	"fmt"
	"os"
	"strings"

	"k8s.io/client-go/tools/clientcmd"
)

// noKubeconfig says, for client-go's empty-configuration error ("no
// configuration has been provided, try setting KUBERNETES_MASTER
// environment variable": clientcmd's ErrEmptyConfig, whose hint names an
// environment variable client-go no longer reads), where gpuprep looked
// and how to give it a kubeconfig.
func noKubeconfig(rules *clientcmd.ClientConfigLoadingRules) error {
	looked := "$KUBECONFIG is not set"
	if v := os.Getenv(clientcmd.RecommendedConfigPathEnvVar); v != "" {
		looked = "$KUBECONFIG (" + v + ") names no readable file"
	}
	home := clientcmd.RecommendedHomeFile
	var missing []string
	for _, p := range rules.GetLoadingPrecedence() {
		if p == home {
			missing = append(missing, home)
		}
	}
	if len(missing) > 0 {
		looked += ", " + strings.Join(missing, ", ") + " does not exist"
	}
	return fmt.Errorf("no kubeconfig: no --kubeconfig given, %s, and this is not a pod with a service account; name one with --kubeconfig FILE or KUBECONFIG=FILE", looked)
}
