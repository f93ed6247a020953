package engine

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// TestCompactStatement: compact gives back the bytes of deleted rows,
// changes no row and no seq, runs as a statement of its own (Exec, or a
// Batch holding it alone) and is refused inside a block with others.
func TestCompactStatement(t *testing.T) {
	db, path := newTestDB(t, Options{NoSweep: true})
	mustExec(t, db, "create collection c (n int @hash, body text @text)")
	for i := range 50 {
		mustExec(t, db, "put c {n: $1, body: $2}", i, strings.Repeat("word ", 200))
	}
	mustExec(t, db, "del c where n >= 5")
	seq, full := db.Seq(), db.FileBytes()
	if k, err := db.Kind(" Compact ;"); err != nil || k.Verb != "compact" || k.ReadOnly {
		t.Fatalf("compact's kind: %+v %v", k, err)
	}
	if _, _, err := db.Read(context.Background(), Statement{Query: "compact"}); !errors.Is(err, ErrNotRead) {
		t.Fatalf("compact run as a read: %v", err)
	}
	res, got, err := db.Exec(context.Background(), Statement{Query: "compact"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Kind != ResultMessage || res.Write || !strings.HasPrefix(res.Message, "compacted: ") || got != seq || db.Seq() != seq {
		t.Fatalf("compact answered %+v at seq %d (was %d)", res, got, seq)
	}
	if db.FileBytes() >= full/4 {
		t.Fatalf("compacted to %d bytes from %d", db.FileBytes(), full)
	}
	want := mustExec(t, db, "get c select n order n")
	if !jsonEq(t, want, `[{"n":0},{"n":1},{"n":2},{"n":3},{"n":4}]`) {
		t.Fatalf("rows after compact: %s", want)
	}
	br, err := db.Batch(context.Background(), []Statement{{Query: "compact"}}, BatchOptions{
		Extra: func([]*Result) []Statement { t.Fatal("Extra called for a compact"); return nil },
	})
	if err != nil || br.Wrote || br.Seq != seq || len(br.Results) != 1 {
		t.Fatalf("a batch of one compact: %+v %v", br, err)
	}
	_, err = db.Batch(context.Background(), []Statement{{Query: "put c {n: 99}"}, {Query: "compact"}}, BatchOptions{})
	var be *BatchError
	if !errors.As(err, &be) || be.At != 1 || !errors.Is(err, ErrInvalid) {
		t.Fatalf("compact inside a block: %v", err)
	}
	if db.Seq() != seq {
		t.Fatal("the refused block landed")
	}
	db = reopen(t, db, path)
	if got := mustExec(t, db, "get c select n order n"); got != want {
		t.Fatalf("after reopen: %s", got)
	}
	if got := mustExec(t, db, "get c select n match body 'word' limit 1"); !strings.Contains(got, `"n"`) {
		t.Fatalf("text index after reopen: %s", got)
	}
}
