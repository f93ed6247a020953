package merge

import (
	"math"
	"slices"
	"strconv"
	"strings"
)

// The merge holds no ordering of its own: rows are compared, grouped,
// and their minimums and maximums taken by the engine's one total order,
// fql.SortCompare, over values as DecodeRows gives them (the engine's:
// nil, bool, int64, float64, string, []any, map[string]any).

// groupKey is a text of a group's key values that two lists of values
// share exactly when fql.SortCompare holds them equal, value by value: a
// number by its value whether int or float (1 and 1.0), a list by its
// elements, an object by its sorted keys and their values.
func groupKey(vals []any) string {
	var sb strings.Builder
	for _, v := range vals {
		writeKey(&sb, v)
		sb.WriteByte(',')
	}
	return sb.String()
}

func writeKey(sb *strings.Builder, v any) {
	switch x := v.(type) {
	case nil:
		sb.WriteString("z")
	case bool:
		sb.WriteString("b" + strconv.FormatBool(x))
	case int64:
		sb.WriteString("n" + strconv.FormatInt(x, 10))
	case float64:
		sb.WriteString("n" + canonicalFloat(x))
	case string:
		sb.WriteString("s" + strconv.Quote(x))
	case []any:
		sb.WriteString("l[")
		for i, e := range x {
			if i > 0 {
				sb.WriteByte(',')
			}
			writeKey(sb, e)
		}
		sb.WriteByte(']')
	case []float32:
		sb.WriteString("l[")
		for i, e := range x {
			if i > 0 {
				sb.WriteByte(',')
			}
			sb.WriteString("n" + canonicalFloat(float64(e)))
		}
		sb.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		sb.WriteString("o{")
		for i, k := range keys {
			if i > 0 {
				sb.WriteByte(',')
			}
			sb.WriteString(strconv.Quote(k) + ":")
			writeKey(sb, x[k])
		}
		sb.WriteByte('}')
	default:
		sb.WriteString("?")
	}
}

// canonicalFloat writes a float that is an int64's value as that int64
// is written, so that the two are one key.
func canonicalFloat(f float64) string {
	if f == math.Trunc(f) && f >= -(1<<63) && f < 1<<63 {
		return strconv.FormatInt(int64(f), 10)
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
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
