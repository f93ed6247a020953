package engine

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/fenec-go/fenec/engine/fql"
)

// typeKind is the kind of a field's declared type.
type typeKind uint8

const (
	tBool typeKind = iota + 1
	tInt
	tFloat
	tText
	tTimestamp
	tJSON
	tVector
	tListText
	tListInt
	tListFloat
)

// fieldType is a declared type; dim is the vector dimension for tVector.
type fieldType struct {
	kind typeKind
	dim  int
}

func (t fieldType) String() string {
	switch t.kind {
	case tBool:
		return "bool"
	case tInt:
		return "int"
	case tFloat:
		return "float"
	case tText:
		return "text"
	case tTimestamp:
		return "timestamp"
	case tJSON:
		return "json"
	case tVector:
		return fmt.Sprintf("vector<%d>", t.dim)
	case tListText:
		return "[text]"
	case tListInt:
		return "[int]"
	case tListFloat:
		return "[float]"
	}
	return "?"
}

// hnswSpec is an @hnsw annotation.
type hnswSpec struct {
	Metric         string // cosine, l2, dot
	M              int
	EfConstruction int
	EfSearch       int
}

// fieldSpec is one declared field of a collection with its annotations.
type fieldSpec struct {
	Name     string
	Type     fieldType
	Required bool

	Hash, Unique, Sorted bool
	TTLms                int64 // @ttl(d) in ms; 0 means none
	Text                 bool
	TextK1, TextB        float64
	HNSW                 *hnswSpec
}

// schema is a collection's declaration. Field positions are fixed for the
// collection's life: documents store their values by position.
type schema struct {
	Name   string
	Fields []fieldSpec
	pos    map[string]int
}

func newSchema(name string, fields []fieldSpec) (*schema, error) {
	s := &schema{Name: name, Fields: fields}
	if err := s.index(); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *schema) index() error {
	s.pos = make(map[string]int, len(s.Fields))
	for i, f := range s.Fields {
		if f.Name == "id" {
			return fmt.Errorf("%w: field id is implicit", ErrInvalid)
		}
		if _, dup := s.pos[f.Name]; dup {
			return fmt.Errorf("%w: field %s declared twice", ErrInvalid, f.Name)
		}
		if err := checkAnnotations(&s.Fields[i]); err != nil {
			return err
		}
		s.pos[f.Name] = i
	}
	return nil
}

// checkAnnotations refuses annotations that do not fit the field's type.
func checkAnnotations(f *fieldSpec) error {
	k := f.Type.kind
	if k < tBool || k > tListFloat {
		return fmt.Errorf("%w: field %s has no known type (kind %d)", ErrInvalid, f.Name, k)
	}
	if (f.Hash || f.Unique) && !hashableKind(k) {
		return fmt.Errorf("%w: @hash/@unique on %s field %s", ErrInvalid, f.Type, f.Name)
	}
	if f.Sorted && !orderedKind(k) {
		return fmt.Errorf("%w: @sorted on %s field %s", ErrInvalid, f.Type, f.Name)
	}
	if f.TTLms < 0 || (f.TTLms > 0 && k != tTimestamp) {
		return fmt.Errorf("%w: @ttl needs a timestamp field (%s is %s)", ErrInvalid, f.Name, f.Type)
	}
	if f.Text && k != tText {
		return fmt.Errorf("%w: @text needs a text field (%s is %s)", ErrInvalid, f.Name, f.Type)
	}
	if f.HNSW != nil {
		if k != tVector {
			return fmt.Errorf("%w: @hnsw needs a vector field (%s is %s)", ErrInvalid, f.Name, f.Type)
		}
		switch strings.ToLower(f.HNSW.Metric) {
		case "cosine", "l2", "dot":
		default:
			return fmt.Errorf("%w: @hnsw metric %q", ErrInvalid, f.HNSW.Metric)
		}
		if f.Type.dim > 0 {
			if err := hnswConfig(f).Validate(); err != nil {
				return fmt.Errorf("%w: @hnsw on %s: %v", ErrInvalid, f.Name, err)
			}
		}
	}
	if k == tVector && (f.Type.dim <= 0 || f.Type.dim > 65536) {
		return fmt.Errorf("%w: vector dimension %d", ErrInvalid, f.Type.dim)
	}
	return nil
}

