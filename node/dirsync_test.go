package node

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
)

// Callers at once share an fsync of the directory, but none returns on an
// fsync that began before its call.
func TestDirSyncsShared(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan error)
		var calls, returned atomic.Int32
		s := newDirSyncer("d", func(string) error { calls.Add(1); return <-release })
		var wg sync.WaitGroup
		errs := make(chan error, 6)
		call := func() { errs <- s.sync(); returned.Add(1) }
		wg.Go(call)
		synctest.Wait() // the first caller runs fsync 1
		for range 5 {
			wg.Go(call)
		}
		synctest.Wait() // five more wait: fsync 1 may have missed their changes
		if got := calls.Load(); got != 1 {
			t.Fatalf("%d fsyncs under way, want 1", got)
		}
		release <- nil // fsync 1 ends
		synctest.Wait()
		if got := returned.Load(); got != 1 {
			t.Fatalf("%d callers returned on an fsync begun before their call", got-1)
		}
		if got := calls.Load(); got != 2 {
			t.Fatalf("%d fsyncs begun, want 2 (one for the five)", got)
		}
		release <- nil // fsync 2 ends: all five return
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		if got := calls.Load(); got != 2 {
			t.Fatalf("%d fsyncs for six callers, want 2", got)
		}
	})
}

// A failed fsync is its callers' error; the next caller syncs again.
func TestDirSyncErrorAndNextSync(t *testing.T) {
	boom := errors.New("disk gone")
	results := []error{boom, nil}
	var calls int
	s := newDirSyncer("d", func(string) error { calls++; return results[calls-1] })
	if err := s.sync(); !errors.Is(err, boom) {
		t.Fatalf("first sync: %v, want %v", err, boom)
	}
	if err := s.sync(); err != nil || calls != 2 {
		t.Fatalf("second sync: %v after %d fsyncs, want nil after 2", err, calls)
	}
}

// syncDir syncs a real directory.
func TestSyncDirReal(t *testing.T) {
	if err := syncDir(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	if err := syncDir(t.TempDir() + "/missing"); err == nil {
		t.Fatal("a missing directory synced")
	}
}
