package merge

import (
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/fenec-go/fenec/engine/fql"
)

// rowsOf decodes a JSON array of rows as a node's answer would be.
func rowsOf(tb testing.TB, s string) []map[string]any {
	tb.Helper()
	rows, err := DecodeRows([]byte(s))
	if err != nil {
		tb.Fatalf("rows %s: %v", s, err)
	}
	return rows
}

// ruleOf decodes a merge rule and checks it.
func ruleOf(tb testing.TB, s string) Rule {
	tb.Helper()
	var m Rule
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		tb.Fatalf("rule %s: %v", s, err)
	}
	if err := m.Check(); err != nil {
		tb.Fatalf("rule %s: %v", s, err)
	}
	return m
}

// threeTenants are the reads the merge tests share: b failed.
func threeTenants(tb testing.TB) []Read {
	tb.Helper()
	return []Read{
		{Tenant: "a", Seq: 3, Rows: rowsOf(tb, `[{"s":"paid","t":30},{"s":"paid","t":10},{"s":"open","t":5}]`)},
		{Tenant: "b", Err: errors.New("answered 404: unknown collection")},
		{Tenant: "c", Seq: 7, Rows: rowsOf(tb, `[{"s":"paid","t":20.5},{"s":"open","t":null},{"s":"void","t":1}]`)},
		{Tenant: "d", Seq: 2, Rows: rowsOf(tb, `[{"s":"paid","t":30},{"s":"open","t":7}]`)},
	}
}

func encodeRows(tb testing.TB, rows []map[string]any) string {
	tb.Helper()
	b, err := json.Marshal(rows)
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}

func TestMergeRules(t *testing.T) {
	tests := []struct {
		name, rule, want string
	}{
		{"concat", `{"concat": true}`,
			`[{"_tenant":"a","s":"paid","t":30},{"_tenant":"a","s":"paid","t":10},{"_tenant":"a","s":"open","t":5},` +
				`{"_tenant":"c","s":"paid","t":20.5},{"_tenant":"c","s":"open","t":null},{"_tenant":"c","s":"void","t":1},` +
				`{"_tenant":"d","s":"paid","t":30},{"_tenant":"d","s":"open","t":7}]`},
		// Ties (30 on a and d) go to the tenant named first.
		{"order desc limit", `{"order": [{"field": "s", "desc": true}, {"field": "t", "desc": true}], "limit": 5}`,
			`[{"_tenant":"c","s":"void","t":1},{"_tenant":"a","s":"paid","t":30},{"_tenant":"d","s":"paid","t":30},` +
				`{"_tenant":"c","s":"paid","t":20.5},{"_tenant":"a","s":"paid","t":10}]`},
		{"order limit 0", `{"order": [{"field": "s", "desc": true}], "limit": 0}`, `[]`},
		{"group", `{"group": ["s"], "sum": ["t"], "count": "n", "min": ["t"], "max": ["t"]}`,
			`[{"_tenants":["a","c","d"],"max":{"t":7},"min":{"t":5},"n":3,"s":"open","sum":{"t":12}},` +
				`{"_tenants":["a","c","d"],"max":{"t":30},"min":{"t":10},"n":4,"s":"paid","sum":{"t":90.5}},` +
				`{"_tenants":["c"],"max":{"t":1},"min":{"t":1},"n":1,"s":"void","sum":{"t":1}}]`},
		{"group over all", `{"group": [], "count": "n", "sum": ["t", "none"]}`,
			`[{"_tenants":["a","c","d"],"n":8,"sum":{"none":null,"t":103.5}}]`},
		{"group by tenant", `{"group": ["_tenant"], "count": "n"}`,
			`[{"_tenant":"a","_tenants":["a"],"n":3},{"_tenant":"c","_tenants":["c"],"n":3},{"_tenant":"d","_tenants":["d"],"n":2}]`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			reads := threeTenants(t)
			if strings.HasPrefix(tc.name, "order") {
				// Each tenant's rows in the rule's order, as the query would give them.
				reads[2].Rows = rowsOf(t, `[{"s":"void","t":1},{"s":"paid","t":20.5},{"s":"open","t":null}]`)
				reads[3].Rows = rowsOf(t, `[{"s":"paid","t":30},{"s":"open","t":7}]`)
			}
			ans, err := Answer(ruleOf(t, tc.rule), reads)
			if err != nil {
				t.Fatal(err)
			}
			if got := encodeRows(t, ans.Rows); got != tc.want {
				t.Fatalf("rows\n got %s\nwant %s", got, tc.want)
			}
			if ans.Tenants["b"].Error == "" || ans.Tenants["b"].Seq != nil {
				t.Fatalf("failed tenant listed as %+v", ans.Tenants["b"])
			}
			if s := ans.Tenants["c"].Seq; s == nil || *s != 7 {
				t.Fatalf("c listed as %+v", ans.Tenants["c"])
			}
		})
	}
}

