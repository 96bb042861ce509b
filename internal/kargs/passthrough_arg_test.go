package kargs

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Wanted as iommu.passthrough=1 (arm64), the argument is judged by itself,
// as drivers/iommu/iommu.c's iommu_set_def_domain_type reads it: kstrtobool
// values, the last readable one wins, and x86's iommu=pt does not count.
func TestPassthroughArgSatisfied(t *testing.T) {
	want := Param{Key: "iommu.passthrough", Value: "1", HasValue: true}
	for cmdline, ok := range map[string]bool{
		"iommu.passthrough=1":                       true,
		"iommu.passthrough=on":                      true,
		"iommu.passthrough=y":                       true,
		"iommu.passthrough=1 iommu.passthrough=0":   false,
		"iommu.passthrough=0 iommu.passthrough=1":   true,
		"iommu.passthrough=1 iommu.passthrough=bad": true, // the bad one is refused, the type stays
		"iommu=pt":                 false, // x86 only
		"iommu.passthrough":        false,
		"iommu-passthrough=1":      false, // a dot is not a dash
		"quiet iommu.passthrough=": false,
	} {
		require.Equal(t, ok, Satisfied(Parse(cmdline), want), cmdline)
	}
	p, found := Deciding(Parse("iommu.passthrough=1 iommu.passthrough=off iommu.passthrough=zz"), want)
	require.True(t, found)
	require.Equal(t, "iommu.passthrough=off", p.String())
}
