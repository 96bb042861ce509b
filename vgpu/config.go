package vgpu

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"
	"sync"

	"gopkg.in/yaml.v3"

	"github.com/gpuprep/gpuprep/internal/yamlpos"
)

// Config is a vgpu-device-manager configuration file (version: v1), read as
// vgpu-device-manager's own api/spec/v1 reads it (NVIDIA/vgpu-device-manager,
// api/spec/v1/spec.go at acb72704): so that the configs written for it, and
// the one the GPU Operator ships, work unchanged.
type Config struct {
	Version     string
	VGPUConfigs map[string][]DeviceSet
	file        string
}

// DeviceSet is one entry of a named config: which GPUs (a device filter and
// device indices), and how many vGPUs of each type each of them gets.
type DeviceSet struct {
	Filter      DeviceFilter
	Devices     Devices
	VGPUDevices map[string]int // empty: the GPU gets none (it is cleared)
	line        int
	name        string // the named config it is in
	index       int    // its place in that config
}

// maxConfigSize bounds a config file: the GPU Operator's own (every type of
// every board, 3,000 lines) is 80 KB.
const maxConfigSize = 4 << 20

// LoadConfig reads and validates a config file strictly: what
// vgpu-device-manager refuses is an error naming the file and line.
func LoadConfig(path string) (*Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxConfigSize+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxConfigSize {
		return nil, fmt.Errorf("%s: larger than %d MiB: not a vgpu-device-manager config", path, maxConfigSize>>20)
	}
	return ParseConfig(path, b)
}

// ParseConfig parses config text; file names it in errors. It accepts what
// Spec.UnmarshalJSON and VGPUConfigSpec.UnmarshalJSON accept and refuses
// what they refuse: a missing or other version, an unknown field, no
// configs, a config with no device set, a device set without devices or
// vgpu-devices; and in vgpu-devices what VGPUConfig.AssertValid refuses.
// It is stricter in one way: a key given twice in one mapping is an error
// here, where vgpu-device-manager silently keeps the last one.
func ParseConfig(file string, b []byte) (*Config, error) {
	var root yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader(b)).Decode(&root); err != nil && !errors.Is(err, io.EOF) {
		return nil, syntaxError(file, b, err)
	}
	c := &Config{file: file}
	if err := c.decode(&root); err != nil {
		return nil, yamlError(file, err)
	}
	if c.Version == "" {
		return nil, fmt.Errorf("%s: no version: want version: v1", file)
	}
	if len(c.VGPUConfigs) == 0 {
		return nil, fmt.Errorf("%s: vgpu-configs: no configuration", file)
	}
	return c, nil
}

// decode reads the document node: version and vgpu-configs, nothing else.
func (c *Config) decode(root *yaml.Node) error {
	if root.Kind == 0 || len(root.Content) == 0 {
		return nil // an empty file: no version, no config
	}
	doc := root.Content[0]
	if doc.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: want a mapping with version and vgpu-configs", doc.Line)
	}
	return eachKey(doc, func(k, v *yaml.Node) error {
		switch k.Value {
		case "version":
			if v.Kind != yaml.ScalarNode || v.Value != "v1" {
				return fmt.Errorf("line %d: version %q: want v1", v.Line, v.Value)
			}
			c.Version = v.Value
			return nil
		case "vgpu-configs":
			return c.decodeConfigs(v)
		}
		return fmt.Errorf("line %d: field %s not found (a config has version and vgpu-configs)", k.Line, k.Value)
	})
}

// decodeConfigs reads vgpu-configs: each name and its device sets.
func (c *Config) decodeConfigs(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: vgpu-configs: want a mapping of config names to device sets", n.Line)
	}
	c.VGPUConfigs = map[string][]DeviceSet{}
	err := eachKey(n, func(k, v *yaml.Node) error {
		if v.Kind != yaml.SequenceNode || len(v.Content) == 0 {
			return fmt.Errorf("line %d: vgpu-configs.%s: no device set (want a list of them)", k.Line, k.Value)
		}
		sets := make([]DeviceSet, len(v.Content))
		for i, e := range v.Content {
			sets[i] = DeviceSet{name: k.Value, index: i}
			if err := sets[i].decode(e); err != nil {
				return err
			}
		}
		c.VGPUConfigs[k.Value] = sets
		return nil
	})
	if err == nil && len(c.VGPUConfigs) == 0 {
		return fmt.Errorf("line %d: vgpu-configs: no configuration", n.Line)
	}
	return err
}

