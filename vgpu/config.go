package vgpu

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
	"sync"

	"gopkg.in/yaml.v3"
)

// Config is a vgpu-device-manager configuration file (version: v1), so that
// configs written for NVIDIA's vGPU Device Manager work unchanged.
type Config struct {
	Version     string                 `yaml:"version"`
	VGPUConfigs map[string][]DeviceSet `yaml:"vgpu-configs"`
	file        string
}

// DeviceSet is one entry of a named config: which GPUs, and how many vGPUs
// of each type to create on each of them.
type DeviceSet struct {
	Devices     Devices        `yaml:"devices"`
	VGPUDevices map[string]int `yaml:"vgpu-devices"`
	line        int
}

// Devices is "all" or a list of GPU indices (GPUs ordered by PCI address).
type Devices struct {
	All     bool
	Indices []int
	lines   []int // the line of each index
}

// UnmarshalYAML accepts `all` or a list of integers.
func (d *Devices) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		if n.Value == "all" {
			d.All = true
			return nil
		}
		return fmt.Errorf("line %d: devices: want all or a list of GPU indices, got %q", n.Line, n.Value)
	case yaml.SequenceNode:
		if err := n.Decode(&d.Indices); err != nil {
			return err
		}
		for _, e := range n.Content {
			d.lines = append(d.lines, e.Line)
		}
		return nil
	}
	return fmt.Errorf("line %d: devices: want all or a list of GPU indices", n.Line)
}

// LoadConfig reads and validates a config file strictly: unknown fields,
// a missing version, bad counts and empty configs are errors naming the file
// and line.
func LoadConfig(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseConfig(path, b)
}

// ParseConfig parses config text; file names it in errors.
func ParseConfig(file string, b []byte) (*Config, error) {
	var c Config
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		return nil, yamlError(file, err)
	}
	c.file = file
	var root yaml.Node
	_ = yaml.Unmarshal(b, &root)
	if c.Version != "v1" {
		return nil, fmt.Errorf("%s: version %q: want v1", file, c.Version)
	}
	if len(c.VGPUConfigs) == 0 {
		return nil, fmt.Errorf("%s: vgpu-configs: no configuration", file)
	}
	lines := setLines(&root)
	for name, sets := range c.VGPUConfigs {
		for i := range sets {
			sets[i].line = lines[name][i]
			s := sets[i]
			if len(s.VGPUDevices) == 0 {
				return nil, fmt.Errorf("%s:%d: vgpu-configs.%s[%d]: vgpu-devices is empty", file, s.line, name, i)
			}
			for t, n := range s.VGPUDevices {
				if n < 0 {
					return nil, fmt.Errorf("%s:%d: vgpu-configs.%s[%d]: %q: count %d is negative", file, s.line, name, i, t, n)
				}
				if n > maxVGPUCount {
					return nil, fmt.Errorf("%s:%d: vgpu-configs.%s[%d]: %q: count %d: at most %d vGPUs of a type per GPU", file, s.line, name, i, t, n, maxVGPUCount)
				}
			}
			if !s.Devices.All && len(s.Devices.Indices) == 0 {
				return nil, fmt.Errorf("%s:%d: vgpu-configs.%s[%d]: devices: want all or a list of GPU indices", file, s.line, name, i)
			}
		}
		if err := checkOverlap(file, name, sets); err != nil {
			return nil, err
		}
	}
	return &c, nil
}

// setLines finds the line of each device set, by config name.
func setLines(root *yaml.Node) map[string][]int {
	out := map[string][]int{}
	if root == nil || len(root.Content) == 0 {
		return out
	}
	doc := root.Content[0]
	for i := 0; i+1 < len(doc.Content); i += 2 {
		if doc.Content[i].Value != "vgpu-configs" {
			continue
		}
		cfgs := doc.Content[i+1]
		for j := 0; j+1 < len(cfgs.Content); j += 2 {
			for _, set := range cfgs.Content[j+1].Content {
				out[cfgs.Content[j].Value] = append(out[cfgs.Content[j].Value], set.Line)
			}
		}
	}
	return out
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

// TypeMatches reports whether a config's type name ("A10-12Q") names the
// type a GPU reports ("NVIDIA A10-12Q", "GRID T4-1Q"): vgpu-device-manager
// configs leave out the "NVIDIA " / "GRID " prefix.
func TypeMatches(configName, typeName string) bool {
	if configName == typeName {
		return true
	}
	for _, p := range []string{"NVIDIA ", "GRID "} {
		if strings.TrimPrefix(typeName, p) == configName {
			return true
		}
	}
	return false
}

var yamlLineRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(?:yaml: )?line (\d+): (.*)$`) })

// yamlError rewrites yaml's "line N: msg" errors as "file:N: msg", one per line.
func yamlError(file string, err error) error {
	msgs := []string{err.Error()}
	var te *yaml.TypeError
	if errors.As(err, &te) {
		msgs = te.Errors
	}
	for i, m := range msgs {
		m = strings.ReplaceAll(m, " in type vgpu.DeviceSet", "")
		if g := yamlLineRe().FindStringSubmatch(m); g != nil {
			msgs[i] = file + ":" + g[1] + ": " + g[2]
		} else {
			msgs[i] = file + ": " + strings.TrimPrefix(m, "yaml: ")
		}
	}
	return errors.New(strings.Join(msgs, "\n"))
}

// Wants turns the device sets of one config into what each GPU should have.
// gpus are the selected GPUs' addresses ordered by address: the order the
// config's device indices refer to.
func Wants(file, name string, sets []DeviceSet, gpus []string) ([]Want, error) {
	var wants []Want
	for _, s := range sets {
		targets := gpus
		if !s.Devices.All {
			targets = nil
			for _, i := range s.Devices.Indices {
				if i < 0 || i >= len(gpus) {
					return nil, fmt.Errorf("%s: config %q names GPU index %d; this host has %d selected GPU(s)", file, name, i, len(gpus))
				}
				targets = append(targets, gpus[i])
			}
		}
		types := make([]string, 0, len(s.VGPUDevices))
		for t := range s.VGPUDevices {
			types = append(types, t)
		}
		sort.Strings(types)
		for _, g := range targets {
			for _, t := range types {
				wants = append(wants, Want{GPU: g, Type: t, Count: s.VGPUDevices[t]})
			}
		}
	}
	return wants, nil
}
