package engine

import (
	"context"
	"errors"
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
