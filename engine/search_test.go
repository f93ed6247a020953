package engine

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/fenec-go/fenec/engine/fql"
)

func TestSearch(t *testing.T) {
	db, _ := newTestDB(t, Options{NoSweep: true})
	mustExec(t, db, "create collection d (body text @text, kind text, v vector<2> @hnsw(l2))")
	mustExec(t, db, `put d [
		{body: "the quick brown fox", kind: "a", v: [0, 0]},
		{body: "the lazy dog", kind: "b", v: [1, 0]},
		{body: "quick quick fox jumps", kind: "a", v: [0, 1]},
		{body: "nothing here", kind: "b", v: [5, 5]}]`)
	ids := func(q string) []int64 {
		t.Helper()
		res, _, err := db.Exec(t.Context(), Statement{Query: q})
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		var out []int64
		prev := 0.0
		for i, r := range res.Rows {
			s, ok := r["_score"].(float64)
			if !ok {
				t.Fatalf("%s: row without _score: %v", q, r)
			}
			if i > 0 && s > prev {
				t.Fatalf("%s: scores not best first: %v", q, res.Rows)
			}
			prev = s
			out = append(out, r["id"].(int64))
		}
		return out
	}
	eq := func(q string, want ...int64) {
		t.Helper()
		got := ids(q)
		if len(got) != len(want) {
			t.Fatalf("%s: got %v want %v", q, got, want)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("%s: got %v want %v", q, got, want)
			}
		}
	}
	eq("get d match body 'quick fox'", 3, 1)
	eq("get d match body 'quick fox' limit 1", 3)
	eq("get d match body 'fox' where kind = 'b'")
	eq("get d match body 'the' where kind = 'b'", 2)
	eq("get d near v [0.9, 0.1] exact limit 2", 2, 1)
	eq("get d near v [0.9, 0.1] limit 2", 2, 1)
	eq("get d near v [0.9, 0.1] where kind = 'a' limit 3", 1, 3)
	eq("get d select id, _score near v [0, 0.9] limit 2 offset 1", 1, 2)
	// Fused with k=60: text ranks 3, 1; vectors rank 2, 1, 3, 4. Doc 3
	// scores 1/61+1/63, doc 1 2/62 (a hair less), doc 2 1/61, doc 4 1/64.
	eq("get d match body 'quick fox' near v [0.9, 0.1] fuse", 3, 1, 2, 4)
	eq("get d match body 'quick fox' near v [0.9, 0.1] fuse k=1 limit 2", 3, 1)
	if got := mustExec(t, db, "get d select id match body 'fox' order id desc"); !jsonEq(t, got,
		`[{"id":3,"_score":`+scoreOf(t, db, 3)+`},{"id":1,"_score":`+scoreOf(t, db, 1)+`}]`) {
		t.Fatalf("order over match: %s", got)
	}
	// Writes keep the indexes in step.
	mustExec(t, db, "set d {body: 'fox fox fox'} where id = 2")
	mustExec(t, db, "del d where id = 3")
	eq("get d match body 'fox'", 2, 1)
	mustExec(t, db, "set d {v: [0.9, 0.1]} where id = 4")
	eq("get d near v [0.9, 0.1] limit 1", 4)

	if err := execErr(t, db, "get d near v [1, 2, 3] limit 1"); !errors.Is(err, ErrType) {
		t.Fatalf("wrong dimension: %v", err)
	}
	if err := execErr(t, db, "get d match kind 'a'"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("match without @text: %v", err)
	}
	if err := execErr(t, db, "get d match body $1", 5); !errors.Is(err, ErrType) {
		t.Fatalf("match a number: %v", err)
	}
	// An index made later is built over the rows there.
	mustExec(t, db, "create index on d (kind) @text")
	eq("get d match kind 'b'", 2, 4)
}

func scoreOf(t *testing.T, db *DB, id int64) string {
	t.Helper()
	res, _, err := db.Exec(t.Context(), Statement{Query: "get d select id match body 'fox'"})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res.Rows {
		if r["id"] == id {
			return string(appendJSONValue(nil, r["_score"]))
		}
	}
	t.Fatalf("id %d not found", id)
	return ""
}