func hashableKind(k typeKind) bool {
	switch k {
	case tBool, tInt, tFloat, tText, tTimestamp:
		return true
	}
	return false
}

func orderedKind(k typeKind) bool {
	switch k {
	case tInt, tFloat, tText, tTimestamp:
		return true
	}
	return false
}

// field returns the position of name, or -1.
// hasTTL reports whether a field of s has a TTL (documents past it are
// not seen).
func (s *schema) hasTTL() bool {
	for i := range s.Fields {
		if s.Fields[i].TTLms != 0 {
			return true
		}
	}
	return false
}

func (s *schema) field(name string) int {
	if i, ok := s.pos[name]; ok {
		return i
	}
	return -1
}

// checkValue converts v to the field's stored form or refuses it with
// ErrType naming the field.
func (f *fieldSpec) checkValue(v any) (any, error) {
	if v == nil {
		return nil, nil
	}
	bad := func() (any, error) {
		return nil, fmt.Errorf("%w: field %s wants %s, got %s", ErrType, f.Name, f.Type, fql.TypeName(v))
	}
	switch f.Type.kind {
	case tBool:
		if _, ok := v.(bool); ok {
			return v, nil
		}
	case tInt, tTimestamp:
		switch x := v.(type) {
		case int64:
			return x, nil
		case float64:
			if x == float64(int64(x)) && x >= -9.2e18 && x <= 9.2e18 {
				return int64(x), nil
			}
		}
	case tFloat:
		switch x := v.(type) {
		case int64:
			return float64(x), nil
		case float64:
			return x, nil
		}
	case tText:
		if s, ok := v.(string); ok {
			if !utf8.ValidString(s) {
				return nil, fmt.Errorf("%w: field %s holds invalid UTF-8", ErrType, f.Name)
			}
			return v, nil
		}
	case tJSON:
		if jsonValue(v, 0) {
			return v, nil
		}
	case tVector:
		vec, ok := toVector(v)
		if !ok {
			return bad()
		}
		if len(vec) != f.Type.dim {
			return nil, fmt.Errorf("%w: field %s wants a vector of %d, got %d", ErrType, f.Name, f.Type.dim, len(vec))
		}
		return vec, nil
	case tListText, tListInt, tListFloat:
		return f.checkList(v)
	}
	return bad()
}

func (f *fieldSpec) checkList(v any) (any, error) {
	l, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("%w: field %s wants %s, got %s", ErrType, f.Name, f.Type, fql.TypeName(v))
	}
	out := make([]any, len(l))
	for i, e := range l {
		var ok bool
		switch f.Type.kind {
		case tListText:
			var s string
			s, ok = e.(string)
			ok = ok && utf8.ValidString(s)
			out[i] = e
		case tListInt:
			switch x := e.(type) {
			case int64:
				out[i], ok = x, true
			case float64:
				if x == float64(int64(x)) {
					out[i], ok = int64(x), true
				}
			}
		case tListFloat:
			switch x := e.(type) {
			case int64:
				out[i], ok = float64(x), true
			case float64:
				out[i], ok = x, true
			}
		}
		if !ok {
			return nil, fmt.Errorf("%w: field %s wants %s, element %d is %s", ErrType, f.Name, f.Type, i, fql.TypeName(e))
		}
	}
	return out, nil
}

// toVector accepts a []float32 or a list of numbers.
func toVector(v any) ([]float32, bool) {
	switch x := v.(type) {
	case []float32:
		return x, true
	case []any:
		out := make([]float32, len(x))
		for i, e := range x {
			switch n := e.(type) {
			case int64:
				out[i] = float32(n)
			case float64:
				out[i] = float32(n)
			default:
				return nil, false
			}
		}
		return out, true
	}
	return nil, false
}

// jsonValue says whether v is made only of JSON-able values, at most 64 deep.
func jsonValue(v any, depth int) bool {
	if depth > 64 {
		return false
	}
	switch x := v.(type) {
	case nil, bool, int64, float64:
		return true
	case string:
		return utf8.ValidString(x)
	case []float32:
		return true
	case []any:
		for _, e := range x {
			if !jsonValue(e, depth+1) {
				return false
			}
		}
		return true
	case map[string]any:
		for k, e := range x {
			if !utf8.ValidString(k) || !jsonValue(e, depth+1) {
				return false
			}
		}
		return true
	}
	return false
}
