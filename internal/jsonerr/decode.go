package jsonerr

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
)

// Rules say what Decode takes beyond what it always requires.
type Rules uint8

const (
	// Numbers keeps a number decoded into an any as a json.Number, its
	// digits exact, rather than a float64.
	Numbers Rules = 1 << iota
	// KnownFields refuses a key that names no field of the struct it
	// would be decoded into, rather than skip it.
	KnownFields
)

// Decode reads b into v as every route of node and router reads a JSON
// body: b holds exactly one JSON value, with nothing after it but white
// space, and no object in it names a key twice. A key is named twice when
// two keys are equal once decoded ("a" and "\u0061"), and, where the
// object is decoded into a struct, when both name the same field
// ("to" and "TO"): encoding/json keeps the last of either, so a body read
// twice — by a proxy's rule, then by the server — could be read two ways.
//
// The error says what is wrong, and what to send instead, in the body's
// own terms (Describe's), naming the key or the byte; the caller wraps it
// in its bad-request error. v may have been written to when Decode fails.
func Decode(b []byte, v any, rules Rules) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	if rules&Numbers != 0 {
		dec.UseNumber()
	}
	if rules&KnownFields != 0 {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		return errors.New(Describe(err, v))
	}
	end := int(dec.InputOffset())
	if at := skipSpace(b, end); at < len(b) {
		return fmt.Errorf("the body goes on after its JSON value, at byte %d: send one JSON value, with nothing after it", at)
	}
	if d := FirstDuplicate(b[:end], reflect.TypeOf(v)); d != nil {
		return d
	}
	return nil
}

// Duplicate is a key named twice in one object of a body.
type Duplicate struct {
	// Key is the second key as the body spells it, decoded.
	Key string
	// Path leads from the body to the object holding it: keys, and
	// [i] for an array's elements; empty for the body's own keys.
	Path []string
	// Offset is the byte the second key starts at.
	Offset int
}

func (d *Duplicate) Error() string {
	where := "the body"
	if len(d.Path) > 0 {
		var b strings.Builder
		for i, seg := range d.Path {
			if i > 0 && !strings.HasPrefix(seg, "[") {
				b.WriteByte('.')
			}
			b.WriteString(cut(seg))
		}
		where = `"` + b.String() + `"`
	}
	return fmt.Sprintf("key %q appears twice in %s (again at byte %d): send each key of an object once", cut(d.Key), where, d.Offset)
}

// cut shortens a key a message names: it may be anything a client sent.
func cut(s string) string {
	if len(s) > 72 {
		return strings.ToValidUTF8(s[:64], "") + "…"
	}
	return s
}

// FirstDuplicate is the first key b names twice in one object, or nil.
// b must be valid JSON (Decode has checked it): FirstDuplicate does not
// check it again. t is the Go type b is decoded into (nil or an
// interface: keys are equal when their decoded strings are); where it
// leads to a struct, keys naming the same field are equal too.
func FirstDuplicate(b []byte, t reflect.Type) *Duplicate {
	w := walker{b: b}
	w.i = skipSpace(b, 0)
	return w.value(t)
}

// walker walks one valid JSON value.
type walker struct {
	b []byte
	i int
}

// value walks the value at w.i, which decodes into t, and leaves w.i
// just past it.
func (w *walker) value(t reflect.Type) *Duplicate {
	t = decodesAs(t)
	switch w.b[w.i] {
	case '{':
		return w.object(t)
	case '[':
		return w.array(t)
	case '"':
		w.skipString()
	default: // a number, true, false or null
		for w.i < len(w.b) && !strings.ContainsRune(",]} \t\r\n", rune(w.b[w.i])) {
			w.i++
		}
	}
	return nil
}

// object walks an object at w.i, which decodes into t.
func (w *walker) object(t reflect.Type) *Duplicate {
	isStruct := t != nil && t.Kind() == reflect.Struct
	var fields []field
	if isStruct {
		fields = fieldsFor(t)
	}
	var seen keySet
	w.i = skipSpace(w.b, w.i+1)
	if w.b[w.i] == '}' {
		w.i++
		return nil
	}
	for {
		at := w.i
		key := w.key()
		w.i = skipSpace(w.b, w.i)
		w.i = skipSpace(w.b, w.i+1) // the colon
		// A key is told from a field by its first byte: "k" or "f".
		var inner reflect.Type
		id := "k" + key
		switch {
		case isStruct:
			if f := match(fields, key); f != nil {
				id, inner = "f"+f.name, f.typ
			}
		case t != nil && t.Kind() == reflect.Map:
			inner = t.Elem()
		}
		if !seen.add(id) {
			return &Duplicate{Key: key, Offset: at}
		}
		if d := w.value(inner); d != nil {
			d.Path = append([]string{key}, d.Path...)
			return d
		}
		w.i = skipSpace(w.b, w.i)
		c := w.b[w.i]
		w.i = skipSpace(w.b, w.i+1)
		if c == '}' {
			return nil
		}
	}
}

// array walks an array at w.i, whose elements decode into t's.
func (w *walker) array(t reflect.Type) *Duplicate {
	var elem reflect.Type
	if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
		elem = t.Elem()
	}
	w.i = skipSpace(w.b, w.i+1)
	if w.b[w.i] == ']' {
		w.i++
		return nil
	}
	for n := 0; ; n++ {
		if d := w.value(elem); d != nil {
			d.Path = append([]string{fmt.Sprintf("[%d]", n)}, d.Path...)
			return d
		}
		w.i = skipSpace(w.b, w.i)
		c := w.b[w.i]
		w.i = skipSpace(w.b, w.i+1)
		if c == ']' {
			return nil
		}
	}
}

// key reads the string at w.i, decoded as encoding/json decodes it:
// escapes read, a byte of no UTF-8 character read as U+FFFD.
func (w *walker) key() string {
	start := w.i
	plain := w.skipString()
	raw := w.b[start:w.i]
	if plain {
		return string(raw[1 : len(raw)-1])
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return string(raw) // not reached for valid JSON
	}
	return s
}

// skipString moves w.i past the string at w.i; plain says it holds
// no escape and no byte past ASCII.
func (w *walker) skipString() (plain bool) {
	plain = true
	for w.i++; w.i < len(w.b); w.i++ {
		switch c := w.b[w.i]; {
		case c == '\\':
			plain = false
			w.i++
		case c == '"':
			w.i++
			return plain
		case c >= 0x80:
			plain = false
		}
	}
	return plain
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// keySet is the keys of one object seen so far: a list while it is
// short, a map past that.
type keySet struct {
	list []string
	m    map[string]struct{}
}

// add notes k, and says false if it was there already.
func (s *keySet) add(k string) bool {
	if s.m != nil {
		if _, ok := s.m[k]; ok {
			return false
		}
		s.m[k] = struct{}{}
		return true
	}
	for _, have := range s.list {
		if have == k {
			return false
		}
	}
	s.list = append(s.list, k)
	if len(s.list) > 16 {
		s.m = make(map[string]struct{}, 2*len(s.list))
		for _, have := range s.list {
			s.m[have] = struct{}{}
		}
		s.list = nil
	}
	return true
}
