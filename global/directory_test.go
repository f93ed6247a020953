package global

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/fenec-go/fenec/internal/testkit"
)

// TestDirectory is the one suite every Directory implementation passes.
func TestDirectory(t *testing.T) {
	cases := []struct {
		name string
		fn   func(t *testing.T, open func(testing.TB) Directory)
	}{
		{"GetPut", testGetPut},
		{"Delete", testDelete},
		{"List", testList},
		{"CAS", testCAS},
		{"TxnAtomic", testTxnAtomic},
		{"CASLinearizable", testCASLinearizable},
		{"WatchInOrder", testWatchInOrder},
		{"WatchFromPast", testWatchFromPast},
		{"WatchFromList", testWatchFromList},
		{"WatchCompacted", testWatchCompacted},
		{"WatchCancel", testWatchCancel},
		{"CloseStopsWatches", testCloseStopsWatches},
	}
	forEachDirectory(t, func(t *testing.T, open func(testing.TB) Directory) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) { c.fn(t, open) })
		}
	})
}

func mustPut(t testing.TB, d Directory, key, value string) int64 {
	t.Helper()
	rev, err := d.Put(testCtx(t), key, []byte(value))
	if err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
	return rev
}

func mustGet(t testing.TB, d Directory, key string) KV {
	t.Helper()
	kv, err := d.Get(testCtx(t), key)
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	return kv
}

func testGetPut(t *testing.T, open func(testing.TB) Directory) {
	d := open(t)
	ctx := testCtx(t)
	if _, err := d.Get(ctx, "a"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("get absent: err %v, want ErrNotFound", err)
	}
	r1 := mustPut(t, d, "a", "one")
	kv := mustGet(t, d, "a")
	if string(kv.Value) != "one" || kv.ModRev != r1 || kv.Key != "a" {
		t.Fatalf("got %+v, want a=one at %d", kv, r1)
	}
	r2 := mustPut(t, d, "a", "two")
	if r2 <= r1 {
		t.Fatalf("second put at %d, not after %d", r2, r1)
	}
	if kv := mustGet(t, d, "a"); string(kv.Value) != "two" || kv.ModRev != r2 {
		t.Fatalf("got %+v, want a=two at %d", kv, r2)
	}
	if _, err := d.Put(ctx, "", []byte("x")); !errors.Is(err, ErrInvalidKey) {
		t.Fatalf("put empty key: err %v, want ErrInvalidKey", err)
	}
}

func testDelete(t *testing.T, open func(testing.TB) Directory) {
	d := open(t)
	ctx := testCtx(t)
	r1 := mustPut(t, d, "a", "one")
	r2, err := d.Delete(ctx, "a")
	if err != nil || r2 <= r1 {
		t.Fatalf("delete: rev %d err %v, want a rev after %d", r2, err, r1)
	}
	if _, err := d.Get(ctx, "a"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("get deleted: err %v, want ErrNotFound", err)
	}
	if _, err := d.Delete(ctx, "a"); err != nil {
		t.Fatalf("delete absent: %v", err)
	}
}

func testList(t *testing.T, open func(testing.TB) Directory) {
	d := open(t)
	mustPut(t, d, "tenants/b", "2")
	mustPut(t, d, "tenants/a", "1")
	mustPut(t, d, "nodes/n1", "x")
	last := mustPut(t, d, "tenants/c", "3")
	kvs, rev, err := d.List(testCtx(t), "tenants/")
	if err != nil {
		t.Fatal(err)
	}
	if rev < last {
		t.Fatalf("list at %d, before the last write %d", rev, last)
	}
	var got []string
	for _, kv := range kvs {
		got = append(got, kv.Key+"="+string(kv.Value))
	}
	want := []string{"tenants/a=1", "tenants/b=2", "tenants/c=3"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("list got %v, want %v", got, want)
	}
	all, _, err := d.List(testCtx(t), "")
	if err != nil || len(all) != 4 {
		t.Fatalf("list all: %d keys, err %v; want 4", len(all), err)
	}
}

