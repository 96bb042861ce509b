package provision

import (
	"slices"
	"testing"

	"github.com/gpuprep/gpuprep/preflight"
)

// The steps a check says change it (preflight.Check.ChangedBy, which a plan
// reads to tell which fails stay after apply) are steps a plan has: a
// renamed step would otherwise leave its checks' fails unaddressed.
func TestChecksChangedByRealSteps(t *testing.T) {
	for _, c := range preflight.All() {
		for _, s := range c.ChangedBy {
			if !slices.Contains(Steps, s) {
				t.Errorf("%s: changed by %q, which is not a step ID (provision.Steps: %v)", c.ID, s, Steps)
			}
		}
	}
}
