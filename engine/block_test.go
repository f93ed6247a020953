package engine

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// fileState is what a refused block must leave as it was.
type fileState struct {
	seq  uint64
	size int64
	rows int64
	all  string
}

func stateOf(tb testing.TB, db *DB, colls ...string) fileState {
	tb.Helper()
	s := fileState{seq: db.Seq(), size: db.FileBytes(), rows: db.Rows()}
	for _, c := range colls {
		s.all += mustExec(tb, db, "get "+c+" order id")
	}
	return s
}

func TestBatchAllOrNothing(t *testing.T) {
	db, _ := newTestDB(t, Options{NoSweep: true})
	mustExec(t, db, "create collection a (n int @unique, s text @hash, k int @sorted)")
	mustExec(t, db, "put a [{n: 1, s: 'x', k: 1}, {n: 2, s: 'y', k: 2}]")
	before := stateOf(t, db, "a")
	ctx := context.Background()

	cases := []struct {
		name string
		sts  []string
		at   int
		err  error
	}{
		{"taken late", []string{"put a {n: 3, s: 'z', k: 3}", "del a where n = 1", "set a {k: k + 10}", "insert a {n: 2}"}, 3, ErrTaken},
		{"require", []string{"put a {n: 4}", "set a {s: 'q'} where n = 99 require 1"}, 1, ErrRequire},
		{"drop then fail", []string{"drop collection a", "create collection a (z int)", "put a {z: 1}", "get nope"}, 3, ErrUnknownCollection},
		{"index then fail", []string{"create index on a (s) @unique", "put a {n: 7, s: 'x'}"}, 1, ErrTaken},
		{"parse", []string{"put a {n: 5}", "get a where"}, 1, nil},
	}
	for _, c := range cases {
		sts := make([]Statement, len(c.sts))
		for i, q := range c.sts {
			sts[i] = Statement{Query: q}
		}
		_, err := db.Batch(ctx, sts, BatchOptions{})
		var be *BatchError
		if !errors.As(err, &be) || be.At != c.at {
			t.Fatalf("%s: err %v, want a BatchError at %d", c.name, err, c.at)
		}
		if c.err != nil && !errors.Is(err, c.err) {
			t.Fatalf("%s: err %v, want %v", c.name, err, c.err)
		}
		if got := stateOf(t, db, "a"); got != before {
			t.Fatalf("%s: state changed\n got %+v\nwant %+v", c.name, got, before)
		}
	}
	// The unique and hash indexes were restored too.
	if err := execErr(t, db, "insert a {n: 1}"); !errors.Is(err, ErrTaken) {
		t.Fatalf("unique index lost after rollback: %v", err)
	}
	if got := mustExec(t, db, "get a select n where s = 'y'"); !jsonEq(t, got, `[{"n":2}]`) {
		t.Fatalf("hash index after rollback: %s", got)
	}
	if got := mustExec(t, db, "get a select n where k > 1"); !jsonEq(t, got, `[{"n":2}]`) {
		t.Fatalf("sorted index after rollback: %s", got)
	}

	// A block that lands: one record, seq by its last write.
	br, err := db.Batch(ctx, []Statement{
		{Query: "put a [{n: 10}, {n: 11}]"},
		{Query: "del a where n = 1"},
		{Query: "get a select n order n"},
		{Query: "create collection b (x int)"},
	}, BatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if br.Seq != before.seq+4 || !br.Wrote {
		t.Fatalf("seq %d wrote %v, want %d", br.Seq, br.Wrote, before.seq+4)
	}
	if got := string(br.Results[2].JSON()); !jsonEq(t, got, `[{"n":2},{"n":10},{"n":11}]`) {
		t.Fatalf("a get inside a block sees the block's writes: %s", got)
	}
	// A block that writes nothing appends nothing.
	size := db.FileBytes()
	br, err = db.Batch(ctx, []Statement{{Query: "get a"}, {Query: "set a {k: 1} where n = 99"}}, BatchOptions{})
	if err != nil || br.Wrote || br.Seq != before.seq+4 || db.FileBytes() != size {
		t.Fatalf("empty block: %+v %v size %d->%d", br, err, size, db.FileBytes())
	}
}

func TestGateQuotaExtra(t *testing.T) {
	var mu sync.Mutex
	var gateErr, quotaErr error
	var asks []QuotaAsk
	db, _ := newTestDB(t, Options{NoSweep: true,
		Gate: func() error { mu.Lock(); defer mu.Unlock(); return gateErr },
		Quota: func(a QuotaAsk) error {
			mu.Lock()
			defer mu.Unlock()
			asks = append(asks, a)
			return quotaErr
		},
	})
	set := func(g, q error) { mu.Lock(); gateErr, quotaErr = g, q; mu.Unlock() }
	mustExec(t, db, "create collection a (n int)")
	mustExec(t, db, "create collection _keys (k text @unique)")
	mustExec(t, db, "put a [{n: 1}, {n: 2}]")
	before := stateOf(t, db, "a")

	errGate, errFull := errors.New("frozen"), errors.New("full")
	set(errGate, nil)
	err := execErr(t, db, "put a {n: 3}")
	var ge *GateError
	if !errors.As(err, &ge) || !errors.Is(err, errGate) {
		t.Fatalf("gate: %v", err)
	}
	set(nil, errFull)
	err = execErr(t, db, "put a {n: 3}")
	var qe *QuotaError
	if !errors.As(err, &qe) || !errors.Is(err, errFull) {
		t.Fatalf("quota: %v", err)
	}
	if got := stateOf(t, db, "a"); got != before {
		t.Fatalf("refused block changed state: %+v vs %+v", got, before)
	}
	set(nil, nil)
	mu.Lock()
	asks = nil
	mu.Unlock()
	size := db.FileBytes()
	mustExec(t, db, "put a [{n: 3}, {n: 4}]")
	mustExec(t, db, "put _keys {k: 'x'}")
	mustExec(t, db, "del a where n = 1")
	mu.Lock()
	got := append([]QuotaAsk(nil), asks...)
	mu.Unlock()
	if len(got) != 3 {
		t.Fatalf("asks: %+v", got)
	}
	if got[0].RecordBytes != db.FileBytes()-size-got[1].RecordBytes-got[2].RecordBytes {
		t.Fatalf("record bytes %d do not add up to the file's growth %d", got[0].RecordBytes, db.FileBytes()-size)
	}
	if got[0].AddRows != 2 || got[0].Rows != 2 || got[0].FileBytes != size || got[0].Rollback {
		t.Fatalf("first ask: %+v", got[0])
	}
	if got[1].AddRows != 0 || got[1].Rows != 4 {
		t.Fatalf("server collection counted: %+v", got[1])
	}
	if got[2].AddRows != -1 || !got[2].Rollback {
		t.Fatalf("delete ask: %+v", got[2])
	}
	if db.Rows() != 3 {
		t.Fatalf("rows %d", db.Rows())
	}

	// Extra statements land in the same block; a failing one undoes all.
	br, err := db.Batch(t.Context(), []Statement{{Query: "put a {n: 9}"}}, BatchOptions{
		Extra: func(res []*Result) []Statement {
			return []Statement{{Query: "put _keys {k: $1}", Params: []any{"key1"}}}
		},
	})
	if err != nil || br.Seq != before.seq+6 {
		t.Fatalf("extra: %+v %v", br, err)
	}
	if got := mustExec(t, db, "get _keys select k where k = 'key1'"); !jsonEq(t, got, `[{"k":"key1"}]`) {
		t.Fatalf("extra did not land: %s", got)
	}
	mid := stateOf(t, db, "a", "_keys")
	_, err = db.Batch(t.Context(), []Statement{{Query: "put a {n: 10}"}}, BatchOptions{
		Extra: func(res []*Result) []Statement {
			return []Statement{{Query: "insert _keys {k: 'key1'}"}}
		},
	})
	if !errors.Is(err, ErrTaken) {
		t.Fatalf("failing extra: %v", err)
	}
	if got := stateOf(t, db, "a", "_keys"); got != mid {
		t.Fatalf("failing extra changed state")
	}
}

func TestWatchAndChanges(t *testing.T) {
	db, _ := newTestDB(t, Options{NoSweep: true})
	var mu sync.Mutex
	var seen []Change
	stop := db.Watch(func(c Change) { mu.Lock(); seen = append(seen, c); mu.Unlock() })
	mustExec(t, db, "create collection a (n int)")
	mustExec(t, db, "put a [{n: 1}, {n: 2}]")
	mustExec(t, db, "set a {n: 5} where n = 1")
	mustExec(t, db, "del a where n = 2")
	stop()
	mustExec(t, db, "put a {n: 7}")
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 4 {
		t.Fatalf("watched %d changes", len(seen))
	}
	if seen[1].Seq != 3 || len(seen[1].Puts) != 2 || seen[1].Puts[1].Doc["n"] != int64(2) {
		t.Fatalf("put change: %+v", seen[1])
	}
	if seen[3].Seq != 5 || len(seen[3].Dels) != 1 || seen[3].Dels[0].ID != 2 {
		t.Fatalf("del change: %+v", seen[3])
	}
	chs, err := db.ChangesSince(2, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(chs) != 2 || chs[0].Seq != 3 || chs[1].Seq != 4 || chs[1].Puts[0].Doc["n"] != int64(5) {
		t.Fatalf("changes since 2: %+v", chs)
	}
	all, err := db.ChangesSince(0, 100)
	if err != nil || len(all) != 5 || all[4].Seq != 6 {
		t.Fatalf("all changes: %+v %v", all, err)
	}
	if err := db.Compact(); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ChangesSince(2, 10); !errors.Is(err, ErrCursorGone) {
		t.Fatalf("cursor after compact: %v", err)
	}
	if chs, err := db.ChangesSince(db.Seq(), 10); err != nil || len(chs) != 0 {
		t.Fatalf("changes at the head: %v %v", chs, err)
	}
}

func TestCompileFilter(t *testing.T) {
	db, _ := newTestDB(t, Options{NoSweep: true})
	mustExec(t, db, "create collection a (n int, s text, m json)")
	f, err := db.CompileFilter("a", "n > $1 and s != 'x' and m.k = 1", []any{2.0})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		row  Row
		want bool
	}{
		{Row{"n": int64(3), "s": "y", "m": map[string]any{"k": 1.0}}, true},
		{Row{"n": 3.0, "s": "y", "m": map[string]any{"k": int64(1)}}, true},
		{Row{"n": int64(2), "s": "y", "m": map[string]any{"k": 1.0}}, false},
		{Row{"n": int64(3), "s": "x", "m": map[string]any{"k": 1.0}}, false},
		{Row{"n": int64(3), "s": "y"}, false},
	} {
		if got := f.Match(c.row); got != c.want {
			t.Errorf("Match(%v) = %v", c.row, got)
		}
	}
	if _, err := db.CompileFilter("a", "nope = 1", nil); !errors.Is(err, ErrUnknownField) {
		t.Fatalf("unknown field: %v", err)
	}
	if _, err := db.CompileFilter("zz", "n = 1", nil); !errors.Is(err, ErrUnknownCollection) {
		t.Fatalf("unknown collection: %v", err)
	}
	var pe *ParseError
	if _, err := db.CompileFilter("a", "n = ", nil); !errors.As(err, &pe) {
		t.Fatalf("parse error: %v", err)
	}
	if _, err := db.CompileFilter("a", "n = $2", []any{1}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("missing param: %v", err)
	}
}

func TestForkLineage(t *testing.T) {
	db, path := newTestDB(t, Options{NoSweep: true})
	mustExec(t, db, "create collection a (n int)")
	mustExec(t, db, "put a [{n: 1}, {n: 2}]")
	h0 := db.History()
	h1, err := db.Fork()
	if err != nil || h1 == h0 || db.History() != h1 {
		t.Fatalf("fork: %d %v (was %d)", h1, err, h0)
	}
	mustExec(t, db, "put a {n: 3}")
	want := []LineageEntry{{History: h0, From: 0}, {History: h1, From: 3}}
	got := db.Lineage()
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("lineage %+v, want %+v", got, want)
	}
	for _, c := range []struct {
		h    uint64
		seq  uint64
		want bool
	}{{h0, 3, true}, {h0, 4, false}, {h1, 4, true}, {h1, 5, false}, {h1 + 1, 1, false}} {
		if db.Holds(c.h, c.seq) != c.want {
			t.Errorf("Holds(%d, %d) != %v", c.h, c.seq, c.want)
		}
	}
	db = reopen(t, db, path)
	if l := db.Lineage(); len(l) != 2 || l[1] != want[1] || db.Seq() != 4 {
		t.Fatalf("after reopen: %+v seq %d", l, db.Seq())
	}
}