func testCAS(t *testing.T, open func(testing.TB) Directory) {
	d := open(t)
	ctx := testCtx(t)
	r1, err := d.Txn(ctx, []Cond{IfAbsent("k")}, []Op{OpPut("k", []byte("v1"))})
	if err != nil {
		t.Fatalf("create if absent: %v", err)
	}
	if _, err := d.Txn(ctx, []Cond{IfAbsent("k")}, []Op{OpPut("k", []byte("again"))}); !errors.Is(err, ErrConflict) {
		t.Fatalf("create over present key: err %v, want ErrConflict", err)
	}
	r2, err := d.Txn(ctx, []Cond{IfModRev("k", r1)}, []Op{OpPut("k", []byte("v2"))})
	if err != nil {
		t.Fatalf("swap at read revision: %v", err)
	}
	if _, err := d.Txn(ctx, []Cond{IfModRev("k", r1)}, []Op{OpPut("k", []byte("stale"))}); !errors.Is(err, ErrConflict) {
		t.Fatalf("swap at stale revision: err %v, want ErrConflict", err)
	}
	if kv := mustGet(t, d, "k"); string(kv.Value) != "v2" || kv.ModRev != r2 {
		t.Fatalf("after conflict got %+v, want v2 at %d", kv, r2)
	}
	if _, err := d.Txn(ctx, []Cond{IfModRev("k", r2)}, []Op{OpDelete("k")}); err != nil {
		t.Fatalf("delete at read revision: %v", err)
	}
	if _, err := d.Get(ctx, "k"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("after conditioned delete: err %v, want ErrNotFound", err)
	}
}

func testTxnAtomic(t *testing.T, open func(testing.TB) Directory) {
	d := open(t)
	ctx := testCtx(t)
	ra := mustPut(t, d, "a", "a0")
	rb := mustPut(t, d, "b", "b0")
	mustPut(t, d, "b", "b1") // b moves on: rb is stale
	ops := []Op{OpPut("a", []byte("a2")), OpPut("b", []byte("b2")), OpPut("c", []byte("c2")), OpDelete("d")}
	if _, err := d.Txn(ctx, []Cond{IfModRev("a", ra), IfModRev("b", rb), IfAbsent("c")}, ops); !errors.Is(err, ErrConflict) {
		t.Fatalf("txn with one stale condition: err %v, want ErrConflict", err)
	}
	if kv := mustGet(t, d, "a"); string(kv.Value) != "a0" {
		t.Fatalf("a written by a failed txn: %q", kv.Value)
	}
	if _, err := d.Get(ctx, "c"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("c written by a failed txn: err %v", err)
	}
	rb = mustGet(t, d, "b").ModRev
	mustPut(t, d, "d", "d0")
	rev, err := d.Txn(ctx, []Cond{IfModRev("a", ra), IfModRev("b", rb), IfAbsent("c")}, ops)
	if err != nil {
		t.Fatalf("txn with every condition holding: %v", err)
	}
	for k, want := range map[string]string{"a": "a2", "b": "b2", "c": "c2"} {
		if kv := mustGet(t, d, k); string(kv.Value) != want || kv.ModRev != rev {
			t.Fatalf("%s: got %+v, want %s at %d", k, kv, want, rev)
		}
	}
	if _, err := d.Get(ctx, "d"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("d not deleted by the txn: err %v", err)
	}
}

// collect reads responses until n events arrived, failing on an error.
func collect(t testing.TB, ch <-chan WatchResponse, n int) []Event {
	t.Helper()
	ctx := testCtx(t)
	var out []Event
	for len(out) < n {
		select {
		case r, ok := <-ch:
			if !ok {
				t.Fatalf("watch closed after %d of %d events", len(out), n)
			}
			if r.Err != nil {
				t.Fatalf("watch error after %d events: %v", len(out), r.Err)
			}
			for _, ev := range r.Events {
				if ev.KV.ModRev > r.Revision {
					t.Fatalf("event at %d in a response at %d", ev.KV.ModRev, r.Revision)
				}
			}
			out = append(out, r.Events...)
		case <-ctx.Done():
			t.Fatalf("waited for %d events, got %d", n, len(out))
		}
	}
	return out
}

