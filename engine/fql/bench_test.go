package fql

import (
	"encoding/json"
	"testing"
)

const (
	benchGet = `get orders select id, status, total, customer.name as name where status in ("open", "paid") and total >= $1 and created > now() - 86400000 order created desc limit 50 lookup items on order_id select sku, qty`
	benchPut = `put orders [{status: "open", total: 12.5, customer: {name: "Ada", city: "Oslo"}, tags: ["new", "web"], created: now()}, {status: "paid", total: $1, customer: {name: "Bob"}, tags: [], created: now() - 1000}]`
)

func BenchmarkParseGet(b *testing.B) {
	b.SetBytes(int64(len(benchGet)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(benchGet); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParsePut(b *testing.B) {
	b.SetBytes(int64(len(benchPut)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(benchPut); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEvalWhere is the per-row cost of the typical get's condition.
func BenchmarkEvalWhere(b *testing.B) {
	where := mustParse(b, benchGet).(*Get).Where
	env := testEnv{
		row:    map[string]any{"status": "paid", "total": 40.0, "created": int64(1_700_000_000_000)},
		params: []any{json.Number("10")},
		now:    1_700_000_100_000,
	}
	params, err := NormalizeParams(env.params)
	if err != nil {
		b.Fatal(err)
	}
	env.params = params
	b.ReportAllocs()
	for b.Loop() {
		v, err := Eval(where, env)
		if err != nil || v != true {
			b.Fatal(v, err)
		}
	}
}

// BenchmarkEvalRegexParam is a ~ whose pattern is a parameter: compiled
// once, then taken from the node's cache.
func BenchmarkEvalRegexParam(b *testing.B) {
	e, err := ParseExpr(`email ~ $1`)
	if err != nil {
		b.Fatal(err)
	}
	env := testEnv{row: map[string]any{"email": "bob@example.com"}, params: []any{`@example\.com$`}}
	b.ReportAllocs()
	for b.Loop() {
		if v, err := Eval(e, env); err != nil || v != true {
			b.Fatal(v, err)
		}
	}
}
