package fql

import (
	"bytes"
	"math"
	"testing"
)

// groupValues are values of every kind, with numbers equal across int
// and float at the top and inside lists and objects.
var groupValues = []any{
	nil, false, true,
	int64(0), math.Copysign(0, -1), float64(0),
	int64(1), float64(1), 1.5, int64(-1), float64(-1),
	int64(1) << 60, float64(1 << 60), float64(1 << 63), int64(math.MaxInt64), int64(math.MinInt64), float64(math.MinInt64),
	math.NaN(),
	"", "1", "a", "\x00",
	[]any{}, []any{int64(1)}, []any{float64(1)}, []float32{1}, []any{1.5}, []float32{1.5},
	[]any{nil}, []any{nil, int64(1)}, []any{int64(1), nil},
	[]any{[]any{int64(1)}}, []any{[]any{float64(1)}}, []any{"a", "b"}, []any{"ab"},
	map[string]any{}, map[string]any{"a": int64(1)}, map[string]any{"a": float64(1)},
	map[string]any{"a": []any{int64(1)}}, map[string]any{"a": []any{float64(1)}},
	map[string]any{"a": int64(1), "b": int64(2)}, map[string]any{"b": float64(2), "a": float64(1)},
	map[string]any{"a": nil}, map[string]any{"b": int64(1)},
	[]any{map[string]any{"a": int64(1)}}, []any{map[string]any{"a": float64(1)}},
}

func groupKeyOf(vals ...any) []byte {
	var b []byte
	for _, v := range vals {
		b = AppendGroupKey(b, v)
	}
	return b
}

// Two values' keys are the same bytes exactly when GroupEqual holds them
// equal, and GroupEqual is SortCompare's ties, for every pair.
func TestGroupKeyIsGroupEqual(t *testing.T) {
	for _, a := range groupValues {
		for _, b := range groupValues {
			eq := GroupEqual(a, b)
			if eq != (SortCompare(a, b) == 0) {
				t.Errorf("GroupEqual(%#v, %#v) = %v, SortCompare %d", a, b, eq, SortCompare(a, b))
			}
			if same := bytes.Equal(groupKeyOf(a), groupKeyOf(b)); same != eq {
				t.Errorf("%#v and %#v: same key %v, GroupEqual %v", a, b, same, eq)
			}
		}
	}
}

// The rule is the same at every depth: a number, a list of it and an
// object holding it group as the number does.
func TestGroupEqualAtEveryDepth(t *testing.T) {
	tests := []struct {
		a, b any
		want bool
	}{
		{int64(1), float64(1), true},
		{[]any{int64(1)}, []any{float64(1)}, true},
		{map[string]any{"a": int64(1)}, map[string]any{"a": float64(1)}, true},
		{[]any{[]any{int64(1)}}, []any{[]any{float64(1)}}, true},
		{map[string]any{"a": []any{int64(1)}}, map[string]any{"a": []any{float64(1)}}, true},
		{[]float32{1, 2}, []any{int64(1), float64(2)}, true},
		{nil, nil, true},
		{[]any{nil}, []any{nil}, true},
		{int64(1) << 60, float64(1 << 60), true},
		{int64(1), 1.5, false},
		{[]any{int64(1)}, int64(1), false},
		{[]any{int64(1)}, []any{int64(1), int64(1)}, false},
		{map[string]any{"a": int64(1)}, map[string]any{"b": int64(1)}, false},
		{"1", int64(1), false},
		{nil, false, false},
	}
	for _, tt := range tests {
		if got := GroupEqual(tt.a, tt.b); got != tt.want {
			t.Errorf("GroupEqual(%#v, %#v) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}

// Keys of several values joined key the tuple: no key is the start of
// another, so values that split differently never meet.
func TestGroupKeysOfTuples(t *testing.T) {
	tuples := [][]any{
		{"a", "b"}, {"ab", ""}, {"", "ab"},
		{[]any{"a"}, "b"}, {[]any{"a", "b"}},
		{int64(1), int64(2)}, {[]any{int64(1), int64(2)}},
		{map[string]any{"a": "b"}, nil}, {nil, map[string]any{"a": "b"}},
	}
	for i, a := range tuples {
		for j, b := range tuples {
			if same := bytes.Equal(groupKeyOf(a...), groupKeyOf(b...)); same != (i == j) {
				t.Errorf("tuples %#v and %#v: same key %v", a, b, same)
			}
		}
	}
	if !bytes.Equal(groupKeyOf(int64(1), []any{float64(2)}), groupKeyOf(float64(1), []any{int64(2)})) {
		t.Error("tuples of GroupEqual values should share a key")
	}
}