func TestMergeOrderRefusesRowsOutOfOrder(t *testing.T) {
	reads := threeTenants(t)
	ans, err := Answer(ruleOf(t, `{"order": [{"field": "t"}]}`), reads)
	if err != nil {
		t.Fatal(err)
	}
	// a is descending and c has 20.5 before null: both listed as failed;
	// d (30 then 7) too. Nothing merged is out of order.
	for _, name := range []string{"a", "c", "d"} {
		if e := ans.Tenants[name].Error; !strings.Contains(e, ErrOutOfOrder.Error()) {
			t.Fatalf("%s listed as %+v", name, ans.Tenants[name])
		}
	}
	if len(ans.Rows) != 0 {
		t.Fatalf("rows %v", ans.Rows)
	}
}

func TestMergeBounds(t *testing.T) {
	var sb strings.Builder
	sb.WriteString("[")
	for i := range MaxRows {
		if i > 0 {
			sb.WriteString(",")
		}
		sb.WriteString(`{"i":` + strconv.Itoa(i) + `}`)
	}
	sb.WriteString("]")
	big := sb.String()
	reads := func() []Read {
		return []Read{{Tenant: "a", Rows: rowsOf(t, big)}, {Tenant: "b", Rows: rowsOf(t, `[{"i":-1}]`)}}
	}
	for _, rule := range []string{`{"concat": true}`, `{"order": [{"field": "i"}]}`, `{"group": ["i"], "count": "n"}`} {
		if _, err := Answer(ruleOf(t, rule), reads()); !errors.Is(err, ErrTooManyRows) {
			t.Fatalf("%s past the bound: %v", rule, err)
		}
	}
	ans, err := Answer(ruleOf(t, `{"order": [{"field": "i"}], "limit": 3}`), reads())
	if err != nil {
		t.Fatal(err)
	}
	if got := encodeRows(t, ans.Rows); got != `[{"_tenant":"b","i":-1},{"_tenant":"a","i":0},{"_tenant":"a","i":1}]` {
		t.Fatalf("limited: %s", got)
	}
	// At the bound exactly: answered whole.
	ans, err = Answer(ruleOf(t, `{"concat": true}`), reads()[:1])
	if err != nil || len(ans.Rows) != MaxRows {
		t.Fatalf("at the bound: %d rows, %v", len(ans.Rows), err)
	}
}

func TestMergeRuleCheck(t *testing.T) {
	for _, rule := range []string{
		`{}`,
		`{"concat": true, "order": [{"field": "a"}]}`,
		`{"concat": true, "limit": 3}`,
		`{"order": [{"field": "a"}], "limit": 10001}`,
		`{"order": [{"field": "a"}], "limit": -1}`,
		`{"order": [{"field": ""}]}`,
		`{"concat": true, "sum": ["a"]}`,
		`{"group": ["sum"]}`,
		`{"group": ["n"], "count": "n"}`,
		`{"group": ["a"], "min": [""]}`,
	} {
		var m Rule
		if err := json.Unmarshal([]byte(rule), &m); err != nil {
			t.Fatal(err)
		}
		if err := m.Check(); !errors.Is(err, ErrBadRule) {
			t.Fatalf("%s: %v", rule, err)
		}
	}
}

