package store

import (
	"bytes"
	"testing"
	"time"
)

// readAt collects ReadAt(cur, since) and returns the seq a caller would
// ask from next: the highest Last given, or since.
func readAt(t testing.TB, l *Log, cur *Cursor, since uint64) ([]Record, uint64) {
	t.Helper()
	var out []Record
	next := since
	err := l.ReadAt(cur, since, func(r Record) error {
		out = append(out, r)
		next = max(next, r.Last)
		return nil
	})
	if err != nil {
		t.Fatalf("read at %d: %v", since, err)
	}
	return out, next
}

// A reader following the end of the file with a cursor gets every
// record once, forks too, in the order ReadFrom gives them, and each read
// starts where the last stopped.
func TestReadAtResumesWhereItStopped(t *testing.T) {
	l := mustCreate(t, tenantPath(t), testOptions())
	var (
		cur      Cursor
		got      []Record
		since    uint64
		starting []int64 // where each read was planned to start
	)
	for round := range 12 {
		appendN(t, l, round%3+1, uint64(round%2+1), 60)
		if round%4 == 3 {
			if _, err := l.Fork(); err != nil {
				t.Fatal(err)
			}
		}
		p, err := l.readPlan(since, &cur)
		if err != nil {
			t.Fatal(err)
		}
		p.ref.release()
		starting = append(starting, p.start)
		recs, next := readAt(t, l, &cur, since)
		got, since = append(got, recs...), next
		if cur.Seq() != since || cur.off != l.Size() {
			t.Fatalf("round %d: cursor at seq %d offset %d, want %d and %d", round, cur.Seq(), cur.off, since, l.Size())
		}
	}
	want, err := readAll(t, l, 0)
	if err != nil {
		t.Fatal(err)
	}
	sameRecords(t, got, want)
	for i := 1; i < len(starting); i++ {
		if starting[i] <= starting[i-1] {
			t.Fatalf("read %d planned from offset %d, the one before it from %d: not resumed", i, starting[i], starting[i-1])
		}
	}

	// Asked from another seq, the cursor is not used.
	other, _ := readAt(t, l, &cur, 3)
	from3, err := readAll(t, l, 3)
	if err != nil {
		t.Fatal(err)
	}
	sameRecords(t, other, from3)
}

// A checkpoint gives the Log a new file: a cursor taken in the old one
// is not used, and the read after it still gives every record appended
// since.
func TestReadAtAfterACheckpoint(t *testing.T) {
	l := mustCreate(t, tenantPath(t), testOptions())
	appendN(t, l, 10, 1, 60)
	var cur Cursor
	_, since := readAt(t, l, &cur, 0)
	if err := l.Checkpoint(stateWriter(bytes.Repeat([]byte("state."), 50))); err != nil {
		t.Fatal(err)
	}
	after := appendN(t, l, 3, 2, 60)
	got, next := readAt(t, l, &cur, since)
	sameRecords(t, engineOnly(got), after)
	if next != l.Seq() || cur.Seq() != next || cur.off != l.Size() {
		t.Fatalf("cursor at seq %d offset %d after the checkpoint, want %d and %d", cur.Seq(), cur.off, l.Seq(), l.Size())
	}
}

// DurableMoved is closed as durability moves on: at an append under
// SyncOff, at a sync under the other modes (not at their append), and as
// the Log closes.
func TestDurableMovedClosesAsDurabilityMoves(t *testing.T) {
	closed := func(ch <-chan struct{}) bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
	off := mustCreate(t, tenantPath(t), testOptions())
	ch := off.DurableMoved()
	appendN(t, off, 1, 1, 20)
	if !closed(ch) {
		t.Fatal("under SyncOff an append left DurableMoved open")
	}

	opts := testOptions()
	opts.Sync, opts.SyncEvery = SyncEvery, time.Hour
	every := mustCreate(t, tenantPath(t), opts)
	appendN(t, every, 1, 1, 20) // its bound, synced, moves durability first
	ch = every.DurableMoved()
	appendN(t, every, 1, 1, 20)
	if closed(ch) || every.Durable() != 0 {
		t.Fatalf("under SyncEvery an append not yet synced closed DurableMoved (durable %d)", every.Durable())
	}
	if err := every.Sync(); err != nil {
		t.Fatal(err)
	}
	if !closed(ch) || every.Durable() != 2 {
		t.Fatalf("a sync left DurableMoved open (durable %d)", every.Durable())
	}
	ch = every.DurableMoved()
	mustClose(t, every)
	if !closed(ch) {
		t.Fatal("closing the Log left DurableMoved open")
	}
}
