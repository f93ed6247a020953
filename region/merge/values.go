package merge

import "github.com/fenec-go/fenec/engine/fql"

// The merge holds no ordering of its own: rows are compared, grouped,
// and their minimums and maximums taken by the engine's one total order,
// fql.SortCompare, over values as DecodeRows gives them (the engine's:
// nil, bool, int64, float64, string, []any, map[string]any).

// groupKey is a text of a group's key values that two lists of values
// share exactly when fql.GroupEqual holds them equal, value by value: the
// engine's own grouping, so a group across tenants is the group one
// tenant holding the same rows makes.
func groupKey(vals []any) string {
	var b []byte
	for _, v := range vals {
		b = fql.AppendGroupKey(b, v)
	}
	return string(b)
}

// sum adds numbers, exact while they are integers that do not overflow.
type sum struct {
	seen  bool
	isInt bool
	i     int64
	f     float64
}

func (s *sum) add(v any) {
	var (
		isInt bool
		i     int64
		f     float64
	)
	switch x := v.(type) {
	case int64:
		isInt, i, f = true, x, float64(x)
	case float64:
		f = x
	default:
		return
	}
	if !s.seen {
		s.seen, s.isInt = true, true
	}
	if s.isInt && isInt {
		r := s.i + i
		if overflow := i > 0 && r < s.i || i < 0 && r > s.i; !overflow {
			s.i = r
			return
		}
	}
	if s.isInt {
		s.isInt, s.f = false, float64(s.i)
	}
	s.f += f
}

// value is the sum for the answer: null when no number was seen.
func (s *sum) value() any {
	switch {
	case !s.seen:
		return nil
	case s.isInt:
		return s.i
	}
	return s.f
}
