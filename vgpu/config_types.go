package vgpu

import (
	"fmt"
	"regexp"
	"strings"
	"sync"

	"gopkg.in/yaml.v3"
)

// The vGPU type names a config may use, as vgpu-device-manager's
// pkg/types/vgpu_type.go (ParseVGPUType) defines them: time-sliced
// <gpu>-<GB><series> ("A10-12Q", "M60-0Q", "RTXPro6000-Blackwell-24Q") and
// MIG-backed <gpu>-<g>-<GB><series>[ME|NOME|MEALL|GFX] ("A100-1-5CME",
// "DC-1-24QGFX").
var (
	timeSlicedTypeRe = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^[A-Z0-9]+(-([a-zA-Z]+))*-(0|[1-9][0-9]*)(A|B|C|Q)$`)
	})
	migBackedTypeRe = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^[A-Z0-9]+-[1-9]-(0|[1-9][0-9]*)(A|B|C|Q)(ME|NOME|MEALL|GFX)?$`)
	})
)

// migBacked reports whether a valid type name is MIG-backed, and whether
// it is valid at all.
func parseTypeName(s string) (migBacked, ok bool) {
	if timeSlicedTypeRe().MatchString(s) {
		return false, true
	}
	if migBackedTypeRe().MatchString(s) {
		return true, true
	}
	return false, false
}

// decodeVGPUDevices reads vgpu-devices, a mapping of type names to counts,
// and validates it as types.VGPUConfig.AssertValid does: every name a type
// name, every count at least 1, and time-sliced and MIG-backed types not
// mixed on one GPU. An empty mapping is valid: the GPU gets no vGPUs.
func decodeVGPUDevices(n *yaml.Node) (map[string]int, error) {
	if n.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("want a mapping of vGPU type names to counts")
	}
	out := map[string]int{}
	var sliced, mig string
	err := eachKey(n, func(k, v *yaml.Node) error {
		isMIG, ok := parseTypeName(k.Value)
		if !ok {
			return fmt.Errorf("line %d: %q is not a vGPU type name (like A10-12Q or A100-1-5C; without the board's name)", k.Line, k.Value)
		}
		var count int
		if v.Kind != yaml.ScalarNode || v.Tag != "!!int" || v.Decode(&count) != nil {
			return fmt.Errorf("line %d: %s: count %q: want an integer", v.Line, k.Value, v.Value)
		}
		if count <= 0 {
			return fmt.Errorf("line %d: %s: count %d: want at least 1 (vgpu-device-manager refuses 0 and below; leave the type out instead)", v.Line, k.Value, count)
		}
		if count > maxVGPUCount {
			return fmt.Errorf("line %d: %s: count %d: at most %d vGPUs of a type per GPU", v.Line, k.Value, count, maxVGPUCount)
		}
		if isMIG {
			mig = k.Value
		} else {
			sliced = k.Value
		}
		if mig != "" && sliced != "" {
			return fmt.Errorf("line %d: %s and %s: time-sliced and MIG-backed vGPUs cannot be mixed on one GPU", k.Line, sliced, mig)
		}
		out[k.Value] = count
		return nil
	})
	return out, err
}

// migSuffixes are the MIG attribute suffixes vgpu-device-manager strips
// from a config's type name when the GPU offers no type of that exact name
// (pkg/vgpu/config.go, stripVGPUConfigSuffix: MEALL first, as it ends in ME).
var migSuffixes = []string{"MEALL", "NOME", "ME", "GFX"}

// TypeMatches reports whether a config's type name ("A10-12Q") names the
// type a GPU reports ("NVIDIA A10-12Q", "GRID T4-1Q", "NVIDIA RTX Pro 6000
// Blackwell DC-48C"): vgpu-device-manager compares it with the last word of
// the type's name (go-nvlib nvmdev, parseMdevTypeName), and then with the
// config's name less a MIG attribute suffix ("DC-1-24QGFX" names DC-1-24Q).
func TypeMatches(configName, typeName string) bool {
	if configName == "" {
		return false
	}
	last := typeName
	if f := strings.Fields(typeName); len(f) > 0 {
		last = f[len(f)-1]
	}
	if configName == last || configName == typeName {
		return true
	}
	for _, s := range migSuffixes {
		if base, ok := strings.CutSuffix(configName, s); ok {
			return base == last
		}
	}
	return false
}

// FindType returns the type among types that a config's type name names:
// the one whose name is exactly it before one it names less a MIG
// attribute suffix (vgpu-device-manager's SetVGPUConfig tries the name as
// written first); nil when none.
func FindType(types []Type, configName string) *Type {
	for i := range types {
		if f := strings.Fields(types[i].Name); len(f) > 0 && f[len(f)-1] == configName {
			return &types[i]
		}
	}
	for i := range types {
		if TypeMatches(configName, types[i].Name) {
			return &types[i]
		}
	}
	return nil
}