// TestSpilledBlock lands a block larger than the store's spill size: its
// pieces are asked of the quota one by one, a refusal lands nothing, and
// the landed block replays and replicates whole.
func TestSpilledBlock(t *testing.T) {
	var mu sync.Mutex
	var asks []QuotaAsk
	refuseAt := -1
	db, path := newTestDB(t, Options{NoSweep: true, Quota: func(a QuotaAsk) error {
		mu.Lock()
		defer mu.Unlock()
		asks = append(asks, a)
		if len(asks)-1 == refuseAt {
			return errors.New("full")
		}
		return nil
	}})
	mustExec(t, db, "create collection big (s text)")

	// A replica from an image taken before the big block.
	rep := newReplica(t, db)

	docs := make([]any, 18)
	for i := range docs {
		docs[i] = map[string]any{"s": strings.Repeat(string(rune('a'+i)), 1<<20)}
	}
	before := stateOf(t, db, "big")
	fileBefore := db.FileBytes()
	mu.Lock()
	asks, refuseAt = nil, 1
	mu.Unlock()
	var qe *QuotaError
	if err := execErr(t, db, "put big $1", docs); !errors.As(err, &qe) {
		t.Fatalf("refused spilled block: %v", err)
	}
	mu.Lock()
	if len(asks) != 2 || asks[0].AddRows != 18 || asks[0].RecordBytes < 16<<20 {
		t.Fatalf("asks for a refused spilled block: %+v", asks)
	}
	asks, refuseAt = nil, -1
	mu.Unlock()
	after := stateOf(t, db, "big")
	if after.seq != before.seq || after.rows != before.rows || after.all != before.all {
		t.Fatalf("a refused spilled block changed the tenant")
	}
	// Its first piece was let through and written: it is cut off again,
	// leaving no dead bytes for a bytes quota to count.
	if got := db.FileBytes(); got != fileBefore {
		t.Fatalf("a refused spilled block left %d bytes in the file", got-fileBefore)
	}
	mustExec(t, db, "put big $1", docs)
	mu.Lock()
	if len(asks) != 2 || asks[1].FileBytes <= asks[0].FileBytes || asks[0].FileBytes != fileBefore {
		t.Fatalf("asks for a landed spilled block: %+v", asks)
	}
	mu.Unlock()
	if db.Seq() != before.seq+18 || db.Rows() != 18 {
		t.Fatalf("seq %d rows %d", db.Seq(), db.Rows())
	}
	q := "get big select id where s ~ '^r'"
	want := mustExec(t, db, q)
	if !jsonEq(t, want, `[{"id":18}]`) {
		t.Fatalf("answer: %s", want)
	}
	if err := db.Sync(); err != nil {
		t.Fatal(err)
	}
	err := db.ReadRecords(nil, rep.Seq(), func(r RawRecord) error { return rep.ApplyRecord(r) })
	if err != nil {
		t.Fatal(err)
	}
	if got := mustExec(t, rep, q); got != want || rep.Seq() != db.Seq() {
		t.Fatalf("replica: %s seq %d", got, rep.Seq())
	}
	db = reopen(t, db, path)
	if got := mustExec(t, db, q); got != want || db.Seq() != before.seq+18 {
		t.Fatalf("after reopen: %s seq %d", got, db.Seq())
	}
}

