package global

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
)

// follower is one directory's records held by a Tracked, kept current by
// reading its watch, as a region's link holds them.
type follower struct {
	t     *Tracked
	ch    <-chan WatchResponse
	dirty *Dirty
}

func follow(t *testing.T, ctx context.Context, d Directory, dirty *Dirty) *follower {
	t.Helper()
	kvs, rev, err := d.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	ch, err := d.Watch(ctx, "", rev)
	if err != nil {
		t.Fatal(err)
	}
	dirty.MarkAll()
	return &follower{t: NewTracked(kvs, rev), ch: ch, dirty: dirty}
}

// upTo reads the watch until the records are current to rev.
func (f *follower) upTo(t *testing.T, ctx context.Context, rev int64) {
	t.Helper()
	for f.t.Rev() < rev {
		select {
		case r, ok := <-f.ch:
			if !ok || r.Err != nil {
				t.Fatalf("watch ended: %v", r.Err)
			}
			f.t.Apply(r, func(key string, _ int64) { f.dirty.Mark(key) })
		case <-ctx.Done():
			t.Fatalf("watch did not reach %d", rev)
		}
	}
}

func rev(t *testing.T, ctx context.Context, d Directory) int64 {
	t.Helper()
	_, r, err := d.List(ctx, KeyName)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// countingDir counts the reads of a directory that return every record
// of a prefix.
type countingDir struct {
	Directory
	lists int
}

func (c *countingDir) List(ctx context.Context, prefix string) ([]KV, int64, error) {
	c.lists++
	return c.Directory.List(ctx, prefix)
}

// A change is copied from the records held, without reading either
// directory again: after the first sync, a sync of one tenant's change
// lists nothing, looks at that tenant and its quota alone, and leaves the
// copy exactly as a full Sync would.
func TestSyncTrackedCopiesAChangeWithoutReading(t *testing.T) {
	ctx := testCtx(t)
	gd, rd := &countingDir{Directory: NewMemory()}, &countingDir{Directory: NewMemory()}
	g, r := NewStore(gd), NewStore(rd)
	tx := g.Txn().PutNode("e1", 0, Node{Addr: "http://e1", Region: "eu"}).PutNode("u1", 0, Node{Addr: "http://u1", Region: "us"})
	for i := range 500 {
		tx = tx.PutTenant(fmt.Sprintf("t%03d", i), 0, Tenant{Node: []string{"e1", "u1"}[i%2], State: StateActive})
	}
	if _, err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	var dirty Dirty
	src, dst := follow(t, ctx, gd, &dirty), follow(t, ctx, rd, &dirty)
	m := Mirror{Region: "eu"}
	res, err := m.SyncTracked(ctx, r, src.t, dst.t, &dirty)
	if err != nil || res.Put != 251 {
		t.Fatalf("first sync: %+v %v", res, err)
	}
	dirty.Reset()
	dst.upTo(t, ctx, res.Written[len(res.Written)-1])
	dirty.Reset()
	lists := gd.lists + rd.lists
	at, err := g.GetTenant(ctx, "t000")
	if err != nil {
		t.Fatal(err)
	}
	w, err := g.UpdateTenant(ctx, "t000", at, func(rec *Tenant) error { rec.Replica = "e9"; return nil })
	if err != nil {
		t.Fatal(err)
	}
	src.upTo(t, ctx, w.Rev)
	if dirty.Len() != 1 || dirty.All() {
		t.Fatalf("one change marked %d keys (all: %v)", dirty.Len(), dirty.All())
	}
	res, err = m.SyncTracked(ctx, r, src.t, dst.t, &dirty)
	if err != nil || res.Put != 1 || res.Deleted != 0 {
		t.Fatalf("one change: %+v %v", res, err)
	}
	if n := gd.lists + rd.lists - lists; n != 0 {
		t.Fatalf("one change listed a directory %d times", n)
	}
	if got, _ := r.GetTenant(ctx, "t000"); got.Value.Replica != "e9" {
		t.Fatalf("copy: %+v", got.Value)
	}
	if res, err := (Mirror{From: gd, Region: "eu"}).Sync(ctx, r); err != nil || res.Put+res.Deleted != 0 {
		t.Fatalf("a full sync after it found %+v %v", res, err)
	}
}

// Random changes of both directories, synced from what their watches
// bring after each few, never leave the copy behind: a full Sync (which
// reads both whole) finds nothing to write at the end, going down and
// going up. The changes move tenants between regions, move a node
// between regions (every tenant on it comes or goes), delete nodes,
// tenants and quotas, write the copy behind the mirror's back, and some
// are made between a sync's read and its write (it fails on the
// conflict and the next sync puts it right).
func TestSyncTrackedConvergesUnderRandomChanges(t *testing.T) {
	for _, up := range []bool{false, true} {
		t.Run(fmt.Sprintf("up=%v", up), func(t *testing.T) {
			for seed := range uint64(20) {
				randomMirrorRun(t, up, seed)
			}
		})
	}
}

func randomMirrorRun(t *testing.T, up bool, seed uint64) {
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	rnd := rand.New(rand.NewPCG(seed, 7))
	fromD, toD := NewMemory(), NewMemory()
	defer fromD.Close()
	defer toD.Close()
	from, to := NewStore(fromD), NewStore(toD)
	nodes := []string{"e1", "e2", "u1", "u2"}
	regionOf := map[string]string{"e1": "eu", "e2": "eu", "u1": "us", "u2": "us"}
	put := func(s *Store, key string, v any) {
		b, err := encode(v)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.dir.Put(ctx, key, b); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range nodes {
		put(from, NodeKey(n), Node{Addr: "http://" + n, Region: regionOf[n]})
	}
	change := func(s *Store) {
		tn := fmt.Sprintf("t%d", rnd.IntN(30))
		switch k := rnd.IntN(10); {
		case k < 5:
			put(s, TenantKey(tn), Tenant{Node: nodes[rnd.IntN(len(nodes))], State: StateActive, Lineage: rnd.Uint64N(5)})
		case k < 7:
			put(s, QuotaKey(tn), Quota{Rows: int64(rnd.IntN(100))})
		case k < 8:
			if _, err := s.dir.Delete(ctx, TenantKey(tn)); err != nil {
				t.Fatal(err)
			}
		case k < 9:
			if _, err := s.dir.Delete(ctx, QuotaKey(tn)); err != nil {
				t.Fatal(err)
			}
		default:
			n := nodes[rnd.IntN(len(nodes))]
			if rnd.IntN(4) == 0 {
				if _, err := s.dir.Delete(ctx, NodeKey(n)); err != nil {
					t.Fatal(err)
				}
				return
			}
			put(s, NodeKey(n), Node{Addr: "http://" + n, Region: []string{"eu", "us"}[rnd.IntN(2)]})
		}
	}
	var dirty Dirty
	src, dst := follow(t, ctx, fromD, &dirty), follow(t, ctx, toD, &dirty)
	m := Mirror{Region: "eu", Up: up}
	for range 40 {
		for range rnd.IntN(6) {
			change(from)
		}
		if rnd.IntN(5) == 0 {
			change(to) // the copy written behind the mirror's back
		}
		src.upTo(t, ctx, rev(t, ctx, fromD))
		dst.upTo(t, ctx, rev(t, ctx, toD))
		if rnd.IntN(4) == 0 {
			change(to) // between the read and the write: a conflict
		}
		res, err := m.SyncTracked(ctx, to, src.t, dst.t, &dirty)
		if err != nil && !errors.Is(err, ErrConflict) {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if err == nil {
			dirty.Reset()
		}
		if n := len(res.Written); n > 0 {
			dst.upTo(t, ctx, res.Written[n-1])
		}
	}
	// Quiet: one last sync from the watches must leave nothing to do.
	src.upTo(t, ctx, rev(t, ctx, fromD))
	dst.upTo(t, ctx, rev(t, ctx, toD))
	if _, err := m.SyncTracked(ctx, to, src.t, dst.t, &dirty); err != nil {
		t.Fatalf("seed %d: last sync: %v", seed, err)
	}
	full := Mirror{From: fromD, Region: "eu", Up: up}
	if res, err := full.Sync(ctx, to); err != nil || res.Put+res.Deleted != 0 {
		t.Fatalf("seed %d (up %v): a full sync after the tracked ones wrote %+v %v: the copy was behind", seed, up, res, err)
	}
}
