package fql

import (
	"cmp"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Truthy reports whether a condition's value lets a row through: only
// the bool true does (null, missing, numbers and text do not).
func Truthy(v any) bool {
	b, ok := v.(bool)
	return ok && b
}

// Compare orders two values of one kind: numbers (int64 and float64 with
// each other, exactly), text (by bytes), bools (false before true). ok is
// false when either is nil or they are of kinds that do not compare; the
// comparison operators are then false.
func Compare(a, b any) (c int, ok bool) {
	switch x := a.(type) {
	case int64:
		switch y := b.(type) {
		case int64:
			return cmp.Compare(x, y), true
		case float64:
			if math.IsNaN(y) {
				return 0, false
			}
			return cmpIntFloat(x, y), true
		}
	case float64:
		if math.IsNaN(x) {
			return 0, false
		}
		switch y := b.(type) {
		case int64:
			return -cmpIntFloat(y, x), true
		case float64:
			if math.IsNaN(y) {
				return 0, false
			}
			return cmp.Compare(x, y), true
		}
	case string:
		if y, ok := b.(string); ok {
			return strings.Compare(x, y), true
		}
	case bool:
		if y, ok := b.(bool); ok {
			return cmpBool(x, y), true
		}
	}
	return 0, false
}

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case b:
		return -1
	}
	return 1
}

// cmpIntFloat compares i with f exactly (no rounding of i to a float);
// f is not NaN.
func cmpIntFloat(i int64, f float64) int {
	if f >= 1<<63 {
		return -1
	}
	if f < -(1 << 63) {
		return 1
	}
	t := math.Trunc(f)
	if c := cmp.Compare(i, int64(t)); c != 0 {
		return c
	}
	return cmp.Compare(t, f) // i == trunc(f): the fraction decides
}

// Equal reports whether a = b holds: false when either is nil; numbers
// compare by value across int64 and float64; lists, vectors and json
// compare element by element (a vector equals a list of the same numbers;
// inside them a null equals a null).
func Equal(a, b any) bool {
	if a == nil || b == nil {
		return false
	}
	return deepEqual(a, b)
}

func deepEqual(a, b any) bool {
	switch x := a.(type) {
	case nil:
		return b == nil
	case []any:
		switch y := b.(type) {
		case []any:
			if len(x) != len(y) {
				return false
			}
			for i := range x {
				if !deepEqual(x[i], y[i]) {
					return false
				}
			}
			return true
		case []float32:
			return vectorEqualsList(y, x)
		}
		return false
	case []float32:
		switch y := b.(type) {
		case []float32:
			if len(x) != len(y) {
				return false
			}
			for i := range x {
				if x[i] != y[i] {
					return false
				}
			}
			return true
		case []any:
			return vectorEqualsList(x, y)
		}
		return false
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, xv := range x {
			yv, ok := y[k]
			if !ok || !deepEqual(xv, yv) {
				return false
			}
		}
		return true
	}
	c, ok := Compare(a, b)
	return ok && c == 0
}

func vectorEqualsList(v []float32, l []any) bool {
	if len(v) != len(l) {
		return false
	}
	for i := range v {
		c, ok := Compare(float64(v[i]), l[i])
		if !ok || c != 0 {
			return false
		}
	}
	return true
}

// SortCompare is the total order order uses: null first, then bools, then
// numbers, then text, then lists and vectors (element by element, shorter
// first on a tie), then json objects (by sorted keys, then values). Ties
// are 0.
func SortCompare(a, b any) int {
	ra, rb := sortRank(a), sortRank(b)
	if ra != rb {
		return cmp.Compare(int64(ra), int64(rb))
	}
	switch ra {
	case rankNull:
		return 0
	case rankList:
		return cmpLists(a, b)
	case rankObject:
		return cmpObjects(a.(map[string]any), b.(map[string]any))
	}
	c, ok := Compare(a, b)
	if !ok {
		// Only NaN gets here: put it before every other number.
		an, bn := isNaN(a), isNaN(b)
		switch {
		case an && bn:
			return 0
		case an:
			return -1
		}
		return 1
	}
	return c
}

// GroupEqual is the equality a group uses, in a get's group and in the
// merge of a read across tenants alike: the ties of SortCompare. Null
// goes with null; a number with a number of the same value, int or float
// (1 and 1.0); a list or vector with one of as many elements, each
// GroupEqual to its own ([1] and [1.0]); an object with one of the same
// keys whose values are GroupEqual ({a: 1} and {a: 1.0}): one rule at
// every depth. It is Equal but that null goes with null.
func GroupEqual(a, b any) bool { return SortCompare(a, b) == 0 }

// AppendGroupKey appends v's group key to dst: the keys of two values are
// the same bytes exactly when the values are GroupEqual, so a map keyed
// by them groups as GroupEqual does. No key is the start of another, so
// the keys of several values, one after the other, key the tuple.
func AppendGroupKey(dst []byte, v any) []byte {
	switch x := v.(type) {
	case nil:
		return append(dst, 'z')
	case bool:
		if x {
			return append(dst, 't')
		}
		return append(dst, 'f')
	case int64:
		return binary.BigEndian.AppendUint64(append(dst, 'i'), uint64(x))
	case float64:
		return appendFloatKey(dst, x)
	case string:
		return append(binary.AppendUvarint(append(dst, 's'), uint64(len(x))), x...)
	case []any:
		dst = binary.AppendUvarint(append(dst, 'l'), uint64(len(x)))
		for _, e := range x {
			dst = AppendGroupKey(dst, e)
		}
		return dst
	case []float32:
		dst = binary.AppendUvarint(append(dst, 'l'), uint64(len(x)))
		for _, e := range x {
			dst = appendFloatKey(dst, float64(e))
		}
		return dst
	case map[string]any:
		dst = binary.AppendUvarint(append(dst, 'o'), uint64(len(x)))
		for _, k := range sortedKeys(x) {
			dst = append(binary.AppendUvarint(dst, uint64(len(k))), k...)
			dst = AppendGroupKey(dst, x[k])
		}
		return dst
	}
	// No value of the package's gets here; one that did keys by its text.
	s := fmt.Sprintf("%T %v", v, v)
	return append(binary.AppendUvarint(append(dst, '?'), uint64(len(s))), s...)
}

