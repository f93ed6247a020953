package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
)

// textBuilt says whether field name of collection coll has its text index
// built.
func textBuilt(tb testing.TB, db *DB, coll, name string) bool {
	tb.Helper()
	db.mu.RLock()
	defer db.mu.RUnlock()
	c := db.st.colls[coll]
	ti, ok := c.search[c.sch.field(name)].(*textIndex)
	if !ok {
		tb.Fatalf("%s.%s has no text index", coll, name)
	}
	return ti.built() != nil
}

// An @text index is built from the documents on its first match, not as
// the tenant opens: the open decodes no text, writes before the first
// match are in it, writes after it keep it in step, and the answers are
// those of an index kept in step from the start.
func TestTextIndexBuiltOnFirstMatch(t *testing.T) {
	db, path := newTestDB(t, Options{NoSweep: true})
	mustExec(t, db, "create collection d (body text @text, kind text)")
	for i := range 300 {
		mustExec(t, db, "put d {body: $1, kind: $2}", fmt.Sprintf("fox %d dog %d", i%7, i%3), fmt.Sprint(i%2))
	}
	const q = "get d select id, _score match body 'fox 3 dog' where kind = '1' limit 20"
	want := mustExec(t, db, q)
	if !textBuilt(t, db, "d", "body") {
		t.Fatal("the match did not build the index")
	}
	mustExec(t, db, "put d {id: 5, body: 'fox 3 fox 3 dog', kind: '1'}")
	mustExec(t, db, "del d where id = 7")
	want2 := mustExec(t, db, q)
	if err := db.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	mustExec(t, db, "put d {id: 9, body: 'dog dog dog', kind: '1'}") // a record after the image
	wantAfter := mustExec(t, db, q)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	db, err := Open(path, Options{NoSweep: true, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if textBuilt(t, db, "d", "body") {
		t.Fatal("the open built the text index")
	}
	before := db.MemoryBytes()
	mustExec(t, db, "put d {id: 11, body: 'fox 3 dog 3 fox', kind: '1'}") // before the first match: not indexed, read by the build
	mustExec(t, db, "del d where id = 9")
	if textBuilt(t, db, "d", "body") {
		t.Fatal("a write built the text index")
	}
	got := mustExec(t, db, q)
	if !textBuilt(t, db, "d", "body") || db.MemoryBytes() <= before {
		t.Fatalf("built %v, memory %d then %d: the build is not counted", textBuilt(t, db, "d", "body"), before, db.MemoryBytes())
	}
	// The same writes on a tenant whose index was built all along.
	ref, _ := newTestDB(t, Options{NoSweep: true})
	mustExec(t, ref, "create collection d (body text @text, kind text)")
	for i := range 300 {
		mustExec(t, ref, "put d {body: $1, kind: $2}", fmt.Sprintf("fox %d dog %d", i%7, i%3), fmt.Sprint(i%2))
	}
	if r := mustExec(t, ref, q); r != want {
		t.Fatalf("reference differs from the first answer:\n%s\n%s", r, want)
	}
	for _, w := range []string{"put d {id: 5, body: 'fox 3 fox 3 dog', kind: '1'}", "del d where id = 7"} {
		mustExec(t, ref, w)
	}
	if r := mustExec(t, ref, q); r != want2 {
		t.Fatalf("after writes: %s, want %s", want2, r)
	}
	mustExec(t, ref, "put d {id: 9, body: 'dog dog dog', kind: '1'}")
	if r := mustExec(t, ref, q); r != wantAfter {
		t.Fatalf("before the reopen: %s, want %s", wantAfter, r)
	}
	for _, w := range []string{"put d {id: 11, body: 'fox 3 dog 3 fox', kind: '1'}", "del d where id = 9"} {
		mustExec(t, ref, w)
	}
	if r := mustExec(t, ref, q); got != r {
		t.Fatalf("reopened, built on first match: %s\nbuilt all along: %s", got, r)
	}
	mustExec(t, db, "put d {id: 13, body: 'fox fox fox 3', kind: '1'}")
	mustExec(t, ref, "put d {id: 13, body: 'fox fox fox 3', kind: '1'}")
	if a, b := mustExec(t, db, q), mustExec(t, ref, q); a != b {
		t.Fatalf("a write after the build: %s, want %s", a, b)
	}
}

// A first match whose statement stops while the index is being built
// keeps nothing half built: it answers ErrStopped, and the next match
// builds it whole.
func TestTextIndexBuildStopped(t *testing.T) {
	db, path := newTestDB(t, Options{NoSweep: true})
	mustExec(t, db, "create collection d (body text @text)")
	docs := make([]any, 0, 2000)
	for i := range 2000 {
		docs = append(docs, map[string]any{"body": fmt.Sprintf("word%d common", i)})
	}
	mustExec(t, db, "put d $1", docs)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := Open(path, Options{NoSweep: true, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, _, err = db.Exec(ctx, Statement{Query: "get d match body 'word1999'"})
	if !errors.Is(err, ErrStopped) {
		t.Fatalf("match with its context ended: %v, want ErrStopped", err)
	}
	if textBuilt(t, db, "d", "body") {
		t.Fatal("a stopped build kept its index")
	}
	if got := matchIDs(t, db, "get d match body 'word1999'"); fmt.Sprint(got) != "[2000]" {
		t.Fatalf("match after a stopped build: %v", got)
	}
	if got := matchIDs(t, db, "get d match body 'common' limit 5000"); len(got) != 2000 {
		t.Fatalf("match after a stopped build: %d rows, want 2000", len(got))
	}
}

// A block that writes, then matches (building the index with its own
// write in it), then fails, is undone in the index too.
func TestTextIndexBuiltInsideABlockUndone(t *testing.T) {
	db, path := newTestDB(t, Options{NoSweep: true})
	mustExec(t, db, "create collection d (body text @text, n int @unique)")
	mustExec(t, db, "put d [{body: 'alpha', n: 1}, {body: 'beta', n: 2}]")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := Open(path, Options{NoSweep: true, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_, err = db.Batch(context.Background(), []Statement{
		{Query: "put d {body: 'gamma alpha', n: 3}"},
		{Query: "get d match body 'alpha'"},
		{Query: "put d {body: 'delta', n: 1}"}, // taken: the block fails
	}, BatchOptions{})
	if !errors.Is(err, ErrTaken) {
		t.Fatalf("block: %v, want ErrTaken", err)
	}
	if got := matchIDs(t, db, "get d match body 'alpha'"); fmt.Sprint(got) != "[1]" {
		t.Fatalf("after the block was undone: %v", got)
	}
}

// matchIDs runs q and returns its rows' ids, in order.
func matchIDs(tb testing.TB, db *DB, q string) []int64 {
	tb.Helper()
	res, _, err := db.Exec(context.Background(), Statement{Query: q})
	if err != nil {
		tb.Fatalf("%s: %v", q, err)
	}
	out := make([]int64, 0, len(res.Rows))
	for _, r := range res.Rows {
		out = append(out, r["id"].(int64))
	}
	return out
}

// sortedHashBuilt says whether field name's @hash and @sorted indexes are
// built (false for one it has not).
func sortedHashBuilt(tb testing.TB, db *DB, coll, name string) (hash, sorted bool) {
	tb.Helper()
	db.mu.RLock()
	defer db.mu.RUnlock()
	c := db.st.colls[coll]
	i := c.sch.field(name)
	if h := c.hash[i]; h != nil {
		hash = h.ready.Load()
	}
	if s := c.sorted[i]; s != nil {
		sorted = s.ready.Load()
	}
	return hash, sorted
}

// @hash, @unique and @sorted indexes are built on first use too: an open
// builds none; a write to a @unique field builds its index and is refused
// for a value taken before the open; a lookup, a count, a range and an
// order read from indexes built on first use answer as a tenant with no
// index (every answer a scan), writes before and after the build
// included; and readers
// that all come to an index not built yet at once build it once.
func TestHashAndSortedBuiltOnFirstUse(t *testing.T) {
	const schema = "create collection d (n int @sorted, k text @hash, u int @unique, s text)"
	writes := func(tb testing.TB, db *DB, from, to int) {
		for i := from; i < to; i++ {
			mustExec(tb, db, "put d {n: $1, k: $2, u: $3, s: $4}", int64(i%50), fmt.Sprint("k", i%9), int64(i), fmt.Sprint(i))
		}
	}
	db, path := newTestDB(t, Options{NoSweep: true})
	ref, _ := newTestDB(t, Options{NoSweep: true})
	mustExec(t, db, schema)
	mustExec(t, ref, "create collection d (n int, k text, u int, s text)")
	for _, x := range []*DB{db, ref} {
		writes(t, x, 0, 400)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := Open(path, Options{NoSweep: true, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, f := range []string{"n", "k", "u"} {
		if h, s := sortedHashBuilt(t, db, "d", f); h || s {
			t.Fatalf("the open built %s's index (hash %v, sorted %v)", f, h, s)
		}
	}
	for _, x := range []*DB{db, ref} {
		writes(t, x, 400, 420) // into indexes not built yet
		mustExec(t, x, "del d where s = '3'")
	}
	if h, _ := sortedHashBuilt(t, db, "d", "u"); !h {
		t.Fatal("a write to a @unique field did not build its index")
	}
	if err := execErr(t, db, "put d {n: 1, k: 'x', u: 7}"); !errors.Is(err, ErrTaken) {
		t.Fatalf("a @unique value taken before the open: %v, want ErrTaken", err)
	}
	queries := []string{
		"get d where k = 'k4' order u",
		"get d select count(*) where k = 'k2'",
		"get d where n >= 10 and n < 13 order u",
		"get d order n, u desc limit 30",
		"get d where u in (3, 5, 419)",
	}
	// Many readers at once come to the indexes not built yet.
	var wg sync.WaitGroup
	got := make([][]string, 8)
	for g := range got {
		wg.Go(func() {
			for _, q := range queries {
				res, _, err := db.Exec(context.Background(), Statement{Query: q})
				if err != nil {
					t.Errorf("%s: %v", q, err)
					return
				}
				got[g] = append(got[g], string(res.JSON()))
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for i, q := range queries {
		want := mustExec(t, ref, q)
		for g := range got {
			if got[g][i] != want {
				t.Fatalf("%s, reader %d: %s\nno index: %s", q, g, got[g][i], want)
			}
		}
	}
	for _, f := range []string{"n", "k"} {
		if h, s := sortedHashBuilt(t, db, "d", f); !h && !s {
			t.Fatalf("%s's index not built by the reads", f)
		}
	}
	for _, x := range []*DB{db, ref} {
		writes(t, x, 450, 470) // into built indexes
		mustExec(t, x, "del d where n = 12")
	}
	for _, q := range queries {
		if a, b := mustExec(t, db, q), mustExec(t, ref, q); a != b {
			t.Fatalf("%s after writes to built indexes: %s\nno index: %s", q, a, b)
		}
	}
}

// The sweeper of a reopened tenant builds its @ttl index from the
// documents: rows written before the open, and after it before the
// sweep, are swept once expired, and no other.
func TestTTLIndexBuiltBySweep(t *testing.T) {
	clock := newFakeClock(t0)
	db, path := newTestDB(t, Options{NoSweep: true, Now: clock.Now})
	mustExec(t, db, "create collection s (k text, at timestamp @ttl(10s))")
	mustExec(t, db, "put s [{k: 'a', at: $1}, {k: 'b', at: $2}, {k: 'c'}]", t0, t0+5000)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := Open(path, Options{NoSweep: true, Now: clock.Now, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	mustExec(t, db, "put s {k: 'd', at: $1}", t0+1000) // before the index is built
	if _, s := sortedHashBuilt(t, db, "s", "at"); s {
		t.Fatal("the open built the @ttl index")
	}
	clock.Add(11_000) // a and d expire; b in 4 s
	if n, err := db.Sweep(t.Context()); err != nil || n != 2 {
		t.Fatalf("sweep: %d %v, want 2", n, err)
	}
	mustExec(t, db, "put s {k: 'e', at: $1}", t0+2000) // after the build: expired already
	clock.Add(4_000)
	if n, err := db.Sweep(t.Context()); err != nil || n != 2 {
		t.Fatalf("second sweep: %d %v, want 2 (b and e)", n, err)
	}
	db.mu.RLock()
	var left []string
	db.st.colls["s"].order.Ascend(func(d *doc) bool {
		left = append(left, d.val(0).(string))
		return true
	})
	db.mu.RUnlock()
	if fmt.Sprint(left) != "[c]" {
		t.Fatalf("left after the sweeps: %v, want [c]", left)
	}
}