func describe(evs []Event) []string {
	var out []string
	for _, ev := range evs {
		out = append(out, fmt.Sprintf("%s %s=%s", ev.Type, ev.KV.Key, ev.KV.Value))
	}
	return out
}

func testWatchInOrder(t *testing.T, open func(testing.TB) Directory) {
	d := open(t)
	ctx := testCtx(t)
	mustPut(t, d, "w/before", "x")
	_, start, err := d.List(ctx, "w/")
	if err != nil {
		t.Fatal(err)
	}
	ch, err := d.Watch(ctx, "w/", start)
	if err != nil {
		t.Fatal(err)
	}
	r1 := mustPut(t, d, "w/a", "1")
	mustPut(t, d, "other", "not watched")
	r2 := mustPut(t, d, "w/b", "2")
	if _, err := d.Delete(ctx, "w/a"); err != nil {
		t.Fatal(err)
	}
	rt, err := d.Txn(ctx, nil, []Op{OpPut("w/c", []byte("3")), OpPut("w/d", []byte("4"))})
	if err != nil {
		t.Fatal(err)
	}
	evs := collect(t, ch, 5)
	want := []string{"put w/a=1", "put w/b=2", "delete w/a=", "put w/c=3", "put w/d=4"}
	if fmt.Sprint(describe(evs)) != fmt.Sprint(want) {
		t.Fatalf("events %v, want %v", describe(evs), want)
	}
	if evs[0].KV.ModRev != r1 || evs[1].KV.ModRev != r2 || evs[3].KV.ModRev != rt || evs[4].KV.ModRev != rt {
		t.Fatalf("event revisions %d %d %d %d, want %d %d %d %d",
			evs[0].KV.ModRev, evs[1].KV.ModRev, evs[3].KV.ModRev, evs[4].KV.ModRev, r1, r2, rt, rt)
	}
	if evs[2].KV.ModRev <= r2 || evs[2].KV.ModRev >= rt {
		t.Fatalf("delete at %d, want between %d and %d", evs[2].KV.ModRev, r2, rt)
	}
}

func testWatchFromPast(t *testing.T, open func(testing.TB) Directory) {
	d := open(t)
	ctx := testCtx(t)
	r0 := mustPut(t, d, "p/a", "1")
	mustPut(t, d, "p/b", "2")
	mustPut(t, d, "p/a", "3")
	ch, err := d.Watch(ctx, "p/", r0)
	if err != nil {
		t.Fatal(err)
	}
	got := describe(collect(t, ch, 2))
	if want := []string{"put p/b=2", "put p/a=3"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("replayed %v, want %v", got, want)
	}
}