// A panic while a block runs under the write lock (here from Extra, the
// node's hook; a statement, the gate or the quota hook are the same) undoes
// the block and gives the lock back: the tenant takes the next write.
func TestPanicInBlockUndoesItAndUnlocks(t *testing.T) {
	db, _ := newTestDB(t, Options{NoSweep: true})
	mustExec(t, db, "create collection c (n int @hash)")
	mustExec(t, db, "put c {n: 1}")
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("the hook's panic did not reach the caller")
			}
		}()
		db.Batch(context.Background(), []Statement{{Query: "put c {n: 2}"}}, BatchOptions{
			Extra: func([]*Result) []Statement { panic("hook broke") },
		})
	}()
	if !db.mu.TryLock() {
		db.mu.Unlock() // free the wedged lock so the cleanup's Close can run
		t.Fatal("the write lock is still held after the panic")
	}
	db.mu.Unlock()
	if got := mustExec(t, db, "get c where n = 2 count"); !jsonEq(t, got, `{"count":0}`) {
		t.Fatalf("the panicked block's put is still in memory: %s", got)
	}
	mustExec(t, db, "put c {n: 3}")
	if got := mustExec(t, db, "get c count"); !jsonEq(t, got, `{"count":2}`) {
		t.Fatalf("after the panic: %s", got)
	}
}

// The same holds for a sweep whose gate panics: its deletes are undone and
// the lock is given back.
func TestPanicInSweepUndoesItAndUnlocks(t *testing.T) {
	clock := newFakeClock(t0)
	var broken atomic.Bool
	db, _ := newTestDB(t, Options{NoSweep: true, Now: clock.Now, Gate: func() error {
		if broken.Load() {
			panic("gate broke")
		}
		return nil
	}})
	mustExec(t, db, "create collection k (at timestamp @ttl(1s))")
	mustExec(t, db, "put k {at: now()}")
	clock.Add(5_000)
	broken.Store(true)
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("the gate's panic did not reach the caller")
			}
		}()
		db.Sweep(t.Context())
	}()
	if !db.mu.TryLock() {
		db.mu.Unlock() // free the wedged lock so the cleanup's Close can run
		t.Fatal("the write lock is still held after the panic")
	}
	n := db.st.colls["k"].len()
	db.mu.Unlock()
	if n != 1 {
		t.Fatalf("the panicked sweep's delete is still in memory: %d rows", n)
	}
	broken.Store(false)
	if n, err := db.Sweep(t.Context()); err != nil || n != 1 {
		t.Fatalf("sweep after the panic: %d, %v", n, err)
	}
}