// appendFloatKey keys a float holding an integer as that int64 (so 1.0
// meets 1, and -0 meets 0), every NaN alike (SortCompare ties them), and
// any other float by its bits.
func appendFloatKey(dst []byte, f float64) []byte {
	if i, ok := exactInt(f); ok {
		return binary.BigEndian.AppendUint64(append(dst, 'i'), uint64(i))
	}
	if math.IsNaN(f) {
		return append(dst, 'n')
	}
	return binary.BigEndian.AppendUint64(append(dst, 'd'), math.Float64bits(f))
}

const (
	rankNull = iota
	rankBool
	rankNumber
	rankText
	rankList
	rankObject
	rankOther
)

func sortRank(v any) int {
	switch v.(type) {
	case nil:
		return rankNull
	case bool:
		return rankBool
	case int64, float64:
		return rankNumber
	case string:
		return rankText
	case []any, []float32:
		return rankList
	case map[string]any:
		return rankObject
	}
	return rankOther
}

func isNaN(v any) bool {
	f, ok := v.(float64)
	return ok && math.IsNaN(f)
}

func listLen(v any) int {
	if l, ok := v.([]float32); ok {
		return len(l)
	}
	l, _ := v.([]any)
	return len(l)
}

func listAt(v any, i int) any {
	if l, ok := v.([]float32); ok {
		return float64(l[i])
	}
	return v.([]any)[i]
}

func cmpLists(a, b any) int {
	na, nb := listLen(a), listLen(b)
	for i := 0; i < na && i < nb; i++ {
		if c := SortCompare(listAt(a, i), listAt(b, i)); c != 0 {
			return c
		}
	}
	return cmp.Compare(int64(na), int64(nb))
}

func cmpObjects(a, b map[string]any) int {
	ka, kb := sortedKeys(a), sortedKeys(b)
	for i := 0; i < len(ka) && i < len(kb); i++ {
		if c := strings.Compare(ka[i], kb[i]); c != 0 {
			return c
		}
		if c := SortCompare(a[ka[i]], b[kb[i]]); c != 0 {
			return c
		}
	}
	return cmp.Compare(int64(len(ka)), int64(len(kb)))
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Normalize turns a JSON-decoded parameter into the package's values: a
// json.Number that parses as an int64 becomes int64, any other number
// float64 (Go ints become int64, float32 float64); lists and objects are
// normalised all the way down ([]string becomes []any), copied only where
// something changes. A float that is not finite, or a type outside the
// convention, is ErrParam.
func Normalize(v any) (any, error) {
	n, _, err := normalize(v)
	return n, err
}

// normalize is Normalize that also says whether anything changed.
func normalize(v any) (any, bool, error) {
	switch x := v.(type) {
	case nil, bool, string, int64, []float32:
		return v, false, nil
	case float64:
		if math.IsInf(x, 0) || math.IsNaN(x) {
			return nil, false, fmt.Errorf("number %v is not finite: %w", x, ErrParam)
		}
		return v, false, nil
	case json.Number:
		if i, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			return i, true, nil
		}
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil || math.IsInf(f, 0) {
			return nil, false, fmt.Errorf("number %s is out of range (a whole number must fit in 64 bits, any other be finite in 64-bit floating point): %w", x, ErrParam)
		}
		return f, true, nil
	case int:
		return int64(x), true, nil
	case int32:
		return int64(x), true, nil
	case float32:
		n, _, err := normalize(float64(x))
		return n, true, err
	case []any:
		return normalizeList(x)
	case []string:
		out := make([]any, len(x))
		for i, s := range x {
			out[i] = s
		}
		return out, true, nil
	case map[string]any:
		return normalizeObject(x)
	}
	return nil, false, fmt.Errorf("value of type %T: %w", v, ErrParam)
}

// normalizeList returns l itself when nothing in it changes, else a copy.
func normalizeList(l []any) (any, bool, error) {
	var out []any
	for i, x := range l {
		n, changed, err := normalize(x)
		if err != nil {
			return nil, false, err
		}
		if changed && out == nil {
			out = make([]any, len(l))
			copy(out, l)
		}
		if out != nil {
			out[i] = n
		}
	}
	if out == nil {
		return l, false, nil
	}
	return out, true, nil
}

// normalizeObject returns m itself when nothing in it changes, else a copy.
func normalizeObject(m map[string]any) (any, bool, error) {
	var out map[string]any
	for k, x := range m {
		n, changed, err := normalize(x)
		if err != nil {
			return nil, false, err
		}
		if changed && out == nil {
			out = make(map[string]any, len(m))
			for k2, v2 := range m {
				out[k2] = v2
			}
		}
		if out != nil {
			out[k] = n
		}
	}
	if out == nil {
		return m, false, nil
	}
	return out, true, nil
}

// NormalizeParams normalises every parameter once, so that evaluating a
// statement over many rows finds nothing left to convert.
func NormalizeParams(params []any) ([]any, error) {
	out := make([]any, len(params))
	for i, p := range params {
		n, err := Normalize(p)
		if err != nil {
			return nil, fmt.Errorf("$%d: %w", i+1, err)
		}
		out[i] = n
	}
	return out, nil
}
