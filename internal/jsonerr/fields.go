package jsonerr

import (
	"encoding/json"
	"reflect"
	"strings"
	"sync"
)

// field is one key a struct takes, as encoding/json decodes into it.
type field struct {
	name string
	typ  reflect.Type
}

// fieldCache holds each struct type's fields: reflect.Type → []field.
var fieldCache sync.Map

// fieldsFor is the keys t (a struct) takes, in encoding/json's order,
// an embedded struct's fields among its outer's.
func fieldsFor(t reflect.Type) []field {
	if f, ok := fieldCache.Load(t); ok {
		return f.([]field)
	}
	var all []candidate
	collect(t, 0, nil, &all)
	fs := dominant(all)
	fieldCache.Store(t, fs)
	return fs
}

// candidate is a field found at some depth of embedding.
type candidate struct {
	field
	depth  int
	tagged bool
}

// collect appends t's fields, and those of the structs it embeds with
// no name, in field order; path holds the structs being walked, so a
// struct embedding itself through a pointer ends.
func collect(t reflect.Type, depth int, path []reflect.Type, out *[]candidate) {
	for _, p := range path {
		if p == t {
			return
		}
	}
	path = append(path, t)
	for i := range t.NumField() {
		sf := t.Field(i)
		if sf.Anonymous {
			et := sf.Type
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if !sf.IsExported() && et.Kind() != reflect.Struct {
				continue
			}
		} else if !sf.IsExported() {
			continue
		}
		tag := sf.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		ft := sf.Type
		if ft.Name() == "" && ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if name == "" && sf.Anonymous && ft.Kind() == reflect.Struct {
			collect(ft, depth+1, path, out)
			continue
		}
		c := candidate{field: field{name: name, typ: sf.Type}, depth: depth, tagged: name != ""}
		if name == "" {
			c.name = sf.Name
		}
		*out = append(*out, c)
	}
}

// dominant keeps, of the fields sharing a name, the one encoding/json
// decodes into: the least deep, or of several as deep the one tagged
// with the name; none when that leaves more than one.
func dominant(all []candidate) []field {
	var out []field
	for i, c := range all {
		keep := true
		for j, o := range all {
			if j == i || o.name != c.name {
				continue
			}
			if o.depth < c.depth || o.depth == c.depth && (o.tagged == c.tagged || o.tagged) {
				keep = false
				break
			}
		}
		if keep {
			out = append(out, c.field)
		}
	}
	if out == nil {
		out = []field{}
	}
	return out
}

// match is the field key is decoded into: the one it names exactly,
// else the first it names but for case (as bytes.EqualFold has it,
// encoding/json's rule); nil for none.
func match(fields []field, key string) *field {
	for i := range fields {
		if fields[i].name == key {
			return &fields[i]
		}
	}
	for i := range fields {
		if strings.EqualFold(fields[i].name, key) {
			return &fields[i]
		}
	}
	return nil
}

var unmarshaler = reflect.TypeFor[json.Unmarshaler]()

// decodesAs is the type whose keys a value decoded into t is read by:
// t with its pointers taken off, or nil where encoding/json does not
// decide (an interface) or t decodes itself (json.Unmarshaler), whose
// keys are told apart by their decoded strings alone.
func decodesAs(t reflect.Type) reflect.Type {
	for t != nil {
		if t.Implements(unmarshaler) || t.Kind() != reflect.Pointer && reflect.PointerTo(t).Implements(unmarshaler) {
			return nil
		}
		if t.Kind() != reflect.Pointer {
			break
		}
		t = t.Elem()
	}
	if t != nil && t.Kind() == reflect.Interface {
		return nil
	}
	return t
}
