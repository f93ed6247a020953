package fql

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"sync"
	"testing"
)

// testEnv is a row as a map (paths go into nested maps), parameters and a
// fixed clock.
type testEnv struct {
	row    map[string]any
	params []any
	now    int64
}

func (e testEnv) Field(path []string) (any, bool) {
	var v any = e.row
	for _, k := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[k]; !ok {
			return nil, false
		}
	}
	return v, true
}

func (e testEnv) Param(n int) (any, error) {
	if n < 1 || n > len(e.params) {
		return nil, fmt.Errorf("only %d parameters: %w", len(e.params), ErrParam)
	}
	return e.params[n-1], nil
}

func (e testEnv) Now() int64 { return e.now }

func newTestEnv() testEnv {
	return testEnv{
		row: map[string]any{
			"i": int64(7), "neg": int64(-3), "f": 2.5, "s": "hello", "t": true, "fl": false,
			"z": nil, "big": int64(math.MaxInt64), "small": int64(math.MinInt64),
			"tags":  []any{"a", "b", int64(3)},
			"vec":   []float32{1, 0.5},
			"meta":  map[string]any{"city": "Oslo", "n": int64(2), "deep": map[string]any{"x": 1.5}},
			"email": "bob@example.com",
		},
		params: []any{
			json.Number("5"), json.Number("2.5"), "hello", []any{json.Number("7"), "x"},
			nil, json.Number("1e3"), "^h.l", []any{1.0, 0.5}, true, float64(7),
			map[string]any{"k": json.Number("1")},
		},
		now: 1_700_000_000_000,
	}
}

// evalText parses text as an expression and evaluates it in env.
func evalText(t testing.TB, text string, env Env) (any, error) {
	t.Helper()
	e, err := ParseExpr(text)
	if err != nil {
		t.Fatalf("ParseExpr(%q): %v", text, err)
	}
	return Eval(e, env)
}

