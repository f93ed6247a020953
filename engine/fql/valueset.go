package fql

import "math"

// ValueSet is a list's values hashed for in: asking whether a value is among
// them costs a map lookup, whatever the list's length, where walking it
// cost a comparison a value (a list of 300 000 parameters over 20 000
// rows was 6·10⁹ of them). It answers as Has does on the list: a value is
// in it when it is Equal to one of its elements. Numbers are keyed so
// that an int and a float equal to it meet (Equal compares them exactly);
// lists, objects and vectors by their group key (AppendGroupKey), which
// meets where Equal does for them: element by element, numbers by value,
// at every depth.
type ValueSet struct {
	ints   map[int64]struct{}   // ints, and floats holding an int exactly
	floats map[float64]struct{} // the other floats (NaN equals nothing and is left out)
	strs   map[string]struct{}
	bools  [2]bool             // false, true
	comps  map[string]struct{} // lists, objects and vectors, by group key
	n      int                 // elements kept
}

// NewValueSet hashes the elements of a list ([]any, or a vector's []float32).
func NewValueSet(list any) *ValueSet {
	s := &ValueSet{}
	switch l := list.(type) {
	case []any:
		for _, v := range l {
			s.add(v)
		}
	case []float32:
		for _, f := range l {
			s.add(float64(f))
		}
	}
	return s
}

func (s *ValueSet) add(v any) {
	switch x := v.(type) {
	case nil:
		return // null equals nothing
	case int64:
		s.intKeys()[x] = struct{}{}
	case float64:
		if i, ok := exactInt(x); ok {
			s.intKeys()[i] = struct{}{}
		} else if !math.IsNaN(x) {
			if s.floats == nil {
				s.floats = make(map[float64]struct{})
			}
			s.floats[x] = struct{}{}
		}
	case string:
		if s.strs == nil {
			s.strs = make(map[string]struct{})
		}
		s.strs[x] = struct{}{}
	case bool:
		if x {
			s.bools[1] = true
		} else {
			s.bools[0] = true
		}
	case []any, []float32, map[string]any:
		if s.comps == nil {
			s.comps = make(map[string]struct{})
		}
		s.comps[string(AppendGroupKey(nil, v))] = struct{}{}
	default:
		return // no value of the package: it equals nothing
	}
	s.n++
}

func (s *ValueSet) intKeys() map[int64]struct{} {
	if s.ints == nil {
		s.ints = make(map[int64]struct{})
	}
	return s.ints
}

// exactInt is f as an int64 when f holds an integer that fits one
// exactly (-0 is 0).
func exactInt(f float64) (int64, bool) {
	if f != math.Trunc(f) || f < -9.223372036854775808e18 || f >= 9.223372036854775808e18 {
		return 0, false
	}
	return int64(f), true
}

// Len is the number of elements kept (nulls are not).
func (s *ValueSet) Len() int { return s.n }

// Has reports whether v is Equal to an element; false for null.
func (s *ValueSet) Has(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case int64:
		_, ok := s.ints[x]
		return ok
	case float64:
		if i, ok := exactInt(x); ok {
			_, ok := s.ints[i]
			return ok
		}
		_, ok := s.floats[x]
		return ok
	case string:
		_, ok := s.strs[x]
		return ok
	case bool:
		if x {
			return s.bools[1]
		}
		return s.bools[0]
	case []any, []float32, map[string]any:
		_, ok := s.comps[string(AppendGroupKey(nil, x))]
		return ok
	}
	return false
}
