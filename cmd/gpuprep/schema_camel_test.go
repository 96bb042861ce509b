package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSchemaPropertiesAreCamelCase: one casing in every -o json document
// (issue #21: vgpu types printed ID/Name/Available where every other report
// used camelCase). Every property every schema in docs/schema names is
// lowerCamelCase; keys the data chooses (modes, check IDs) are
// additionalProperties/patternProperties, not properties, and not held to it.
func TestSchemaPropertiesAreCamelCase(t *testing.T) {
	camel := regexp.MustCompile(`^[a-z][a-zA-Z0-9]*$`)
	files, err := filepath.Glob("../../docs/schema/*.json")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	n := 0
	var walk func(file string, v any)
	walk = func(file string, v any) {
		switch v := v.(type) {
		case map[string]any:
			if props, ok := v["properties"].(map[string]any); ok {
				for k := range props {
					n++
					require.Regexp(t, camel, k, "%s: property %q is not camelCase", filepath.Base(file), k)
				}
			}
			for _, c := range v {
				walk(file, c)
			}
		case []any:
			for _, c := range v {
				walk(file, c)
			}
		}
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		var doc any
		require.NoError(t, json.Unmarshal(b, &doc), f)
		walk(f, doc)
	}
	require.Greater(t, n, 100, "the schemas lost their properties")
}
