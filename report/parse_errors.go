package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
)

// what a saved report is, for errors about files that are not one
const wantReport = "a gpuprep report is the JSON that gpuprep check -o json or gpuprep fleet check -o json writes (apiVersion " +
	APIVersion + ", kind " + Kind + " or " + FleetKind + ")"

// notJSONObject says what a file that is no JSON object is instead, at the
// line where it stops being JSON.
func notJSONObject(name string, b []byte, err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Errorf("%s:%d: not a gpuprep report: not JSON (%s); %s", name, lineAt(b, se.Offset), se.Error(), wantReport)
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Errorf("%s: not a gpuprep report: the file is a JSON %s, not an object; %s", name, jsonWord(te.Value), wantReport)
	}
	return fmt.Errorf("%s: not a gpuprep report: %v; %s", name, err, wantReport)
}

// fieldError says which field of a report has the wrong kind of value, in
// JSON's words (a list, an object, a string), not Go's types.
func fieldError(name string, b []byte, err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return fmt.Errorf("%s:%d: %s: %s where a report has %s", name, lineAt(b, te.Offset), te.Field, aJSON(te.Value), goJSON(te.Type))
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Errorf("%s:%d: not JSON: %s", name, lineAt(b, se.Offset), se.Error())
	}
	return fmt.Errorf("%s: %v", name, err)
}

// missingFields refuses a report without the parts gpuprep always writes:
// a file with only apiVersion and kind is no report of anything.
func missingFields(name, kind string, b []byte, want ...string) error {
	var top map[string]json.RawMessage
	if json.Unmarshal(b, &top) != nil {
		return nil // Unmarshal into the report said why already
	}
	var missing []string
	for _, k := range want {
		if v, ok := top[k]; !ok || string(bytes.TrimSpace(v)) == "null" {
			missing = append(missing, k)
		}
	}
	switch len(missing) {
	case 0:
		return nil
	case 1:
		return fmt.Errorf("%s: a %s without %s: not a report gpuprep wrote (it always writes %s)", name, kind, missing[0], joinAnd(want))
	}
	return fmt.Errorf("%s: a %s without %s: not a report gpuprep wrote (it always writes %s)", name, kind, joinAnd(missing), joinAnd(want))
}

func joinAnd(s []string) string {
	switch len(s) {
	case 0:
		return ""
	case 1:
		return s[0]
	}
	out := s[0]
	for _, x := range s[1 : len(s)-1] {
		out += ", " + x
	}
	return out + " and " + s[len(s)-1]
}

// lineAt is the 1-based line of byte offset off in b.
func lineAt(b []byte, off int64) int {
	if off > int64(len(b)) {
		off = int64(len(b))
	}
	if off < 0 {
		off = 0
	}
	return bytes.Count(b[:off], []byte("\n")) + 1
}

// jsonWord names a JSON value kind as encoding/json reports it ("array",
// "number", "string", "bool", "object", "null").
func jsonWord(v string) string {
	switch v {
	case "array":
		return "list"
	case "bool":
		return "true or false"
	}
	return v
}

// aJSON is jsonWord with an article: "a list", "a number".
func aJSON(v string) string {
	w := jsonWord(v)
	switch {
	case w == "true or false" || w == "null":
		return w
	case w[0] == 'a' || w[0] == 'o':
		return "an " + w
	}
	return "a " + w
}

// goJSON says in JSON's words what a Go type decodes from.
func goJSON(t reflect.Type) string {
	if t == nil {
		return "another value"
	}
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Pointer:
		return goJSON(t.Elem())
	}
	return "another value"
}
