package main

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"strings"
	"time"
)

// schemaOf is the JSON Schema (draft 2020-12) of the JSON encoding/json
// writes for a value of type t: each struct an object of exactly its
// fields (additionalProperties false, so a renamed or unknown field fails),
// those without omitempty required; a nil pointer without omitempty is
// null. Struct types are $defs, named by type (package-qualified where two
// share a name). docs adds keywords to a field's schema, keyed
// "pkg.Type.Field"; kinds gives the types that are documents their
// apiVersion and kind as constants.
type schemaGen struct {
	defs  map[string]any
	names map[reflect.Type]string
	docs  map[string]map[string]any
	kinds map[reflect.Type]string
	enums map[reflect.Type][]string // a named string type's values
	// comments: per package directory, the doc comments of its types
	// ("Type") and struct fields ("Type.Field"): the descriptions
	comments map[string]map[string]string
}

var (
	timeType = reflect.TypeFor[time.Time]()
	rawType  = reflect.TypeFor[json.RawMessage]()
)

func newSchemaGen(docs map[string]map[string]any, kinds map[reflect.Type]string, enums map[reflect.Type][]string) *schemaGen {
	return &schemaGen{defs: map[string]any{}, names: map[reflect.Type]string{}, docs: docs, kinds: kinds, enums: enums, comments: map[string]map[string]string{}}
}

// documentSchema is a document's schema, its keywords in reading order.
type documentSchema struct {
	Schema               string         `json:"$schema"`
	Title                string         `json:"title"`
	Description          string         `json:"description"`
	Type                 string         `json:"type"`
	Required             any            `json:"required,omitempty"`
	Properties           any            `json:"properties"`
	AdditionalProperties bool           `json:"additionalProperties"`
	Defs                 map[string]any `json:"$defs,omitempty"`
}

// document is the schema of the document kind, of type t.
func (g *schemaGen) document(kind, about string, t reflect.Type) documentSchema {
	top := g.object(t)
	return documentSchema{Schema: "https://json-schema.org/draft/2020-12/schema", Title: kind, Description: about, Type: "object",
		Required: top["required"], Properties: top["properties"], Defs: g.defs}
}

func (g *schemaGen) schema(t reflect.Type) any {
	switch {
	case t == timeType:
		return map[string]any{"type": "string", "format": "date-time"}
	case t == rawType:
		return true // any JSON value (fleet run: what the command printed)
	}
	switch t.Kind() {
	case reflect.Pointer:
		return g.schema(t.Elem())
	case reflect.Struct:
		return map[string]any{"$ref": "#/$defs/" + g.def(t)}
	case reflect.Slice, reflect.Array:
		return map[string]any{"type": "array", "items": g.schema(t.Elem())}
	case reflect.Map:
		m := map[string]any{"type": "object", "additionalProperties": g.schema(t.Elem())}
		if vs, ok := g.enums[t.Key()]; ok {
			m["propertyNames"] = map[string]any{"enum": vs}
		}
		return m
	case reflect.String:
		if vs, ok := g.enums[t]; ok {
			return map[string]any{"type": "string", "enum": vs}
		}
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		// every number in gpuprep's documents is a count, a duration, a
		// port or an exit code: none is negative (none says "unknown"
		// with -1)
		return map[string]any{"type": "integer", "minimum": 0}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.Interface:
		return true
	}
	panic("schemaOf: no JSON schema for " + t.String())
}

// def names t's $defs entry, made on first use.
func (g *schemaGen) def(t reflect.Type) string {
	if n, ok := g.names[t]; ok {
		return n
	}
	n := t.Name()
	for u, m := range g.names {
		if m == n && u != t {
			n = strings.ReplaceAll(t.String(), ".", "_")
		}
	}
	if n == "" {
		n = "anonymous" + strings.Repeat("_", len(g.names))
	}
	g.names[t] = n
	g.defs[n] = nil // recursion: the name is taken
	g.defs[n] = g.object(t)
	return n
}

