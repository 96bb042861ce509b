package kube

import (
	"io"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/gpuprep/gpuprep/internal/sanitize"
)

// WriteYAML writes v (a KubeVirtPatch, OperatorValues) as one YAML
// document built by the encoder, with notes as comment lines before it:
// one line each (sanitize.Comment), so that no note, whatever host string
// it holds, can add a key of its own.
func WriteYAML(w io.Writer, v any, notes []string) error {
	var body yaml.Node
	if err := body.Encode(v); err != nil {
		return err
	}
	lines := make([]string, 0, len(notes))
	for _, n := range notes {
		if c := sanitize.Comment(n); c != "" {
			lines = append(lines, c)
		}
	}
	body.HeadComment = strings.Join(lines, "\n")
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(&yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{&body}}); err != nil {
		return err
	}
	return enc.Close()
}
