package store

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/fenec-go/fenec/internal/testkit"
)

// follow feeds replica every record of primary after the replica's seq.
func follow(t testing.TB, primary, replica *Log) int {
	t.Helper()
	n := 0
	err := primary.ReadFrom(replica.Seq(), func(r Record) error {
		got, err := replica.AppendRaw(r.Frame)
		if err != nil {
			return err
		}
		if got.First != r.First || got.Last != r.Last || got.Kind != r.Kind || !bytes.Equal(got.Body, r.Body) {
			t.Fatalf("AppendRaw decoded %d-%d, sent %d-%d", got.First, got.Last, r.First, r.Last)
		}
		n++
		return nil
	})
	if err != nil {
		t.Fatalf("follow: %v", err)
	}
	return n
}

func TestReplicaFollowsPrimary(t *testing.T) {
	opts := testOptions()
	opts.indexEvery = 200
	primary := mustCreate(t, tenantPath(t), opts)
	appendN(t, primary, 10, 2, 30)

	// The replica starts from the primary's image, then follows records.
	var img bytes.Buffer
	state := []byte("primary state at 20")
	if _, err := primary.WriteImage(&img, stateWriter(state)); err != nil {
		t.Fatal(err)
	}
	rpath := tenantPath(t)
	if _, err := Install(rpath, &img, nil); err != nil {
		t.Fatal(err)
	}
	replica, _ := mustOpen(t, rpath, opts)

	var want []Record
	for round := range 4 {
		want = append(want, appendN(t, primary, 5+round, uint64(1+round), 100*round)...)
		if round == 1 {
			if _, err := primary.Fork(); err != nil {
				t.Fatal(err)
			}
		}
		if round == 2 {
			if err := primary.Checkpoint(stateWriter([]byte("later"))); err != nil {
				t.Fatal(err)
			}
		}
		follow(t, primary, replica)
	}
	if replica.Seq() != primary.Seq() || replica.History() != primary.History() {
		t.Fatalf("replica at %d/%x, primary at %d/%x", replica.Seq(), replica.History(), primary.Seq(), primary.History())
	}
	pl, rl := primary.Lineage(), replica.Lineage()
	if len(pl) != 2 || len(rl) != 2 || pl[0] != rl[0] || pl[1] != rl[1] {
		t.Fatalf("lineage: primary %v, replica %v", pl, rl)
	}
	// Following again sends only the fork at most once more; nothing moves.
	follow(t, primary, replica)
	if len(replica.Lineage()) != 2 || replica.Seq() != primary.Seq() {
		t.Fatalf("second follow changed the replica: %v", replica.Lineage())
	}
	rpathSeq := replica.Seq()
	mustClose(t, replica)
	r2, c := mustOpen(t, rpath, opts)
	if !bytes.Equal(c.image, state) || c.imageSeq != 20 || r2.Seq() != rpathSeq {
		t.Fatalf("replica reopened: image %q at %d, seq %d", c.image, c.imageSeq, r2.Seq())
	}
	sameRecords(t, c.recs, want)
	if !r2.Holds(pl[0].History, 20) || !r2.Holds(pl[1].History, r2.Seq()) {
		t.Fatal("replica does not hold its primary's writes")
	}
}

