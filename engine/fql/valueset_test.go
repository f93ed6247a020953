package fql

import (
	"math"
	"testing"
)

// A ValueSet answers as Has does on its list, for every kind of value,
// numbers of both kinds meeting where Equal says they are equal.
func TestValueSetAnswersAsHas(t *testing.T) {
	lists := [][]any{
		nil,
		{},
		{nil},
		{int64(1), int64(2), int64(3)},
		{float64(1), 2.5, int64(-3)},
		{math.Copysign(0, -1)},
		{int64(1) << 53, float64(1<<53) + 2},
		{float64(1 << 63), int64(math.MinInt64), int64(math.MaxInt64)},
		{"a", "b", "", "héllo"},
		{true},
		{false, nil},
		{[]any{int64(1), int64(2)}, map[string]any{"k": "v"}, []float32{1, 2}},
		{"1", int64(1), true},
		{[]any{[]any{int64(1)}, nil}, map[string]any{"a": []any{1.5, nil}}, []any{}, map[string]any{}, []any{nil}},
	}
	values := []any{
		nil, int64(0), float64(0), math.Copysign(0, -1), int64(1), float64(1), 1.5, 2.5, int64(2),
		int64(-3), float64(-3), int64(1) << 53, float64(1 << 53), int64(1)<<53 + 1, int64(1)<<53 + 2,
		float64(1 << 63), int64(math.MaxInt64), int64(math.MinInt64), float64(math.MinInt64),
		math.NaN(), math.Inf(1), "a", "", "1", "héllo", "x", true, false,
		[]any{int64(1), int64(2)}, []any{1.0, 2.0}, []float32{1, 2}, map[string]any{"k": "v"},
		map[string]any{"k": "w"}, []any{},
		[]any{[]any{float64(1)}, nil}, []any{[]any{int64(1)}}, map[string]any{"a": []any{1.5, nil}},
		map[string]any{"a": []any{1.5}}, map[string]any{}, []any{nil}, []float32{}, []any{[]float32{1}, nil},
	}
	for _, l := range lists {
		s := NewValueSet(l)
		for _, v := range values {
			if got, want := s.Has(v), Has(l, v); got != want {
				t.Errorf("set of %v has %#v: %v, the list says %v", l, v, got, want)
			}
		}
	}
	vec := []float32{1, 2.5}
	s := NewValueSet(vec)
	for _, v := range []any{int64(1), 2.5, float64(2), nil} {
		if got, want := s.Has(v), Has(vec, v); got != want {
			t.Errorf("set of vector %v has %#v: %v, want %v", vec, v, got, want)
		}
	}
}

// countingEnv counts the sets it is asked to keep.
type countingEnv struct {
	testEnv
	sets map[*In]*ValueSet
	kept int
}

func (e *countingEnv) InSet(x *In) *ValueSet { return e.sets[x] }
func (e *countingEnv) KeepInSet(x *In, s *ValueSet) {
	e.sets[x] = s
	e.kept++
}

// An in over a parameter is hashed once by an Env that keeps sets, and
// answers as the list would, row after row; one whose list reads a field
// or the clock is never kept.
func TestInKeepsItsSet(t *testing.T) {
	st, err := Parse("get c where n in $1 and not (m in [n, 1]) and k in [now()]")
	if err != nil {
		t.Fatal(err)
	}
	where := st.(*Get).Where
	list := []any{int64(1), "x", 2.5}
	env := &countingEnv{testEnv: testEnv{params: []any{list}, now: 7}, sets: map[*In]*ValueSet{}}
	for _, row := range []map[string]any{
		{"n": int64(1), "m": int64(5), "k": int64(7)},
		{"n": 2.5, "m": int64(5), "k": int64(7)},
		{"n": "x", "m": int64(1), "k": int64(7)},
		{"n": int64(2), "m": int64(5), "k": int64(7)},
		{"n": nil, "m": int64(5), "k": int64(7)},
	} {
		env.row = row
		got, err := Eval(where, env)
		if err != nil {
			t.Fatal(err)
		}
		plain, err := Eval(where, env.testEnv)
		if err != nil {
			t.Fatal(err)
		}
		if got != plain {
			t.Errorf("row %v: %v with the set kept, %v without", row, got, plain)
		}
	}
	if env.kept != 1 {
		t.Errorf("kept %d sets for one in over a parameter, want 1", env.kept)
	}
	env.params = []any{"not a list"}
	env.sets = map[*In]*ValueSet{}
	env.row = map[string]any{"n": int64(1)}
	if _, err := Eval(where, env); err == nil {
		t.Error("in over a parameter that is no list: no error")
	}
}