// testWatchFromList lists while a writer runs, watches from the list's
// revision, and checks that list plus events equal the final state.
func testWatchFromList(t *testing.T, open func(testing.TB) Directory) {
	d := open(t)
	ctx := testCtx(t)
	const keys, rounds = 8, 25
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range rounds {
			for k := range keys {
				key := fmt.Sprintf("l/%d", k)
				if (i+k)%5 == 4 {
					d.Delete(ctx, key)
					continue
				}
				d.Put(ctx, key, fmt.Appendf(nil, "%d", i))
			}
		}
	})
	// List once the writer is under way.
	testkit.Eventually(t, testTimeout, func() error {
		kvs, _, err := d.List(ctx, "l/")
		if err != nil || len(kvs) < keys/2 {
			return fmt.Errorf("%d keys, err %v", len(kvs), err)
		}
		return nil
	})
	kvs, rev, err := d.List(ctx, "l/")
	if err != nil {
		t.Fatal(err)
	}
	state := map[string]string{}
	for _, kv := range kvs {
		state[kv.Key] = string(kv.Value)
	}
	ch, err := d.Watch(ctx, "l/", rev)
	if err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	final, finalRev, err := d.List(ctx, "l/")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, kv := range final {
		want[kv.Key] = string(kv.Value)
	}
	last := rev
	for last < finalRev && fmt.Sprint(state) != fmt.Sprint(want) {
		select {
		case r, ok := <-ch:
			if !ok || r.Err != nil {
				t.Fatalf("watch ended: %v", r.Err)
			}
			for _, ev := range r.Events {
				if ev.KV.ModRev <= last-1 || ev.KV.ModRev <= rev {
					t.Fatalf("event at %d out of order (last %d, list %d)", ev.KV.ModRev, last, rev)
				}
				last = ev.KV.ModRev
				if ev.Type == EventDelete {
					delete(state, ev.KV.Key)
				} else {
					state[ev.KV.Key] = string(ev.KV.Value)
				}
			}
		case <-ctx.Done():
			t.Fatalf("state %v never reached %v", state, want)
		}
	}
	if fmt.Sprint(state) != fmt.Sprint(want) {
		t.Fatalf("list plus events %v, want %v", state, want)
	}
}

func testWatchCompacted(t *testing.T, open func(testing.TB) Directory) {
	d := open(t)
	ctx := testCtx(t)
	r0 := mustPut(t, d, "c/a", "1")
	mustPut(t, d, "c/a", "2")
	r2 := mustPut(t, d, "c/a", "3")
	if err := d.Compact(ctx, r2); err != nil {
		t.Fatalf("compact: %v", err)
	}
	if err := d.Compact(ctx, r2+1000000); !errors.Is(err, ErrFutureRevision) {
		t.Fatalf("compact the future: err %v, want ErrFutureRevision", err)
	}
	ch, err := d.Watch(ctx, "c/", r0)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-ch:
		if !errors.Is(r.Err, ErrCompacted) {
			t.Fatalf("watch from a compacted revision: %+v, want ErrCompacted", r)
		}
	case <-ctx.Done():
		t.Fatal("no answer from a watch on a compacted revision")
	}
	if _, ok := <-ch; ok {
		t.Fatal("watch not closed after its error")
	}
	// From the current revision the watch works.
	ch, err = d.Watch(ctx, "c/", r2)
	if err != nil {
		t.Fatal(err)
	}
	mustPut(t, d, "c/b", "4")
	if got := describe(collect(t, ch, 1)); got[0] != "put c/b=4" {
		t.Fatalf("after compaction got %v", got)
	}
}

func testWatchCancel(t *testing.T, open func(testing.TB) Directory) {
	d := open(t)
	ctx, cancel := context.WithCancel(testCtx(t))
	_, rev, err := d.List(ctx, "x/")
	if err != nil {
		t.Fatal(err)
	}
	ch, err := d.Watch(ctx, "x/", rev)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	for r := range ch {
		if r.Err != nil && !errors.Is(r.Err, context.Canceled) {
			t.Fatalf("cancelled watch: %v", r.Err)
		}
	}
}

func testCloseStopsWatches(t *testing.T, open func(testing.TB) Directory) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	d := open(t)
	ctx := testCtx(t)
	_, rev, err := d.List(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	var chans []<-chan WatchResponse
	for i := range 3 {
		ch, err := d.Watch(ctx, fmt.Sprintf("s%d/", i), rev)
		if err != nil {
			t.Fatal(err)
		}
		chans = append(chans, ch)
	}
	mustPut(t, d, "s0/a", "1")
	collect(t, chans[0], 1)
	if err := d.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if err := d.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	for _, ch := range chans {
		for range ch {
		}
	}
	if _, err := d.Get(ctx, "s0/a"); !errors.Is(err, ErrClosed) {
		t.Fatalf("get after close: err %v, want ErrClosed", err)
	}
	if _, err := d.Watch(ctx, "s0/", rev); !errors.Is(err, ErrClosed) {
		t.Fatalf("watch after close: err %v, want ErrClosed", err)
	}
}
