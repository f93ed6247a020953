package engine

import (
	"cmp"
	"encoding/json"
	"math"
	"strings"

	"github.com/fenec-go/fenec/engine/fql"
)

// normalizeParam turns a JSON-decoded parameter into a runtime value:
// json.Number and float64 that are integral become int64.
func normalizeParam(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		if f, err := x.Float64(); err == nil {
			return f
		}
		return x.String()
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<53 {
			return int64(x)
		}
		return x
	case float32:
		return float64(x)
	case int:
		return int64(x)
	case int32:
		return int64(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = normalizeParam(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = normalizeParam(e)
		}
		return out
	}
	return v
}

// keyFor converts a query value to the key an index on a field of kind k
// holds, or ok=false when no stored value can equal it.
func keyFor(k typeKind, v any) (any, bool) {
	switch k {
	case tInt, tTimestamp:
		switch x := v.(type) {
		case int64:
			return x, true
		case float64:
			if x == math.Trunc(x) && math.Abs(x) < 9.2e18 {
				return int64(x), true
			}
		}
	case tFloat:
		switch x := v.(type) {
		case int64:
			// Only a float that is exactly x equals it.
			f := float64(x)
			if f >= 1<<63 || int64(f) != x {
				return nil, false
			}
			return f, true
		case float64:
			return x, true
		}
	case tText:
		if s, ok := v.(string); ok {
			return s, true
		}
	case tBool:
		if b, ok := v.(bool); ok {
			return b, true
		}
	}
	return nil, false
}

// cmpKeys orders two index keys of one field (both int64, both float64,
// both string or both bool), or a stored key against a bound of the other
// numeric type.
func cmpKeys(a, b any) int {
	switch x := a.(type) {
	case int64:
		switch y := b.(type) {
		case int64:
			return cmp.Compare(x, y)
		case float64:
			return exactNumCmp(x, y)
		}
	case float64:
		switch y := b.(type) {
		case float64:
			return cmp.Compare(x, y)
		case int64:
			return exactNumCmp(x, y)
		}
	case string:
		if y, ok := b.(string); ok {
			return strings.Compare(x, y)
		}
	case bool:
		if y, ok := b.(bool); ok {
			switch {
			case x == y:
				return 0
			case !x:
				return -1
			}
			return 1
		}
	}
	return cmpRank(a) - cmpRank(b)
}

// exactNumCmp orders an int64 and a float64 (either way round) as the
// query language does, exactly: an int past 2^53 is not rounded to the
// float nearest it, so an index and a scan agree. Keys are never NaN.
func exactNumCmp(a, b any) int {
	c, _ := fql.Compare(a, b)
	return c
}

func cmpRank(v any) int {
	switch v.(type) {
	case nil:
		return 0
	case bool:
		return 1
	case int64, float64:
		return 2
	case string:
		return 3
	}
	return 4
}