// TestCompareValues: values as DecodeRows gives them compare by the
// engine's order.
func TestCompareValues(t *testing.T) {
	n := func(s string) any { return json.Number(s) }
	compareValues := func(a, b any) int {
		return fql.SortCompare(norm(t, a), norm(t, b))
	}
	tests := []struct {
		a, b any
		want int
	}{
		{nil, false, -1},
		{false, true, -1},
		{true, n("-5"), -1},
		{n("2"), n("10"), -1},
		{n("2.5"), n("2"), 1},
		{n("1"), n("1.0"), 0},
		{n("9007199254740993"), n("9007199254740992"), 1}, // exact as integers
		{n("1e3"), "a", -1},
		{"b", "ab", 1},
		{"z", []any{"a"}, -1},
		{nil, nil, 0},
	}
	for _, tc := range tests {
		if got := compareValues(tc.a, tc.b); sign(got) != tc.want {
			t.Errorf("compare(%v, %v) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
		if got := compareValues(tc.b, tc.a); sign(got) != -tc.want {
			t.Errorf("compare(%v, %v) = %d, want %d", tc.b, tc.a, got, -tc.want)
		}
	}
}

// norm is v as DecodeRows would give it.
func norm(tb testing.TB, v any) any {
	tb.Helper()
	n, err := fql.Normalize(v)
	if err != nil {
		tb.Fatal(err)
	}
	return n
}

func sign(x int) int {
	switch {
	case x < 0:
		return -1
	case x > 0:
		return 1
	}
	return 0
}

func TestGroupKeyAndSum(t *testing.T) {
	key := func(vals ...any) string {
		for i := range vals {
			vals[i] = norm(t, vals[i])
		}
		return groupKey(vals)
	}
	if key(json.Number("1"), "x") != key(json.Number("1.0"), "x") {
		t.Fatal("1 and 1.0 are two groups")
	}
	if key(json.Number("9223372036854775807")) == key(json.Number("9223372036854775808")) {
		t.Fatal("the largest int64 and 2^63 share a group")
	}
	if key([]any{json.Number("1"), map[string]any{"b": nil, "a": "x"}}) != key([]any{json.Number("1.0"), map[string]any{"a": "x", "b": nil}}) {
		t.Fatal("equal lists are two groups")
	}
	if key("1") == key(json.Number("1")) || key(nil) == key("z") || key([]any{"a", "b"}) == key([]any{"a"}, "b") {
		t.Fatal("values of different kinds share a group")
	}
	var s sum
	for _, v := range []any{json.Number(strconv.FormatInt(math.MaxInt64, 10)), nil, "x", json.Number("1")} {
		s.add(norm(t, v))
	}
	if f, ok := s.value().(float64); !ok || f != float64(math.MaxInt64)+1 {
		t.Fatalf("overflowing sum %v", s.value())
	}
	var exact sum
	exact.add(norm(t, json.Number("9007199254740993")))
	exact.add(norm(t, json.Number("-1")))
	if exact.value() != int64(9007199254740992) {
		t.Fatalf("integer sum %v", exact.value())
	}
}

func TestDecodeRowsRefusesOtherAnswers(t *testing.T) {
	for _, body := range []string{`{"count": 3}`, `{"affected": 1}`, `[1, 2]`, `[{"a": 1}, null]`, `null`, `not json`, `[{"a": 1e400}]`} {
		if _, err := DecodeRows([]byte(body)); !errors.Is(err, ErrNotRows) {
			t.Fatalf("%s: %v", body, err)
		}
	}
}

// benchReads is tenants reads of rows rows each, ordered by i, with a
// status among five.
func benchReads(tb testing.TB, tenants, rows int) []Read {
	tb.Helper()
	reads := make([]Read, tenants)
	for t := range reads {
		var sb strings.Builder
		sb.WriteString("[")
		for i := range rows {
			if i > 0 {
				sb.WriteString(",")
			}
			sb.WriteString(`{"i":` + strconv.Itoa(i*tenants+t) + `,"status":"s` + strconv.Itoa(i%5) + `","total":` + strconv.Itoa(i) + `.5}`)
		}
		sb.WriteString("]")
		reads[t] = Read{Tenant: "t" + strconv.Itoa(t), Rows: rowsOf(tb, sb.String())}
	}
	return reads
}

// BenchmarkMerge times each rule over 16 tenants of 500 rows (the rows
// decoded once; a merge only adds _tenant to them).
func BenchmarkMerge(b *testing.B) {
	for _, rule := range []string{
		`{"concat": true}`,
		`{"order": [{"field": "i"}], "limit": 100}`,
		`{"order": [{"field": "i"}]}`,
		`{"group": ["status"], "count": "n", "sum": ["total"], "min": ["total"], "max": ["total"]}`,
	} {
		m := ruleOf(b, rule)
		reads := benchReads(b, 16, 500)
		b.Run(rule, func(b *testing.B) {
			for b.Loop() {
				if _, err := Answer(m, reads); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestMergeOrderIsTheEngines: the merge orders values as the engine's
// order does (lists element by element and shorter first, numbers int
// and float together exactly, text by its UTF-8 bytes, null or missing
// first), so rows each tenant's node ordered are never refused as out of
// order, and groups, minimums and maximums agree with it too.
func TestMergeOrderIsTheEngines(t *testing.T) {
	// Each tenant's rows as its node writes them, in the engine's order.
	a := `[{"v":null},{"v":1},{"v":2.0},{"v":2.5},{"v":"Z"},{"v":"é"},{"v":[2]},{"v":[10]},{"v":[10,null]}]`
	b := `[{"w":0},{"v":false},{"v":2},{"v":9007199254740993},{"v":"a"},{"v":"Ω"},{"v":[]},{"v":[2,"x"]},{"v":{"a":[1]}}]`
	reversed := func(s string) string {
		rows := rowsOf(t, s)
		slices.Reverse(rows)
		return encodeRows(t, rows)
	}
	for _, tc := range []struct {
		name, rule, a, b, want string
	}{
		{"asc", `{"order": [{"field": "v"}]}`, a, b,
			`a:null b:- b:false a:1 a:2 b:2 a:2.5 b:9007199254740993 a:"Z" b:"a" a:"é" b:"Ω" ` +
				`b:[] a:[2] b:[2,"x"] a:[10] a:[10,null] b:{"a":[1]}`},
		{"desc", `{"order": [{"field": "v", "desc": true}]}`, reversed(a), reversed(b),
			`b:{"a":[1]} a:[10,null] a:[10] b:[2,"x"] a:[2] b:[] b:"Ω" a:"é" b:"a" a:"Z" ` +
				`b:9007199254740993 a:2.5 a:2 b:2 a:1 b:false a:null b:-`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reads := []Read{{Tenant: "a", Rows: rowsOf(t, tc.a)}, {Tenant: "b", Rows: rowsOf(t, tc.b)}}
			ans, err := Answer(ruleOf(t, tc.rule), reads)
			if err != nil {
				t.Fatal(err)
			}
			for _, name := range []string{"a", "b"} {
				if e := ans.Tenants[name].Error; e != "" {
					t.Fatalf("%s refused: %s", name, e)
				}
			}
			var got []string
			for _, row := range ans.Rows {
				v := "-"
				if x, ok := row["v"]; ok {
					j, err := json.Marshal(x)
					if err != nil {
						t.Fatal(err)
					}
					v = string(j)
				}
				got = append(got, row["_tenant"].(string)+":"+v)
			}
			if g := strings.Join(got, " "); g != tc.want {
				t.Fatalf("merged\n got %s\nwant %s", g, tc.want)
			}
		})
	}
	t.Run("group", func(t *testing.T) {
		reads := []Read{
			{Tenant: "a", Rows: rowsOf(t, `[{"g":[10],"v":[2]},{"g":[2.0],"v":[10]},{"g":null,"v":"é"}]`)},
			{Tenant: "b", Rows: rowsOf(t, `[{"g":[2],"v":[1,"x"]},{"v":"Ω"},{"g":"Ω","v":1.5},{"g":"é","v":2}]`)},
		}
		ans, err := Answer(ruleOf(t, `{"group": ["g"], "count": "n", "min": ["v"], "max": ["v"]}`), reads)
		if err != nil {
			t.Fatal(err)
		}
		want := `[{"_tenants":["a","b"],"g":null,"max":{"v":"Ω"},"min":{"v":"é"},"n":2},` +
			`{"_tenants":["b"],"g":"é","max":{"v":2},"min":{"v":2},"n":1},` +
			`{"_tenants":["b"],"g":"Ω","max":{"v":1.5},"min":{"v":1.5},"n":1},` +
			`{"_tenants":["a","b"],"g":[2],"max":{"v":[10]},"min":{"v":[1,"x"]},"n":2},` +
			`{"_tenants":["a"],"g":[10],"max":{"v":[2]},"min":{"v":[2]},"n":1}]`
		if got := encodeRows(t, ans.Rows); got != want {
			t.Fatalf("groups\n got %s\nwant %s", got, want)
		}
	})
}
