package jsonerr

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"time"
)

// Describe phrases err, which json.Unmarshal or a json.Decoder returned
// decoding a body into v, for the client that sent the body. v (a pointer
// to what was decoded into, or nil) names the fields the body may hold,
// for an unknown field's answer.
func Describe(err error, v any) string {
	var (
		syn *json.SyntaxError
		typ *json.UnmarshalTypeError
	)
	switch {
	case err == nil:
		return ""
	case errors.Is(err, io.EOF):
		return "the body is empty: send a JSON object"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "the body ends before its JSON does: a closing quote, bracket or brace is missing"
	case errors.As(err, &syn):
		return fmt.Sprintf("the body is not JSON: at byte %d, %s", syn.Offset, syn.Error())
	case errors.As(err, &typ):
		return describeType(typ, v)
	}
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		out := "unknown field " + name
		if fields := Fields(v); len(fields) > 0 {
			out += ": the body takes " + strings.Join(fields, ", ")
		}
		return out
	}
	if strings.Contains(msg, "Go ") || strings.Contains(msg, "interface {}") {
		// A message of encoding/json's this package does not know:
		// nothing of it is safe to pass on.
		return "the body is not the JSON this route takes"
	}
	return strings.TrimPrefix(msg, "json: ")
}

// describeType says which field holds a value of the wrong JSON type.
func describeType(e *json.UnmarshalTypeError, v any) string {
	var where string
	switch {
	case e.Field != "":
		where = `"` + jsonPath(reflect.TypeOf(v), e.Field) + `"`
	case v != nil && reflect.TypeOf(v).Kind() == reflect.Pointer && reflect.TypeOf(v).Elem() == e.Type:
		where = "the body"
	default:
		where = "a value in the body"
	}
	want := Kind(e.Type)
	if got, ok := strings.CutPrefix(e.Value, "number "); ok {
		// A number of the right type, out of its range (or a fraction
		// where a whole number goes).
		return fmt.Sprintf("%s must be %s, and %s is not one", where, want, got)
	}
	return fmt.Sprintf("%s must be %s, not %s", where, want, article(e.Value))
}

// jsonPath is encoding/json's path to a field (dotted, through the
// fields of t) as the body spells it: the Go names of embedded structs,
// which the body never holds, left out.
func jsonPath(t reflect.Type, path string) string {
	var out []string
	for _, seg := range strings.Split(path, ".") {
		for t != nil && (t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array || t.Kind() == reflect.Map) {
			t = t.Elem()
		}
		if t == nil || t.Kind() != reflect.Struct {
			out, t = append(out, seg), nil
			continue
		}
		f, ok := t.FieldByName(seg)
		if ok && f.Anonymous && f.Tag.Get("json") == "" {
			t = f.Type // an embedded struct: its fields are its outer's
			continue
		}
		out = append(out, seg)
		t = fieldByJSONName(t, seg)
	}
	return strings.Join(out, ".")
}

// fieldByJSONName is the type of t's field the body names name, or nil.
func fieldByJSONName(t reflect.Type, name string) reflect.Type {
	for f := range t.Fields() {
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == name || (tag == "" && strings.EqualFold(f.Name, name)) {
			return f.Type
		}
		if f.Anonymous && tag == "" {
			if ft := f.Type; ft.Kind() == reflect.Struct {
				if inner := fieldByJSONName(ft, name); inner != nil {
					return inner
				}
			}
		}
	}
	return nil
}

// Kind says what JSON value a Go type takes, as a client would ask for
// it: "a string", "a whole number", "an array", ...
func Kind(t reflect.Type) string {
	if t == nil {
		return "a JSON value"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t {
	case reflect.TypeFor[json.Number]():
		return "a number"
	case reflect.TypeFor[json.RawMessage]():
		return "a JSON value"
	case reflect.TypeFor[time.Time]():
		return "a time (RFC 3339, as a string)"
	case reflect.TypeFor[time.Duration]():
		return "a whole number"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return fmt.Sprintf("a whole number that fits in %d bits", t.Bits())
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return fmt.Sprintf("a whole number from 0 that fits in %d bits", t.Bits())
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "a JSON value"
}

// article puts "a" or "an" before a JSON type's name as encoding/json
// gives it (string, number, bool, array, object).
func article(v string) string {
	switch v {
	case "":
		return "that"
	case "bool":
		return "true or false"
	case "array", "object":
		return "an " + v
	}
	return "a " + v
}

// Fields are the names a JSON object decoded into v (a struct, or a
// pointer to one) may hold, in the struct's order; nil for anything else.
func Fields(v any) []string {
	if v == nil {
		return nil
	}
	return fieldsOf(reflect.TypeOf(v), nil)
}

// fieldsOf appends t's JSON field names to out; an embedded struct's
// fields are its outer struct's, as encoding/json decodes them.
func fieldsOf(t reflect.Type, out []string) []string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return out
	}
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case name == "-":
			continue
		case f.Anonymous && name == "":
			out = fieldsOf(f.Type, out)
			continue
		case !f.IsExported():
			continue
		case name == "":
			name = f.Name
		}
		out = append(out, `"`+name+`"`)
	}
	return out
}

// Marshal is json.Marshal with <, > and & written as they are rather
// than as \u003c, \u003e and \u0026: an answer is read by people and
// programs, never pasted into HTML, and a message about vector<3> should
// say vector<3>. Like json.Marshal it ends with no newline.
func Marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte{'\n'}), nil
}
