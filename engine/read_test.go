package engine

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// Every statement says what it does from its parse, never from its first
// word: a leading comment-free keyword in another case, a write hidden
// behind spaces, text that does not parse.
func TestKind(t *testing.T) {
	db, _ := newTestDB(t, Options{})
	cases := []struct {
		q        string
		verb     string
		readOnly bool
	}{
		{"get c", "get", true},
		{"  GET c where n > $1 order n limit 3", "get", true},
		{"get c count", "get", true},
		{"put c {n: 1}", "put", false},
		{"insert c [{n: 1}, $1]", "insert", false},
		{"set c {n: n + 1} where n = 1", "set", false},
		{"\tDel c", "del", false},
		{"create collection c (n int)", "create collection", false},
		{"drop collection if exists c", "drop collection", false},
		{"create index on c (n) @sorted", "create index", false},
	}
	for _, c := range cases {
		got, err := db.Kind(c.q)
		if err != nil {
			t.Fatalf("%q: %v", c.q, err)
		}
		if got.Verb != c.verb || got.ReadOnly != c.readOnly {
			t.Fatalf("%q: %+v, want verb %q read-only %v", c.q, got, c.verb, c.readOnly)
		}
	}
	for _, q := range []string{"getc", "get c; del c", "", "gets c", "get c del c"} {
		var pe *ParseError
		if _, err := db.Kind(q); !errors.As(err, &pe) {
			t.Fatalf("%q: %v, want a parse error", q, err)
		}
	}
}

// Read runs a get and refuses every other statement before it runs:
// nothing it was given lands, the seq stays, the rows stay.
func TestReadRunsReadsOnly(t *testing.T) {
	db, _ := newTestDB(t, Options{})
	mustExec(t, db, "create collection c (n int @sorted)")
	mustExec(t, db, "put c [{n: 1}, {n: 2}]")
	seq := db.Seq()
	ctx := context.Background()

	res, at, err := db.Read(ctx, Statement{Query: "get c where n > $1 select n", Params: []any{1.0}})
	if err != nil || at != seq || !jsonEq(t, string(res.JSON()), `[{"n": 2}]`) {
		t.Fatalf("read: %v at %d: %v", res, at, err)
	}
	for _, q := range []string{
		"del c", "set c {n: 9}", "put c {n: 3}", "insert c {n: 4}",
		"drop collection c", "create collection d (n int)", "create index on c (n) @hash",
		"del c where n = 1 returning *",
	} {
		_, _, err := db.Read(ctx, Statement{Query: q})
		if !errors.Is(err, ErrNotRead) {
			t.Fatalf("%q: %v, want ErrNotRead", q, err)
		}
	}
	if db.Seq() != seq {
		t.Fatalf("seq %d after refused writes, was %d", db.Seq(), seq)
	}
	if got := mustExec(t, db, "get c select n order n"); !jsonEq(t, got, `[{"n": 1}, {"n": 2}]`) {
		t.Fatalf("rows after refused writes: %s", got)
	}
}

// A where clause comparing a declared field with a value of a kind it can
// never equal or order against is refused, naming the field, its type and
// the value, rather than answering no rows: in get, count, a search's
// filter, update and delete alike, with a literal or a parameter. A
// number of the other kind, null, a json field and a comparison the field
// can answer still run.
func TestWhereComparesAgainstTheFieldsType(t *testing.T) {
	db, _ := newTestDB(t, Options{})
	mustExec(t, db, `create collection c (n int @sorted, x float, name text, ok bool, at timestamp, tags [text], ns [int], j json, v vector<2> @hnsw(l2))`)
	mustExec(t, db, `insert c {n: 5, x: 1.5, name: "5", ok: true, at: 1000, tags: ["a"], ns: [1], j: {"k": "abc"}, v: [1, 0]}`)
	refused := []struct{ q, field, says string }{
		{`get c where n > "abc"`, "n", `"abc" is text`},
		{`get c where n = $1`, "n", `"abc" is text`},
		{`get c where "abc" < n`, "n", `"abc" is text`},
		{`get c where n in (1, "abc")`, "n", `"abc" is text`},
		{`get c where name = 5`, "name", `quote it: "5"`},
		{`get c where ok = "true"`, "ok", `"true" is text`},
		{`get c where at >= "2026-01-01"`, "at", `is text`},
		{`get c where x != true`, "x", `true is bool`},
		{`get c where tags has 5`, "tags", `5 is int`},
		{`get c where ns has "1"`, "ns", `"1" is text`},
		{`get c where n > 1 and not (name = 5)`, "name", `5 is int`},
		{`get c where n > "abc" count`, "n", `is text`},
		{`get c near v [1, 0] where n = "abc" limit 1`, "n", `is text`},
		{`set c {x: 2} where n = "abc"`, "n", `is text`},
		{`del c where name = 5`, "name", `is int`},
	}
	for _, r := range refused {
		err := execErr(t, db, r.q, "abc")
		if !errors.Is(err, ErrType) || !strings.Contains(err.Error(), "field "+r.field+" is ") || !strings.Contains(err.Error(), r.says) {
			t.Errorf("%s: got %v, want ErrType naming field %s and saying %s", r.q, err, r.field, r.says)
		}
	}
	kept := map[string]string{
		`get c where n > 4.5 select n`:             `[{"n":5}]`,
		`get c where x = 1.5 select n`:             `[{"n":5}]`,
		`get c where x < 2 select n`:               `[{"n":5}]`,
		`get c where name = "5" select n`:          `[{"n":5}]`,
		`get c where n = null select n`:            `[]`,
		`get c where n in (5, null) select n`:      `[{"n":5}]`,
		`get c where j.k = "abc" select n`:         `[{"n":5}]`,
		`get c where j = 5 select n`:               `[]`,
		`get c where tags has "a" select n`:        `[{"n":5}]`,
		`get c where tags in ("a", 5) select n`:    `[]`,
		`get c where ns has 1 select n`:            `[{"n":5}]`,
		`get c where at > 999 select n`:            `[{"n":5}]`,
		`get c where ok = true and n = 5 select n`: `[{"n":5}]`,
		`get c where id = 1 select n`:              `[{"n":5}]`,
	}
	for q, want := range kept {
		if got := mustExec(t, db, q); !jsonEq(t, got, want) {
			t.Errorf("%s: %s, want %s", q, got, want)
		}
	}
}
