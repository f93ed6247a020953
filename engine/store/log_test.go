package store

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestRoundTrip(t *testing.T) {
	for _, mode := range []SyncMode{SyncEvery, SyncAlways, SyncOff} {
		t.Run(map[SyncMode]string{SyncEvery: "every", SyncAlways: "always", SyncOff: "off"}[mode], func(t *testing.T) {
			path := tenantPath(t)
			opts := testOptions()
			opts.Sync = mode
			l := mustCreate(t, path, opts)
			if l.Seq() != 0 || len(l.Lineage()) != 1 || l.Lineage()[0].From != 0 || l.History() == 0 {
				t.Fatalf("new log: seq %d lineage %v", l.Seq(), l.Lineage())
			}
			h := l.History()
			var want []Record
			want = append(want, appendN(t, l, 5, 3, 40)...)
			zero, err := l.Append(KindEngine+1, 0, []byte("no writes"))
			if err != nil {
				t.Fatal(err)
			}
			if zero.First != 16 || zero.Last != 15 || zero.N() != 0 {
				t.Fatalf("n=0 record: %d-%d", zero.First, zero.Last)
			}
			want = append(want, zero)
			want = append(want, appendN(t, l, 3, 1, 0)...)
			if l.Seq() != 18 {
				t.Fatalf("seq %d, want 18", l.Seq())
			}
			if err := l.WaitDurable(context.Background(), 18); err != nil {
				t.Fatal(err)
			}
			if l.Durable() != 18 {
				t.Fatalf("durable %d", l.Durable())
			}
			size := l.Size()
			mustClose(t, l)
			if err := l.Close(); err != nil {
				t.Fatalf("second close: %v", err)
			}
			if mode == SyncEvery {
				size += frameSize(KindBound, 19, 18, len(boundBody(18))) // a clean close's bound
			}

			l2, c := mustOpen(t, path, opts)
			if c.hadImage {
				t.Fatal("new file replayed an image")
			}
			sameRecords(t, c.recs, want)
			if l2.Seq() != 18 || l2.Durable() != 18 || l2.History() != h || l2.Size() != size {
				t.Fatalf("reopened: seq %d durable %d history %x size %d (want %d)", l2.Seq(), l2.Durable(), l2.History(), l2.Size(), size)
			}
		})
	}
}

func TestAppendRefusals(t *testing.T) {
	path := tenantPath(t)
	l := mustCreate(t, path, testOptions())
	if _, err := l.Append(KindFork, 0, nil); !errors.Is(err, ErrBadKind) {
		t.Fatalf("append of a store kind: %v", err)
	}
	if _, err := Create(path, testOptions()); !errors.Is(err, ErrExist) {
		t.Fatalf("create over an existing file: %v", err)
	}
	mustClose(t, l)
	if _, err := l.Append(KindEngine, 1, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("append after close: %v", err)
	}
	if _, err := Open(path+".nope", testOptions(), nil); !errors.Is(err, ErrNotExist) {
		t.Fatalf("open of a missing file: %v", err)
	}
}

func TestRecordSizeIsExact(t *testing.T) {
	l := mustCreate(t, tenantPath(t), testOptions())
	for _, tc := range []struct {
		n    uint64
		size int
	}{{1, 0}, {3, 10}, {200, 5000}, {0, 7}, {1 << 20, 100}} {
		want := l.RecordSize(KindEngine, tc.n, tc.size)
		before := l.Size()
		if _, err := l.Append(KindEngine, tc.n, make([]byte, tc.size)); err != nil {
			t.Fatal(err)
		}
		if got := l.Size() - before; got != want {
			t.Fatalf("n %d body %d: grew %d, RecordSize said %d", tc.n, tc.size, got, want)
		}
	}
}

