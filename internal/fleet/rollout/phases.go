package rollout

import (
	"fmt"

	"github.com/gpuprep/gpuprep/internal/fleet"
)

// CanaryPhase is the name of the first phase: every host in it must end
// ready before any other host starts.
const CanaryPhase = "canary"

// Phase is a group of hosts applied together.
type Phase struct {
	Name  string
	Hosts []*fleet.Host
}

// Phases splits hosts, in order, into the canary phase (the first canary
// hosts; none when canary is 0) and batches of batch hosts ("batch 1", …).
// batch must be at least 1.
func Phases(hosts []*fleet.Host, canary, batch int) []Phase {
	var out []Phase
	n := min(max(canary, 0), len(hosts))
	if n > 0 {
		out = append(out, Phase{Name: CanaryPhase, Hosts: hosts[:n]})
	}
	for i, b := n, 1; i < len(hosts); i, b = i+batch, b+1 {
		out = append(out, Phase{Name: fmt.Sprintf("batch %d", b), Hosts: hosts[i:min(i+batch, len(hosts))]})
	}
	return out
}