// decode reads one device set: device-filter (optional), devices and
// vgpu-devices (both required).
func (s *DeviceSet) decode(n *yaml.Node) error {
	s.line = n.Line
	where := fmt.Sprintf("vgpu-configs.%s[%d]", s.name, s.index)
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: %s: want a mapping with devices and vgpu-devices", n.Line, where)
	}
	seen := map[string]bool{}
	err := eachKey(n, func(k, v *yaml.Node) error {
		seen[k.Value] = true
		var err error
		switch k.Value {
		case "device-filter":
			err = s.Filter.decode(v)
		case "devices":
			err = s.Devices.decode(v)
		case "vgpu-devices":
			s.VGPUDevices, err = decodeVGPUDevices(v)
		default:
			return fmt.Errorf("line %d: %s: field %s not found (a device set has device-filter, devices and vgpu-devices)", k.Line, where, k.Value)
		}
		if err != nil {
			return fieldError(v.Line, where+"."+k.Value, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, r := range []string{"devices", "vgpu-devices"} {
		if !seen[r] {
			return fmt.Errorf("line %d: %s: missing required field %s", n.Line, where, r)
		}
	}
	return nil
}

// eachKey calls f for each key of a mapping, refusing a key given twice and
// a key that is not a plain string.
func eachKey(n *yaml.Node, f func(k, v *yaml.Node) error) error {
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		if k.Kind != yaml.ScalarNode {
			return fmt.Errorf("line %d: a key must be a plain string", k.Line)
		}
		if first, dup := seen[k.Value]; dup {
			return fmt.Errorf("line %d: %s is given twice (first on line %d)", k.Line, k.Value, first)
		}
		seen[k.Value] = k.Line
		if err := f(k, n.Content[i+1]); err != nil {
			return err
		}
	}
	return nil
}

// Select returns the named config, or an error listing the ones there are.
func (c *Config) Select(name string) ([]DeviceSet, error) {
	if s, ok := c.VGPUConfigs[name]; ok {
		return s, nil
	}
	names := make([]string, 0, len(c.VGPUConfigs))
	for n := range c.VGPUConfigs {
		names = append(names, n)
	}
	sort.Strings(names)
	return nil, fmt.Errorf("%s: no vgpu-config %q (have %s)", c.file, name, strings.Join(names, ", "))
}

var yamlLineRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(?:yaml: )?line (\d+): (.*)$`) })

// fieldError is err, about field (at line), at the line it names itself
// when it does ("line 7: …", an entry of a list), once.
func fieldError(line int, field string, err error) error {
	msg := err.Error()
	if g := yamlLineRe().FindStringSubmatch(msg); g != nil {
		return fmt.Errorf("line %s: %s: %s", g[1], field, g[2])
	}
	return fmt.Errorf("line %d: %s: %s", line, field, msg)
}

// syntaxError is a YAML syntax error at the line the parser stopped at
// (yamlpos: yaml.v3 names the line above the block it was reading).
func syntaxError(file string, b []byte, err error) error {
	ye := yamlpos.Locate(b, err)
	if ye.Line > 0 {
		return fmt.Errorf("%s:%d: not valid YAML: %s", file, ye.Line, ye.Msg)
	}
	return fmt.Errorf("%s: not valid YAML: %s", file, ye.Msg)
}

// yamlError rewrites yaml's "line N: msg" errors as "file:N: msg", one per line.
func yamlError(file string, err error) error {
	msgs := []string{err.Error()}
	var te *yaml.TypeError
	if errors.As(err, &te) {
		msgs = te.Errors
	}
	for i, m := range msgs {
		if g := yamlLineRe().FindStringSubmatch(m); g != nil {
			msgs[i] = file + ":" + g[1] + ": " + g[2]
		} else {
			msgs[i] = file + ": " + strings.TrimPrefix(m, "yaml: ")
		}
	}
	return errors.New(strings.Join(msgs, "\n"))
}