func TestForkAndHolds(t *testing.T) {
	path := tenantPath(t)
	l := mustCreate(t, path, testOptions())
	h0 := l.History()
	appendN(t, l, 1, 10, 5) // seq 10
	h1, err := l.Fork()
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, l, 1, 5, 5) // seq 15
	h2, err := l.Fork()
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, l, 1, 2, 5) // seq 17
	if l.History() != h2 || h1 == h0 || h2 == h1 {
		t.Fatalf("histories %x %x %x, current %x", h0, h1, h2, l.History())
	}
	wantLineage := []LineageEntry{{h0, 0}, {h1, 10}, {h2, 15}}
	check := func(l *Log) {
		t.Helper()
		got := l.Lineage()
		if len(got) != len(wantLineage) {
			t.Fatalf("lineage %v, want %v", got, wantLineage)
		}
		for i := range got {
			if got[i] != wantLineage[i] {
				t.Fatalf("lineage %v, want %v", got, wantLineage)
			}
		}
		for _, tc := range []struct {
			h    uint64
			seq  uint64
			want bool
		}{
			{h0, 0, true}, {h0, 10, true}, {h0, 11, false},
			{h1, 3, true}, {h1, 11, true}, {h1, 15, true}, {h1, 16, false},
			{h2, 16, true}, {h2, 17, true}, {h2, 18, false},
			{12345, 1, false}, {0, 0, false},
		} {
			if got := l.Holds(tc.h, tc.seq); got != tc.want {
				t.Errorf("Holds(%x, %d) = %v, want %v", tc.h, tc.seq, got, tc.want)
			}
		}
	}
	check(l)
	mustClose(t, l)
	l2, c := mustOpen(t, path, testOptions())
	if len(c.recs) != 3 {
		t.Fatalf("replayed %d engine records, want 3 (forks are the store's)", len(c.recs))
	}
	check(l2)
}

func TestFailedWriteStopsTheLog(t *testing.T) {
	for _, mode := range []SyncMode{SyncAlways, SyncOff} {
		path := tenantPath(t)
		l, err := Create(path, Options{Sync: mode, Logger: quietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		appendN(t, l, 2, 1, 10)
		// Take the descriptor away under the Log: the write fails, and so
		// does cutting it back, so nothing more may be written.
		l.mu.Lock()
		l.file.f.Close()
		l.mu.Unlock()
		if _, err := l.Append(KindEngine, 1, []byte("lost")); !errors.Is(err, ErrFailed) {
			t.Fatalf("append on a broken file: %v", err)
		}
		if _, err := l.Append(KindEngine, 1, []byte("again")); !errors.Is(err, ErrFailed) {
			t.Fatalf("append after a failure: %v", err)
		}
		if _, err := l.Fork(); !errors.Is(err, ErrFailed) {
			t.Fatalf("fork after a failure: %v", err)
		}
		if err := l.WaitDurable(context.Background(), 3); !errors.Is(err, ErrFailed) {
			t.Fatalf("wait after a failure: %v", err)
		}
		if l.Seq() != 2 {
			t.Fatalf("seq %d after a failed append", l.Seq())
		}
		l.Close()
		l2, c := mustOpen(t, path, testOptions())
		if len(c.recs) != 2 || l2.Seq() != 2 {
			t.Fatalf("reopened: %d records, seq %d", len(c.recs), l2.Seq())
		}
		mustClose(t, l2)
	}
}

func TestForkIsSyncedWhateverTheMode(t *testing.T) {
	for _, mode := range []SyncMode{SyncEvery, SyncOff} {
		l := mustCreate(t, tenantPath(t), Options{Sync: mode, SyncEvery: time.Hour, Logger: quietLogger()})
		if _, err := l.AppendNoSync(KindEngine, 1, []byte("pending")); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Fork(); err != nil {
			t.Fatal(err)
		}
		l.mu.Lock()
		synced := l.durableLSN == l.appended
		l.mu.Unlock()
		if !synced || l.Durable() != 1 {
			t.Fatalf("mode %d: fork left unsynced bytes (durable %d)", mode, l.Durable())
		}
		// The fork is served to replicas at once.
		recs, err := readAll(t, l, 1)
		if err != nil || len(recs) != 1 || recs[0].Kind != KindFork {
			t.Fatalf("mode %d: read after fork: %d records, %v", mode, len(recs), err)
		}
	}
}

func TestUnknownSyncModeRefused(t *testing.T) {
	if _, err := Create(tenantPath(t), Options{Sync: SyncMode(9)}); err == nil {
		t.Fatal("created a log with an unknown sync mode")
	}
}

// History ids fit 53 bits, so JSON carries them exactly to any client,
// and they still vary: a thousand draws give a thousand ids.
func TestHistoryIdsFitAFloat(t *testing.T) {
	seen := make(map[uint64]bool)
	high := false
	for range 1000 {
		h := newHistory()
		if h == 0 || h > maxHistory || uint64(float64(h)) != h {
			t.Fatalf("history %d does not go through a float64 exactly", h)
		}
		high = high || h > 1<<52
		seen[h] = true
	}
	if len(seen) != 1000 || !high {
		t.Fatalf("%d distinct ids of 1000, any above 2^52: %v", len(seen), high)
	}
}
