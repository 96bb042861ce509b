package deviceplugin

import (
	"slices"
	"strings"
)

// Unadvertised returns the names, in order, that no node advertises (nodes:
// each node's allocatable resource names).
func Unadvertised(names []string, nodes map[string][]string) []string {
	var out []string
	for _, n := range names {
		found := false
		for _, rs := range nodes {
			if slices.Contains(rs, n) {
				found = true
				break
			}
		}
		if !found {
			out = append(out, n)
		}
	}
	return out
}

// Advertised returns the distinct resource names under nvidia.com/ that the
// nodes advertise, sorted.
func Advertised(nodes map[string][]string) []string {
	var out []string
	for _, rs := range nodes {
		for _, r := range rs {
			if strings.HasPrefix(r, Namespace+"/") && !slices.Contains(out, r) {
				out = append(out, r)
			}
		}
	}
	slices.Sort(out)
	return out
}