// object is the object schema of struct type t.
func (g *schemaGen) object(t reflect.Type) map[string]any {
	props := map[string]any{}
	required := []string{}
	g.fields(t, props, &required)
	if kind, ok := g.kinds[t]; ok {
		props["apiVersion"] = map[string]any{"const": "gpuprep/v1"}
		props["kind"] = map[string]any{"const": kind}
	}
	o := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		o["required"] = required
	}
	if d := g.comment(t, ""); d != "" {
		o["description"] = d
	}
	return o
}

// comment is the doc comment of t's field (t's own with field ""), as one
// line; "" where it has none.
func (g *schemaGen) comment(t reflect.Type, field string) string {
	dir := "."
	if p, ok := strings.CutPrefix(t.PkgPath(), "github.com/gpuprep/gpuprep/"); ok {
		dir = filepath.Join("..", "..", p)
	}
	if _, ok := g.comments[dir]; !ok {
		g.comments[dir] = parseComments(dir)
	}
	key := t.Name()
	if field != "" {
		key += "." + field
	}
	return g.comments[dir][key]
}

// parseComments reads the doc comments of the struct types and fields of
// the Go files in dir.
func parseComments(dir string) map[string]string {
	out := map[string]string{}
	// every Go file of dir, as parser.ParseDir (deprecated) read them
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		panic(err)
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, name := range names {
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		if err != nil {
			panic(err)
		}
		files = append(files, f)
	}
	text := func(gs ...*ast.CommentGroup) string {
		for _, g := range gs {
			if g != nil {
				return strings.Join(strings.Fields(g.Text()), " ")
			}
		}
		return ""
	}
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			gd, ok := n.(*ast.GenDecl)
			if !ok || gd.Tok != token.TYPE {
				return true
			}
			for _, sp := range gd.Specs {
				ts := sp.(*ast.TypeSpec)
				st, ok := ts.Type.(*ast.StructType)
				if !ok {
					continue
				}
				if d := text(ts.Doc, gd.Doc); d != "" {
					out[ts.Name.Name] = d
				}
				for _, fl := range st.Fields.List {
					for _, n := range fl.Names {
						if d := text(fl.Doc, fl.Comment); d != "" {
							out[ts.Name.Name+"."+n.Name] = d
						}
					}
				}
			}
			return true
		})
	}
	return out
}

// fields adds t's JSON fields to props (an embedded struct's promoted, as
// encoding/json promotes them).
func (g *schemaGen) fields(t reflect.Type, props map[string]any, required *[]string) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		ft := f.Type
		if f.Anonymous && name == "" {
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				g.fields(ft, props, required)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		omit := strings.Contains(","+opts+",", ",omitempty,") || strings.Contains(","+opts+",", ",omitzero,")
		s := g.schema(ft)
		extra := g.docs[t.String()+"."+f.Name]
		if !omit && (nullable(ft) || extra["nullable"] == true) {
			s = map[string]any{"anyOf": []any{s, map[string]any{"type": "null"}}}
		}
		if d := g.comment(t, f.Name); d != "" && extra["description"] == nil {
			extra = withDescription(extra, d)
		}
		if extra != nil {
			s = withKeywords(s, extra)
		}
		props[name] = s
		if !omit {
			*required = append(*required, name)
		}
	}
}

// nullable: encoding/json writes a nil value of t as null. A nil slice
// is null too, but gpuprep writes lists as lists ([] when empty): a field
// whose list can be null says so in docs ("nullable": true).
func nullable(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Interface:
		return true
	}
	return false
}

// withKeywords is s with extra's keywords, a null alternative kept apart.
func withKeywords(s any, extra map[string]any) any {
	m, ok := s.(map[string]any)
	if !ok {
		m = map[string]any{}
	}
	out := map[string]any{}
	for k, v := range m {
		out[k] = v
	}
	if alt, ok := out["anyOf"].([]any); ok {
		out["anyOf"] = []any{withKeywords(alt[0], extra), alt[1]}
		if d, ok := extra["description"]; ok {
			out["description"] = d
			inner := out["anyOf"].([]any)[0].(map[string]any)
			delete(inner, "description")
		}
		return out
	}
	for k, v := range extra {
		if k != "nullable" {
			out[k] = v
		}
	}
	return out
}

func withDescription(extra map[string]any, d string) map[string]any {
	out := map[string]any{"description": d}
	for k, v := range extra {
		out[k] = v
	}
	return out
}
