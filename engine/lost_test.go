package engine

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"
)

// insertOne inserts a doc into c and returns its id and the write's seq.
func insertOne(t *testing.T, db *DB, k int) (int64, uint64) {
	t.Helper()
	res, seq, err := db.Exec(context.Background(), Statement{Query: "insert c {k: $1}", Params: []any{k}})
	if err != nil {
		t.Fatal(err)
	}
	return res.IDs[0], seq
}

// A power loss under SyncEvery takes the writes acknowledged since the
// last fsync. The file that opens without them goes on in a new history
// at a seq past every write they may have had, its id counters as far
// past theirs: a lost write's history and seq are held by no history of
// the file (Fenec-After with Fenec-History is refused, a change cursor at
// it is gone), and neither its seq nor its id is given to a new write.
func TestLostTailGivesNoSeqOrIDAgain(t *testing.T) {
	opts := Options{Sync: SyncEvery, SyncEvery: time.Hour, NoSweep: true, Logger: discardLogger()}
	db, path := newTestDB(t, opts)
	mustExec(t, db, "create collection c (k int)")
	mustExec(t, db, "create collection quiet (k int)") // gives no id before the loss
	for k := range 3 {
		insertOne(t, db, k)
	}
	if err := db.Sync(); err != nil {
		t.Fatal(err)
	}
	synced, kept, old := db.FileBytes(), db.Seq(), db.History()
	lostID, lostSeq := insertOne(t, db, 10)
	lastID, lastSeq := insertOne(t, db, 11)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, synced); err != nil {
		t.Fatal(err)
	}

	db2, err := Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db2.Close() })
	if db2.History() == old {
		t.Fatal("the file that lost acknowledged writes kept its history")
	}
	if db2.Seq() <= lastSeq {
		t.Fatalf("reopened at seq %d: the lost writes' seqs (%d, %d) may be given again", db2.Seq(), lostSeq, lastSeq)
	}
	if !db2.Holds(old, kept) || db2.Holds(old, lostSeq) || db2.Holds(old, lastSeq) {
		t.Fatal("the old history should hold the synced writes and not the lost ones")
	}
	if got := mustExec(t, db2, "get c count"); !jsonEq(t, got, `{"count":3}`) {
		t.Fatalf("count after the loss: %s", got)
	}
	for _, since := range []uint64{kept, lostSeq, lastSeq} {
		if _, err := db2.ChangesSince(since, 10); !errors.Is(err, ErrCursorGone) {
			t.Fatalf("changes since %d: %v, want ErrCursorGone", since, err)
		}
	}
	id, seq := insertOne(t, db2, 12)
	if id <= lastID || seq <= lastSeq {
		t.Fatalf("a new write took id %d at seq %d: the lost ones had ids %d, %d at seqs %d, %d", id, seq, lostID, lastID, lostSeq, lastSeq)
	}
	res, _, err := db2.Exec(context.Background(), Statement{Query: "insert quiet {k: 1}"})
	if err != nil {
		t.Fatal(err)
	}
	if res.IDs[0] <= int64(lastSeq-kept) {
		t.Fatalf("a collection that gave no id before the loss gave id %d: the lost writes may have given it up to %d", res.IDs[0], lastSeq-kept)
	}

	// Closed cleanly, it opens as it was: nothing skipped again.
	h, at := db2.History(), db2.Seq()
	if err := db2.Close(); err != nil {
		t.Fatal(err)
	}
	db3, err := Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db3.Close()
	if db3.History() != h || db3.Seq() != at {
		t.Fatalf("reopened after a clean close: history %x seq %d, want %x %d", db3.History(), db3.Seq(), h, at)
	}
	if next, _ := insertOne(t, db3, 13); next != id+1 {
		t.Fatalf("after a clean close the next id is %d, want %d", next, id+1)
	}
}