func TestEval(t *testing.T) {
	env := newTestEnv()
	tests := []struct {
		in   string
		want any
	}{
		// literals, fields, params, now
		{`1`, int64(1)}, {`-1`, int64(-1)}, {`1.5`, 1.5}, {`"x"`, "x"}, {`true`, true}, {`null`, nil},
		{`i`, int64(7)}, {`meta.city`, "Oslo"}, {`meta.deep.x`, 1.5}, {`nope`, nil}, {`meta.nope.x`, nil},
		{`s.x`, nil},
		{`$1`, int64(5)}, {`$2`, 2.5}, {`$3`, "hello"}, {`$4`, []any{int64(7), "x"}}, {`$5`, nil},
		{`$6`, 1000.0}, {`$10`, 7.0}, {`$11`, map[string]any{"k": int64(1)}},
		{`now()`, int64(1_700_000_000_000)}, {`now() + 30000`, int64(1_700_000_030_000)},
		{`[1, i, "a"]`, []any{int64(1), int64(7), "a"}},
		{`{a: 1, b: [s]}`, map[string]any{"a": int64(1), "b": []any{"hello"}}},

		// arithmetic
		{`1 + 2 * 3`, int64(7)}, {`(1 + 2) * 3`, int64(9)}, {`7 / 2`, int64(3)}, {`-7 / 2`, int64(-3)},
		{`i - 10`, int64(-3)}, {`i + 0.5`, 7.5}, {`f * 2`, 5.0}, {`f / 2`, 1.25}, {`1 / 4.0`, 0.25},
		{`i * f`, 17.5}, {`-i`, int64(-7)}, {`-f`, -2.5}, {`- -i`, int64(7)}, {`$1 + $2`, 7.5},
		{`s + " world"`, "hello world"}, {`z + 1`, nil}, {`nope * 2`, nil}, {`-z`, nil},
		{`big - 1`, int64(math.MaxInt64 - 1)}, {`small + 1`, int64(math.MinInt64 + 1)},
		{`big * 1`, int64(math.MaxInt64)}, {`small / 1`, int64(math.MinInt64)}, {`big + small`, int64(-1)},
		{`big + 1.0`, 9223372036854775808.0},

		// comparisons
		{`i = 7`, true}, {`i = 7.0`, true}, {`i = 7.5`, false}, {`i != 8`, true}, {`i != 7`, false},
		{`i < 7.5`, true}, {`i <= 7`, true}, {`i > 6.99`, true}, {`i >= 8`, false},
		{`f > 2`, true}, {`f < 3`, true}, {`s = "hello"`, true}, {`s < "help"`, true}, {`s > "Z"`, true},
		{`t = true`, true}, {`fl < t`, true}, {`t != fl`, true},
		{`big > 9223372036854774784.0`, true}, {`big > 9223372036854775806.0`, false}, {`big = 9223372036854775807.0`, false},
		{`big < 9223372036854775808.0`, true}, {`small = -9223372036854775808.0`, true},
		{`s = 1`, false}, {`s != 1`, true}, {`s < 1`, false}, {`i < "a"`, false}, {`t > 0`, false},
		{`tags = ["a", "b", 3]`, true}, {`tags = ["a", "b", 3.0]`, true}, {`tags = ["a"]`, false},
		{`vec = [1, 0.5]`, true}, {`vec = [1, 0.25]`, false}, {`meta = {city: "Oslo", n: 2, deep: {x: 1.5}}`, true},
		{`[null] = [null]`, true},

		// null and missing: comparisons false, only is null sees them
		{`z = null`, false}, {`z != 1`, false}, {`z < 1`, false}, {`z >= 1`, false}, {`nope = nope`, false},
		{`nope != 1`, false}, {`1 = null`, false}, {`null != null`, false},
		{`z is null`, true}, {`nope is null`, true}, {`i is null`, false}, {`i is not null`, true},
		{`z is not null`, false}, {`not (z = 1)`, true}, {`$5 is null`, true},

		// logic
		{`true and false`, false}, {`true or false`, true}, {`not true`, false}, {`not not true`, true},
		{`i = 7 and s = "hello"`, true}, {`i = 8 or s = "hello"`, true}, {`i = 8 or s = "x"`, false},
		{`not i`, true}, {`i and true`, false}, {`z or t`, true}, {`t and z`, false},
		// short circuit: the right side would fail
		{`false and 1 / 0 = 1`, false}, {`true or 1 / 0 = 1`, true},

		// has, in, regex
		{`tags has "a"`, true}, {`tags has 3`, true}, {`tags has 3.0`, true}, {`tags has "c"`, false},
		{`tags has null`, false}, {`s has "h"`, false}, {`nope has 1`, false}, {`vec has 0.5`, true},
		{`i in (1, 7, 9)`, true}, {`i in (1, 2)`, false}, {`i in ()`, false}, {`s in $4`, false},
		{`i in $4`, true}, {`"x" in $4`, true}, {`z in (null)`, false}, {`i in $5`, false},
		{`i in [7]`, true}, {`vec in ([1, 0.5], 2)`, true},
		{`s ~ "^hel+o$"`, true}, {`s ~ "^el"`, false}, {`s ~ "ell"`, true}, {`email ~ "@example\\.com$"`, true},
		{`s ~ $7`, true}, {`i ~ "7"`, false}, {`z ~ "x"`, false}, {`s ~ $5`, false},
		{`s ~ "(?i)HELLO"`, true},
	}
	for _, tc := range tests {
		got, err := evalText(t, tc.in, env)
		if err != nil {
			t.Errorf("Eval(%q): %v", tc.in, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Eval(%q) = %#v (%T), want %#v (%T)", tc.in, got, got, tc.want, tc.want)
		}
	}
}

func TestEvalErrors(t *testing.T) {
	env := newTestEnv()
	tests := []struct {
		in   string
		want error
	}{
		{`big + 1`, ErrOverflow}, {`small - 1`, ErrOverflow}, {`big * 2`, ErrOverflow},
		{`small * -1`, ErrOverflow}, {`-1 * small`, ErrOverflow}, {`small / -1`, ErrOverflow},
		{`-small`, ErrOverflow}, {`big - -1`, ErrOverflow}, {`3037000500 * 3037000500`, ErrOverflow},
		{`1e300 * 1e300`, ErrOverflow}, {`-1e308 - 1e308`, ErrOverflow},
		{`1 / 0`, ErrDivZero}, {`i / 0`, ErrDivZero}, {`f / 0`, ErrDivZero}, {`1 / 0.0`, ErrDivZero},
		{`s * 2`, ErrType}, {`s - "a"`, ErrType}, {`s + 1`, ErrType}, {`1 + s`, ErrType},
		{`t + 1`, ErrType}, {`tags + 1`, ErrType}, {`-s`, ErrType}, {`-tags`, ErrType}, {`meta / 2`, ErrType},
		{`i in $3`, ErrType}, {`s ~ $1`, ErrType}, {`s ~ i`, ErrType},
		{`$12`, ErrParam}, {`i = $99`, ErrParam},
		{`s ~ $3 + "("`, ErrRegex},
		// errors inside conditions are errors, not false
		{`i = 1 or s * 2 = 1`, ErrType}, {`not (1 / 0 = 1)`, ErrDivZero}, {`[1, 1 / 0]`, ErrDivZero},
		{`{a: s * 2}`, ErrType}, {`(s * 2) is null`, ErrType}, {`i in (1 / 0)`, ErrDivZero},
	}
	for _, tc := range tests {
		got, err := evalText(t, tc.in, env)
		if !errors.Is(err, tc.want) {
			t.Errorf("Eval(%q) = %#v, %v; want error %v", tc.in, got, err, tc.want)
		}
	}
}

func TestNormalize(t *testing.T) {
	tests := []struct {
		in   any
		want any
		err  error
	}{
		{json.Number("12"), int64(12), nil},
		{json.Number("-9223372036854775808"), int64(math.MinInt64), nil},
		{json.Number("9223372036854775808"), 9223372036854775808.0, nil},
		{json.Number("1.5"), 1.5, nil},
		{json.Number("1e400"), nil, ErrParam},
		{1.0, 1.0, nil},
		{3, int64(3), nil},
		{float32(0.5), 0.5, nil},
		{math.Inf(1), nil, ErrParam},
		{[]any{json.Number("1"), []any{json.Number("2.5")}}, []any{int64(1), []any{2.5}}, nil},
		{map[string]any{"a": map[string]any{"b": json.Number("3")}}, map[string]any{"a": map[string]any{"b": int64(3)}}, nil},
		{[]string{"a"}, []any{"a"}, nil},
		{struct{}{}, nil, ErrParam},
		{[]any{struct{}{}}, nil, ErrParam},
	}
	for _, tc := range tests {
		got, err := Normalize(tc.in)
		if !errors.Is(err, tc.err) || (tc.err == nil && !reflect.DeepEqual(got, tc.want)) {
			t.Errorf("Normalize(%#v) = %#v, %v; want %#v, %v", tc.in, got, err, tc.want, tc.err)
		}
	}

	// Nothing to change: the same list comes back, not a copy.
	l := []any{int64(1), "a", []any{2.5}}
	got, _ := Normalize(l)
	if &got.([]any)[0] != &l[0] {
		t.Error("Normalize copied a list that needed no change")
	}
	// Something to change: the caller's list is left alone.
	in := []any{json.Number("1")}
	if _, err := Normalize(in); err != nil || in[0] != json.Number("1") {
		t.Errorf("Normalize changed its input: %#v, %v", in, err)
	}

	ps, err := NormalizeParams([]any{json.Number("1"), "x"})
	if err != nil || !reflect.DeepEqual(ps, []any{int64(1), "x"}) {
		t.Errorf("NormalizeParams = %#v, %v", ps, err)
	}
	if _, err := NormalizeParams([]any{"x", math.NaN()}); !errors.Is(err, ErrParam) {
		t.Errorf("NormalizeParams(NaN) = %v", err)
	}
}

func TestCompareEqual(t *testing.T) {
	tests := []struct {
		a, b  any
		c     int
		ok    bool
		equal bool
	}{
		{int64(1), int64(2), -1, true, false},
		{int64(2), 2.0, 0, true, true},
		{2.5, int64(2), 1, true, false},
		{int64(-3), -2.5, -1, true, false},
		{int64(math.MaxInt64), 9223372036854775807.0, -1, true, false}, // the float is 2^63
		{int64(math.MinInt64), -9223372036854775808.0, 0, true, true},
		{int64(math.MinInt64), -1e19, 1, true, false},
		{int64(1 << 53), float64(1<<53) + 0.0, 0, true, true},
		{int64(1<<53 + 1), float64(1 << 53), 1, true, false},
		{"a", "b", -1, true, false},
		{"é", "e", 1, true, false},
		{false, true, -1, true, false},
		{nil, nil, 0, false, false},
		{nil, int64(1), 0, false, false},
		{"1", int64(1), 0, false, false},
		{math.NaN(), 1.0, 0, false, false},
		{[]any{int64(1)}, []any{1.0}, 0, false, true},
		{[]float32{1, 2}, []any{int64(1), 2.0}, 0, false, true},
		{map[string]any{"a": nil}, map[string]any{"a": nil}, 0, false, true},
		{map[string]any{"a": nil}, map[string]any{"b": nil}, 0, false, false},
	}
	for _, tc := range tests {
		c, ok := Compare(tc.a, tc.b)
		if c != tc.c || ok != tc.ok {
			t.Errorf("Compare(%#v, %#v) = %d, %v; want %d, %v", tc.a, tc.b, c, ok, tc.c, tc.ok)
		}
		if tc.ok {
			if c2, _ := Compare(tc.b, tc.a); c2 != -tc.c {
				t.Errorf("Compare(%#v, %#v) = %d, not the opposite of %d", tc.b, tc.a, c2, tc.c)
			}
		}
		if eq := Equal(tc.a, tc.b); eq != tc.equal {
			t.Errorf("Equal(%#v, %#v) = %v, want %v", tc.a, tc.b, eq, tc.equal)
		}
	}
}

func TestSortCompare(t *testing.T) {
	// Ascending order; each value is after every one before it.
	order := []any{
		nil, false, true, math.NaN(), int64(math.MinInt64), -1.5, int64(0), 0.5, int64(1), 1.5,
		int64(math.MaxInt64), "", "A", "a", "b",
		[]any{}, []any{int64(1)}, []float32{1, 2}, []any{int64(1), "x"}, []any{int64(2)},
		map[string]any{}, map[string]any{"a": int64(1)}, map[string]any{"a": int64(2)}, map[string]any{"b": nil},
	}
	for i := range order {
		for j := range order {
			got := SortCompare(order[i], order[j])
			want := cmp.Compare(int64(i), int64(j))
			if got != want {
				t.Errorf("SortCompare(%#v, %#v) = %d, want %d", order[i], order[j], got, want)
			}
		}
	}
	if SortCompare(int64(2), 2.0) != 0 {
		t.Error("2 and 2.0 do not sort together")
	}
}

func TestTruthy(t *testing.T) {
	for _, v := range []any{nil, false, int64(1), 1.0, "true", []any{true}} {
		if Truthy(v) {
			t.Errorf("Truthy(%#v) = true", v)
		}
	}
	if !Truthy(true) {
		t.Error("Truthy(true) = false")
	}
}

func TestArith(t *testing.T) {
	if v, err := Arith(OpAdd, int64(1), int64(2)); err != nil || v != int64(3) {
		t.Errorf("Arith(1 + 2) = %v, %v", v, err)
	}
	if _, err := Arith(OpMul, "a", int64(2)); !errors.Is(err, ErrType) || err.Error() != "text * int: wrong type" {
		t.Errorf("Arith(text * int) error = %v", err)
	}
}

// A regex with a parameter pattern compiles once per pattern text, and
// concurrent evaluations of one AST agree.
func TestRegexCacheConcurrent(t *testing.T) {
	e, err := ParseExpr(`s ~ $1`)
	if err != nil {
		t.Fatal(err)
	}
	re := e.(*Regex)
	env := testEnv{row: map[string]any{"s": "abc"}, params: []any{"^a"}}
	if v, err := Eval(e, env); err != nil || v != true {
		t.Fatalf("Eval = %v, %v", v, err)
	}
	first := re.re.Load()
	if v, _ := Eval(e, env); v != true || re.re.Load() != first {
		t.Error("the same pattern compiled again")
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			pat, want := "^a", true
			if g%2 == 1 {
				pat, want = "^b", false
			}
			env := testEnv{row: map[string]any{"s": "abc"}, params: []any{pat}}
			for range 200 {
				v, err := Eval(e, env)
				if err != nil || v != want {
					errs <- fmt.Errorf("pattern %s: %v, %v", pat, v, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