func TestAppendRawRefusals(t *testing.T) {
	primary := mustCreate(t, tenantPath(t), testOptions())
	appendN(t, primary, 3, 1, 10)
	recs, err := readAll(t, primary, 0)
	if err != nil || len(recs) != 4 { // the first fork and three blocks
		t.Fatalf("read: %d records, %v", len(recs), err)
	}
	var img bytes.Buffer
	if _, err := WriteImage(&img, Position{Seq: 0, Lineage: primary.Lineage()[:1]}, stateWriter(nil)); err != nil {
		t.Fatal(err)
	}
	rpath := tenantPath(t)
	if _, err := Install(rpath, &img, nil); err != nil {
		t.Fatal(err)
	}
	replica, _ := mustOpen(t, rpath, testOptions())
	if _, err := replica.AppendRaw(recs[2].Frame); !errors.Is(err, ErrSeqGap) {
		t.Fatalf("gap: %v", err)
	}
	bad := bytes.Clone(recs[1].Frame)
	bad[len(bad)-1] ^= 1
	if _, err := replica.AppendRaw(bad); !errors.Is(err, ErrBadRecord) {
		t.Fatalf("bad crc: %v", err)
	}
	if _, err := replica.AppendRaw(recs[1].Frame[:5]); !errors.Is(err, ErrBadRecord) {
		t.Fatalf("short frame: %v", err)
	}
	// The fork that starts the primary's history is already the replica's.
	if _, err := replica.AppendRaw(recs[0].Frame); err != nil || len(replica.Lineage()) != 1 {
		t.Fatalf("known fork: %v, lineage %v", err, replica.Lineage())
	}
	for _, r := range recs[1:] {
		if _, err := replica.AppendRaw(r.Frame); err != nil {
			t.Fatal(err)
		}
	}
	if replica.Seq() != 3 {
		t.Fatalf("replica seq %d", replica.Seq())
	}
	if err := primary.Compact(stateWriter(nil)); err != nil {
		t.Fatal(err)
	}
	if _, err := readAll(t, primary, 1); !errors.Is(err, ErrCursorGone) {
		t.Fatalf("cursor after compact: %v", err)
	}
}

