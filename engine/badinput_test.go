package engine

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
)

func nested(depth int) any {
	var v any = int64(1)
	for range depth {
		v = map[string]any{"a": v}
	}
	return v
}

func TestBadInputChangesNothing(t *testing.T) {
	db, _ := newTestDB(t, Options{NoSweep: true})
	mustExec(t, db, "create collection a (s text @unique, n int, m json, l [text], v vector<3>)")
	mustExec(t, db, "put a [{s: 'x', n: 1}, {s: 'y', n: 2}]")
	before := stateOf(t, db, "a")
	deep := strings.Repeat("(", 200) + "n = 1" + strings.Repeat(")", 200)
	cases := []struct {
		q      string
		params []any
	}{
		{q: ""},
		{q: "put"},
		{q: "put a {s: 'z'"},
		{q: "get a where n = = 1"},
		{q: "frobnicate a"},
		{q: "get a where " + deep},
		{q: "put a {s: '" + strings.Repeat("x", 2<<20) + "'}"},
		{q: "put a {n: 99999999999999999999999}"},
		{q: "get a where s = '\xff\xfe'"},
		{q: "put a {s: $1}", params: []any{"bad \xff utf-8"}},
		{q: "put a {m: $1}", params: []any{map[string]any{"k\xff": int64(1)}}},
		{q: "put a {m: $1}", params: []any{nested(100)}},
		{q: "put a {l: $1}", params: []any{[]any{"ok", "\xc3"}}},
		{q: "put a {v: [1, 2]}"},
		{q: "put a {v: [1, 2, 'x']}"},
		{q: "put a {n: 'one'}"},
		{q: "put a {s: 'q', zz: 1}"},
		{q: "put a {id: -4, s: 'q'}"},
		{q: "put a {id: 'x', s: 'q'}"},
		{q: "put a 5"},
		{q: "put a [{s: 'ok1'}, 7]"},
		{q: "put a $1", params: []any{"text"}},
		{q: "put a [{s: 'ok2'}, {s: 'ok2'}]"},
		{q: "set a {n: n / 0}"},
		{q: "set a {n: 9223372036854775807 + n}"},
		{q: "get a limit 9000 offset 2000"},
		{q: "put a {s: $3}", params: []any{"x"}},
		{q: "create collection b (x int @hnsw(cosine))"},
		{q: "create collection b (x text @ttl(1s))"},
		{q: "create collection b (v vector<0>)"},
		{q: "create index on a (m) @sorted"},
		{q: "create index on a (nope) @hash"},
		{q: "get a where s ~ $1", params: []any{"("}},
	}
	for _, c := range cases {
		_, _, err := db.Exec(context.Background(), Statement{Query: c.q, Params: c.params})
		if err == nil {
			t.Errorf("%.60q: no error", c.q)
			continue
		}
		var pe *ParseError
		if !errors.As(err, &pe) && !errors.Is(err, ErrType) && !errors.Is(err, ErrInvalid) &&
			!errors.Is(err, ErrUnknownField) && !errors.Is(err, ErrTaken) {
			t.Errorf("%.60q: unclassified error %v", c.q, err)
		}
		if len(err.Error()) > 400 {
			t.Errorf("%.60q: error is %d bytes long", c.q, len(err.Error()))
		}
		if got := stateOf(t, db, "a"); got != before {
			t.Fatalf("%.60q changed the tenant: %+v vs %+v", c.q, got, before)
		}
	}
}

func FuzzExec(f *testing.F) {
	for _, s := range []string{
		"get a where n > 1 order n desc limit 2",
		"put a {s: 'z', n: 3, m: {k: [1, 2]}}",
		"set a {n: n + 1} where s = 'x' returning *",
		"del a where n in (1, 2) require 2",
		"get a select n, count(*) group n",
		"get a select s lookup b on aid",
		"create index on a (n) @sorted",
		"insert a [{s: 'x'}]",
		"get a match t 'hello' limit 3",
		"get a near v [1, 0, 0] limit 2",
		"drop collection b",
	} {
		f.Add(s)
	}
	db, _ := newTestDB(f, Options{NoSweep: true})
	mustExec(f, db, "create collection a (s text @unique, n int @sorted, m json, t text @text, v vector<3> @hnsw(cosine))")
	mustExec(f, db, "create collection b (aid int, x float)")
	mustExec(f, db, "put a [{s: 'x', n: 1, t: 'hello world', v: [1, 0, 0]}, {s: 'y', n: 2, v: [0, 1, 0]}]")
	mustExec(f, db, "put b [{aid: 1, x: 0.5}, {aid: 2}]")
	f.Fuzz(func(t *testing.T, q string) {
		before := stateOf(t, db, collsOf(db)...)
		res, _, err := db.Exec(context.Background(), Statement{Query: q, Params: []any{int64(1), "x"}})
		if err != nil {
			if after := stateOf(t, db, collsOf(db)...); after != before {
				t.Fatalf("%q failed (%v) but changed the tenant: %+v vs %+v", q, err, after, before)
			}
			return
		}
		_ = res.JSON()
	})
}

// collsOf names db's collections, in order.
func collsOf(db *DB) []string {
	db.mu.RLock()
	defer db.mu.RUnlock()
	names := make([]string, 0, len(db.st.colls))
	for n := range db.st.colls {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
