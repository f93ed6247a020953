package store

import (
	"errors"
	"os"
	"sync"
	"testing"
	"time"
)

// everyOptions is SyncEvery with no tick: nothing is synced but what a
// test syncs, and what the Log syncs itself.
func everyOptions(ahead uint64) Options {
	return Options{Sync: SyncEvery, SyncEvery: time.Hour, Logger: quietLogger(), boundAhead: ahead}
}

// loseTo makes a power loss of the closed file at path: every byte past
// synced is gone.
func loseTo(t *testing.T, path string, synced int64) {
	t.Helper()
	if err := os.Truncate(path, synced); err != nil {
		t.Fatal(err)
	}
}

// kinds reads every record ReadFrom gives from since and returns their
// kinds.
func kinds(t *testing.T, l *Log, since uint64) []Kind {
	t.Helper()
	var out []Kind
	if err := l.ReadFrom(since, func(r Record) error {
		out = append(out, r.Kind)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// A power loss under SyncEvery takes writes past the last fsync. The file
// that opens without them says it lost its tail, takes no write of its
// own until it is started past it, and then goes on at a seq past every
// write the lost tail may have held, in a new history from where its
// writes end: the lost writes' (history, seq) are held by no history of
// the file, and no seq of theirs is given again.
func TestLostTailIsForkedPast(t *testing.T) {
	path := tenantPath(t)
	opts := everyOptions(0)
	l := mustCreate(t, path, opts)
	old := l.History()
	appendN(t, l, 3, 1, 30)
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	synced := l.Size()
	appendN(t, l, 2, 1, 30) // acknowledged, never synced
	mustClose(t, l)
	loseTo(t, path, synced)

	l2, c := mustOpen(t, path, opts)
	if len(c.recs) != 3 || l2.Seq() != 3 || l2.History() != old {
		t.Fatalf("reopened: %d records, seq %d", len(c.recs), l2.Seq())
	}
	bound, lost := l2.Lost()
	if !lost || bound != 1+defaultBoundAhead {
		t.Fatalf("Lost() = %d, %v; want %d, true", bound, lost, 1+defaultBoundAhead)
	}
	if _, err := l2.Append(KindEngine, 1, []byte("x")); !errors.Is(err, ErrLostTail) {
		t.Fatalf("append before ForkPast: %v, want ErrLostTail", err)
	}
	if _, err := l2.Spill([]byte("x")); !errors.Is(err, ErrLostTail) {
		t.Fatalf("spill before ForkPast: %v, want ErrLostTail", err)
	}
	pos, err := l2.ForkPast(stateWriter([]byte("state")))
	if err != nil {
		t.Fatal(err)
	}
	if pos.Seq != bound+1 || l2.Seq() != bound+1 || len(pos.Lineage) != 2 || pos.Lineage[1].From != 3 || l2.History() == old {
		t.Fatalf("forked past: %+v, seq %d, history %x (old %x)", pos, l2.Seq(), l2.History(), old)
	}
	if _, ok := l2.Lost(); ok {
		t.Fatal("still lost after ForkPast")
	}
	if !l2.Holds(old, 3) || l2.Holds(old, 4) || l2.Holds(old, bound) {
		t.Fatal("the old history should hold its synced writes and none past them")
	}
	if err := l2.ReadFrom(3, func(Record) error { return nil }); !errors.Is(err, ErrCursorGone) {
		t.Fatalf("a cursor before the fork past: %v, want ErrCursorGone", err)
	}
	for _, since := range []uint64{4, 5, bound} {
		if err := l2.ReadFrom(since, func(Record) error { return nil }); !errors.Is(err, ErrCursorGone) {
			t.Fatalf("a cursor at lost write %d: %v, want ErrCursorGone", since, err)
		}
	}
	rec, err := l2.Append(KindEngine, 1, []byte("after"))
	if err != nil || rec.First != bound+2 {
		t.Fatalf("append after ForkPast: %+v, %v", rec, err)
	}
	h := l2.History()
	mustClose(t, l2)

	l3, c3 := mustOpen(t, path, opts)
	if _, ok := l3.Lost(); ok || l3.Seq() != bound+2 || l3.History() != h || string(c3.image) != "state" || len(c3.recs) != 1 {
		t.Fatalf("reopened after a clean close: seq %d, image %q, %d records", l3.Seq(), c3.image, len(c3.recs))
	}
}

// A bound reaches a little way ahead; a write past it writes the next.
// The loss is bounded by the last bound on disk.
func TestLostTailPastSeveralBounds(t *testing.T) {
	path := tenantPath(t)
	opts := everyOptions(2)
	l := mustCreate(t, path, opts)
	appendN(t, l, 3, 1, 10) // bound 3 (1 + 2), then writes 1..3
	before := l.Size()
	appendN(t, l, 1, 1, 10) // bound 6, synced, then write 4
	synced := before + frameSize(KindBound, 4, 3, len(boundBody(6)))
	appendN(t, l, 1, 1, 10)
	mustClose(t, l)
	loseTo(t, path, synced)

	l2, _ := mustOpen(t, path, opts)
	if bound, ok := l2.Lost(); !ok || bound != 6 || l2.Seq() != 3 {
		t.Fatalf("Lost() = %d, %v at seq %d; want 6 at 3", bound, ok, l2.Seq())
	}
}

// A clean close bounds the file at its seq: it opens again as it was,
// having lost nothing. Nor does a file whose writes were all synced, and
// bounds are never given to readers.
func TestCleanCloseLosesNothing(t *testing.T) {
	path := tenantPath(t)
	opts := everyOptions(0)
	l := mustCreate(t, path, opts)
	h := l.History()
	appendN(t, l, 4, 2, 20)
	mustClose(t, l)
	l2, c := mustOpen(t, path, opts)
	if _, ok := l2.Lost(); ok || l2.History() != h || l2.Seq() != 8 || len(c.recs) != 4 {
		t.Fatalf("reopened: seq %d, history %x, %d records", l2.Seq(), l2.History(), len(c.recs))
	}
	for _, k := range kinds(t, l2, 0) {
		if k == KindBound {
			t.Fatal("a reader was given a bound")
		}
	}
}

// Under SyncAlways and SyncOff no bound is written, and a file cut short
// says nothing was lost.
func TestNoBoundsButUnderSyncEvery(t *testing.T) {
	for _, mode := range []SyncMode{SyncAlways, SyncOff} {
		path := tenantPath(t)
		opts := Options{Sync: mode, Logger: quietLogger()}
		l := mustCreate(t, path, opts)
		start := l.Size()
		recs := appendN(t, l, 3, 1, 10)
		grown := int64(0)
		for _, r := range recs {
			grown += frameSize(r.Kind, r.First, r.Last, len(r.Body))
		}
		mustClose(t, l)
		if st, err := os.Stat(path); err != nil || st.Size() != start+grown {
			t.Fatalf("mode %d: file of %d bytes, want %d of records alone (%v)", mode, st.Size(), start+grown, err)
		}
		loseTo(t, path, start+frameSize(recs[0].Kind, 1, 1, len(recs[0].Body)))
		l2, _ := mustOpen(t, path, opts)
		if _, ok := l2.Lost(); ok {
			t.Fatalf("mode %d: a file with no bound said it lost its tail", mode)
		}
	}
}

// A checkpoint keeps no bound: the image ends the file, and the next
// write bounds it again, so a loss after it is seen.
func TestCheckpointThenLoss(t *testing.T) {
	path := tenantPath(t)
	opts := everyOptions(0)
	l := mustCreate(t, path, opts)
	appendN(t, l, 3, 1, 10)
	if err := l.Checkpoint(stateWriter([]byte("s"))); err != nil {
		t.Fatal(err)
	}
	before := l.Size()
	appendN(t, l, 2, 1, 10)
	synced := before + frameSize(KindBound, 4, 3, len(boundBody(4+defaultBoundAhead)))
	mustClose(t, l)
	loseTo(t, path, synced)
	l2, _ := mustOpen(t, path, opts)
	if bound, ok := l2.Lost(); !ok || bound != 4+defaultBoundAhead {
		t.Fatalf("Lost() = %d, %v after a checkpoint and a loss", bound, ok)
	}
}

// A bound may fall between a block's spills and its record (a block of
// more writes than the bound had left): the block lands whole all the
// same, replayed and read.
func TestBoundBetweenSpillsAndTheirBlock(t *testing.T) {
	path := tenantPath(t)
	opts := everyOptions(2)
	l := mustCreate(t, path, opts)
	appendN(t, l, 1, 1, 10) // bound 3
	if _, err := l.Spill([]byte("piece|")); err != nil {
		t.Fatal(err)
	}
	rec, err := l.Append(KindEngine, 5, []byte("tail"))
	if err != nil {
		t.Fatal(err)
	}
	if rec.First != 2 || rec.Last != 6 {
		t.Fatalf("block %d-%d", rec.First, rec.Last)
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	var got []Record
	if err := l.ReadFrom(1, func(r Record) error { got = append(got, r); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Kind != KindSpill || string(got[1].Body) != "piece|tail" {
		t.Fatalf("read %d records: %+v", len(got), got)
	}
	mustClose(t, l)
	l2, c := mustOpen(t, path, opts)
	if len(c.recs) != 2 || string(c.recs[1].Body) != "piece|tail" || l2.Seq() != 6 {
		t.Fatalf("replayed %d records, seq %d", len(c.recs), l2.Seq())
	}
	if _, ok := l2.Lost(); ok {
		t.Fatal("lost after a clean close")
	}
}

// ForkPast on a file that lost nothing leaves it as it is, and a bound
// whose body is not a seq is damage, not a tail to cut.
func TestForkPastNothingLostAndABadBound(t *testing.T) {
	path := tenantPath(t)
	opts := everyOptions(0)
	l := mustCreate(t, path, opts)
	appendN(t, l, 2, 1, 10)
	h, size := l.History(), l.Size()
	pos, err := l.ForkPast(stateWriter([]byte("s")))
	if err != nil || pos.Seq != 2 || len(pos.Lineage) != 1 || l.History() != h || l.Size() != size {
		t.Fatalf("ForkPast of a file that lost nothing: %+v, %v; size %d, want %d", pos, err, l.Size(), size)
	}
	mustClose(t, l)

	bad, err := encodeFrame(KindBound, 3, 2, []byte{0x80})
	if err != nil {
		t.Fatal(err)
	}
	good, err := encodeFrame(KindEngine, 3, 3, []byte("after"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(append(bad, good...)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	var damaged *DamagedError
	if _, err := Open(path, opts, nil); !errors.As(err, &damaged) {
		t.Fatalf("open with a bad bound: %v, want a DamagedError", err)
	}
}

// Writers appending at once, bounds written among them every few seqs,
// and readers reading meanwhile: every write lands, readers are given no
// bound, and the file closed opens having lost nothing.
func TestBoundsUnderConcurrentAppends(t *testing.T) {
	path := tenantPath(t)
	opts := everyOptions(3)
	opts.SyncEvery = time.Millisecond
	l := mustCreate(t, path, opts)
	const writers, each = 8, 40
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for range each {
				if _, err := l.Append(KindEngine, 1, []byte("w")); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	var readers sync.WaitGroup
	readers.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
			}
			if err := l.ReadFrom(0, func(r Record) error {
				if r.Kind == KindBound {
					return errors.New("a reader was given a bound")
				}
				return nil
			}); err != nil {
				t.Error(err)
				return
			}
		}
	})
	wg.Wait()
	close(done)
	readers.Wait()
	mustClose(t, l)
	l2, c := mustOpen(t, path, opts)
	if _, ok := l2.Lost(); ok || len(c.recs) != writers*each || l2.Seq() != writers*each {
		t.Fatalf("reopened: %d records, seq %d", len(c.recs), l2.Seq())
	}
}