func TestReadFromServesOnlyDurable(t *testing.T) {
	l := mustCreate(t, tenantPath(t), Options{Sync: SyncEvery, SyncEvery: time.Hour, Logger: quietLogger()})
	if _, err := l.AppendNoSync(KindEngine, 1, []byte("not yet")); err != nil {
		t.Fatal(err)
	}
	got, err := readAll(t, l, 0)
	if err != nil || len(got) != 1 || got[0].Kind != KindFork {
		t.Fatalf("before sync: %d records, %v", len(got), err)
	}
	if l.Durable() != 0 {
		t.Fatalf("durable %d before sync", l.Durable())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := l.WaitDurable(ctx, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("wait under a long tick: %v", err)
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	got, err = readAll(t, l, 0)
	if err != nil || len(got) != 2 || l.Durable() != 1 {
		t.Fatalf("after sync: %d records, durable %d, %v", len(got), l.Durable(), err)
	}
}

func TestSyncEveryTicks(t *testing.T) {
	l := mustCreate(t, tenantPath(t), Options{Sync: SyncEvery, SyncEvery: time.Millisecond, Logger: quietLogger()})
	appendN(t, l, 3, 1, 10)
	if err := l.WaitDurable(context.Background(), 3); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 5*time.Second, func() bool { return l.Durable() == 3 })
}

func TestGroupCommitSharesOneSync(t *testing.T) {
	l := mustCreate(t, tenantPath(t), Options{Sync: SyncAlways, Logger: quietLogger()})
	for i := range 10 {
		if _, err := l.AppendNoSync(KindEngine, 1, []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	l.mu.Lock()
	before := l.syncRounds
	l.mu.Unlock()
	var wg sync.WaitGroup
	for seq := range uint64(10) {
		wg.Go(func() {
			if err := l.WaitDurable(context.Background(), seq+1); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	l.mu.Lock()
	rounds := l.syncRounds - before
	l.mu.Unlock()
	if rounds != 1 || l.Durable() != 10 {
		t.Fatalf("ten waiters took %d syncs, durable %d", rounds, l.Durable())
	}

	// Concurrent appenders under SyncAlways all land, durable.
	for range 8 {
		wg.Go(func() {
			for range 25 {
				if _, err := l.Append(KindEngine, 1, []byte("c")); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if l.Seq() != 210 || l.Durable() != 210 {
		t.Fatalf("seq %d durable %d", l.Seq(), l.Durable())
	}
}

func TestWaitDurableForALaterSeq(t *testing.T) {
	l := mustCreate(t, tenantPath(t), Options{Sync: SyncAlways, Logger: quietLogger()})
	done := make(chan error, 1)
	go func() { done <- l.WaitDurable(context.Background(), 2) }()
	appendN(t, l, 2, 1, 1)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	go func() { done <- l.WaitDurable(context.Background(), 100) }()
	mustClose(t, l)
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Fatalf("wait across close: %v", err)
	}
}

// Appends, checkpoints and readers at once: every read sees a contiguous
// run of records and the race detector sees the locking.
func TestReadWhileAppendingAndCheckpointing(t *testing.T) {
	opts := Options{Sync: SyncEvery, SyncEvery: time.Millisecond, Logger: quietLogger(), RetainBytes: 4000, indexEvery: 500}
	l := mustCreate(t, tenantPath(t), opts)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			seq := l.Seq()
			if _, err := l.Append(KindEngine, 2, body(seq+1, seq+2, 40)); err != nil {
				t.Error(err)
				return
			}
			if i%50 == 49 {
				if err := l.Checkpoint(stateWriter([]byte("s"))); err != nil {
					t.Error(err)
					return
				}
			}
		}
	})
	reads := 0
	for l.Seq() < 1000 {
		since := l.Durable()
		if since > 20 {
			since -= 20
		}
		prev := since
		err := l.ReadFrom(since, func(r Record) error {
			if r.First != prev+1 {
				return errors.New("records out of order")
			}
			prev = r.Last
			return nil
		})
		if err != nil && !errors.Is(err, ErrCursorGone) {
			t.Fatalf("read from %d: %v", since, err)
		}
		reads++
	}
	close(stop)
	wg.Wait()
	if reads == 0 {
		t.Fatal("no reads ran")
	}
}

// A fork at the seq a checkpoint or compact keeps records from is kept with
// them: a replica at that seq must still be sent the fork.
func TestForkAtTheKeptBoundaryIsKept(t *testing.T) {
	opts := testOptions()
	opts.indexEvery = 1
	l := mustCreate(t, tenantPath(t), opts)
	appendN(t, l, 3, 1, 10) // seq 3
	h, err := l.Fork()
	if err != nil {
		t.Fatal(err)
	}
	forkAt := func(since uint64) bool {
		t.Helper()
		recs, err := readAll(t, l, since)
		if err != nil {
			t.Fatalf("read from %d: %v", since, err)
		}
		return len(recs) > 0 && recs[0].Kind == KindFork && forkHistory(recs[0].Body) == h
	}
	for range 2 { // a second compact finds the fork kept by the first
		if err := l.Compact(stateWriter(nil)); err != nil {
			t.Fatal(err)
		}
		if !forkAt(3) {
			t.Fatal("compact dropped the fork at its seq")
		}
	}
	// Keeping just the block after the fork would leave the fork out, so
	// the checkpoint keeps both or neither.
	b := appendN(t, l, 1, 1, 10)
	l.opts.RetainBytes = l.RecordSize(KindEngine, 1, len(b[0].Body))
	if err := l.Checkpoint(stateWriter(nil)); err != nil {
		t.Fatal(err)
	}
	if _, err := readAll(t, l, 3); err == nil && !forkAt(3) {
		t.Fatal("cursor 3 served without its fork")
	}
	l.opts.RetainBytes = 1 << 20
	appendN(t, l, 2, 1, 10)
	if _, err := l.Fork(); err != nil {
		t.Fatal(err)
	}
	h = l.History()
	b = appendN(t, l, 1, 1, 10)
	l.opts.RetainBytes = l.RecordSize(KindEngine, 1, len(b[0].Body))
	if err := l.Checkpoint(stateWriter(nil)); err != nil {
		t.Fatal(err)
	}
	if _, err := readAll(t, l, 6); err == nil && !forkAt(6) {
		t.Fatal("cursor 6 served without its fork")
	}
}