// near with no limit answers at most 10 000 rows: finding more is refused
// (ErrTooMany), never cut short; a where narrowing it below that answers
// whole, as does a limit.
func TestNearPastMaxRowsIsRefused(t *testing.T) {
	db, _ := newTestDB(t, Options{NoSweep: true})
	mustExec(t, db, "create collection d (kind int, v vector<2> @hnsw(l2, m=4, ef_construction=8))")
	docs := make([]any, fql.MaxRows+1)
	for i := range docs {
		docs[i] = map[string]any{"kind": int64(i % 2), "v": []any{float64(i % 97), float64(i % 89)}}
	}
	if _, _, err := db.Exec(t.Context(), Statement{Query: "put d $1", Params: []any{docs}}); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"get d near v [1, 1] exact", "get d near v [1, 1] exact count"} {
		if err := execErr(t, db, q); !errors.Is(err, ErrTooMany) {
			t.Errorf("%s on %d rows: %v, want ErrTooMany", q, len(docs), err)
		}
	}
	if got := mustExec(t, db, "get d near v [1, 1] exact where kind = 1 count"); !jsonEq(t, got, `{"count":5000}`) {
		t.Errorf("near where kind = 1 count: %s", got)
	}
	res, _, err := db.Exec(t.Context(), Statement{Query: "get d near v [1, 1] exact limit 10000"})
	if err != nil || len(res.Rows) != fql.MaxRows {
		t.Errorf("near limit 10000: %v, %d rows", err, len(res.Rows))
	}
}

// A count answers how many rows match before limit and offset, for match
// and near as for a plain get.
func TestSearchCountIgnoresLimit(t *testing.T) {
	db, _ := newTestDB(t, Options{NoSweep: true})
	mustExec(t, db, "create collection d (body text @text, v vector<2> @hnsw(l2))")
	mustExec(t, db, `put d [{body: "quick fox", v: [0, 0]}, {body: "lazy fox", v: [1, 0]}, {body: "fox fox", v: [0, 1]}, {body: "dog"}]`)
	for q, want := range map[string]string{
		"get d limit 1 count":                           `{"count":4}`,
		"get d match body 'fox' limit 1 count":          `{"count":3}`,
		"get d match body 'fox' limit 1 offset 1 count": `{"count":3}`,
		"get d near v [0, 0] limit 1 count":             `{"count":3}`,
		"get d near v [0, 0] exact limit 2 count":       `{"count":3}`,
	} {
		if got := mustExec(t, db, q); !jsonEq(t, got, want) {
			t.Errorf("%s: %s, want %s", q, got, want)
		}
	}
}

// A near with no where asks the graph with no filter; it answers as one
// whose where keeps every row, never a deleted row, and a collection with
// a TTL still has its expired rows left out.
func TestNearWithoutWhere(t *testing.T) {
	clock := newFakeClock(t0)
	db, _ := newTestDB(t, Options{NoSweep: true, Now: clock.Now})
	mustExec(t, db, "create collection d (n int, v vector<2> @hnsw(l2, m=4, ef_construction=16))")
	mustExec(t, db, "create collection e (n int, at timestamp @ttl(10s), v vector<2> @hnsw(l2, m=4, ef_construction=16))")
	var docs, expiring []any
	for i := range 300 {
		v := []any{float64(i % 17), float64(i % 13)}
		docs = append(docs, map[string]any{"n": int64(i), "v": v})
		at := t0 + 60_000
		if i%2 == 0 {
			at = t0 // expires at t0 + 10 s
		}
		expiring = append(expiring, map[string]any{"n": int64(i), "at": at, "v": v})
	}
	for coll, rows := range map[string][]any{"d": docs, "e": expiring} {
		if _, _, err := db.Exec(t.Context(), Statement{Query: "put " + coll + " $1", Params: []any{rows}}); err != nil {
			t.Fatal(err)
		}
	}
	mustExec(t, db, "del d where n < 150")
	clock.Add(10_000)
	for _, coll := range []string{"d", "e"} {
		for _, q := range []string{"[3, 4]", "[0, 0]", "[16, 12]"} {
			plain := mustExec(t, db, "get "+coll+" select n near v "+q+" limit 20")
			kept := mustExec(t, db, "get "+coll+" select n near v "+q+" where n >= 0 limit 20")
			if plain != kept {
				t.Errorf("%s near %s: no where %s, a where keeping all %s", coll, q, plain, kept)
			}
			var rows []struct{ N int64 }
			if err := json.Unmarshal([]byte(plain), &rows); err != nil || len(rows) != 20 {
				t.Fatalf("%s near %s: %s (%v)", coll, q, plain, err)
			}
			for _, r := range rows {
				if coll == "d" && r.N < 150 || coll == "e" && r.N%2 == 0 {
					t.Errorf("%s near %s answered n %d, deleted or expired", coll, q, r.N)
				}
			}
		}
	}
}
