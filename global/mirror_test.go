package global

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
)

// The mirror copies exactly one region's records — its nodes, the tenants
// on them and their quotas, and the longest-lease record — and follows the
// global directory as it changes: a tenant failed over or moved out of the
// region leaves the copy, its quota with it; a node of another region is
// never copied; the region record (each side writes its own) and the
// region directory's own meta records are never touched. A fenced copy
// whose term moved on writes nothing.
func TestMirrorCopiesOneRegion(t *testing.T) {
	ctx := testCtx(t)
	g, r := NewStore(NewMemory()), NewStore(NewMemory())
	must := func(_ int64, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(g.Txn().
		PutRegion(0, Region{Name: "eu", Leaser: LeaserGlobal}).
		PutRegion(0, Region{Name: "us", Leaser: LeaserGlobal}).
		PutNode("e1", 0, Node{Addr: "http://e1", Region: "eu"}).
		PutNode("e2", 0, Node{Addr: "http://e2", Region: "eu"}).
		PutNode("u1", 0, Node{Addr: "http://u1", Region: "us"}).
		PutTenant("a", 0, Tenant{Node: "e1", State: StateActive, Replica: "e2"}).
		PutTenant("b", 0, Tenant{Node: "u1", State: StateActive}).
		PutQuota("a", 0, Quota{Rows: 10}).
		PutQuota("b", 0, Quota{Rows: 20}).
		PutLeaseRecord(0, 2000).
		Commit(ctx))
	must(r.Txn().PutTerm(0, 7).Commit(ctx))
	m := Mirror{From: g.Directory(), Region: "eu"}
	keys := func() []string {
		t.Helper()
		kvs, _, err := r.Directory().List(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, kv := range kvs {
			out = append(out, kv.Key)
		}
		return out
	}
	sync := func() MirrorResult {
		t.Helper()
		fenced, _, err := r.Fence(ctx)
		if err != nil {
			t.Fatal(err)
		}
		res, err := m.Sync(ctx, fenced)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := sync(); res.Put != 5 || res.Deleted != 0 {
		t.Fatalf("first sync: %+v", res)
	}
	want := []string{"meta/lease_record_ms", "meta/term", "nodes/e1", "nodes/e2", "quotas/a", "tenants/a"}
	if got := keys(); !slices.Equal(got, want) {
		t.Fatalf("region directory holds %v, want %v", got, want)
	}
	if res := sync(); res.Put != 0 || res.Deleted != 0 {
		t.Fatalf("a sync with nothing changed wrote %+v", res)
	}
	// a fails over onto e2 (still eu), then moves to u1; c is placed on e2.
	a, err := g.GetTenant(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	a, err = g.Failover(ctx, "a", a, "e2", 42)
	if err != nil {
		t.Fatal(err)
	}
	must(g.Txn().PutTenant("c", 0, Tenant{Node: "e2", State: StateActive}).Commit(ctx))
	if res := sync(); res.Put != 2 || res.Deleted != 0 {
		t.Fatalf("after a failover and a new tenant: %+v", res)
	}
	got, err := r.GetTenant(ctx, "a")
	if err != nil || got.Value.Node != "e2" || got.Value.FailedFrom != "e1" || got.Value.ForkedHistory != 42 {
		t.Fatalf("a in the region directory: %+v %v", got, err)
	}
	a.Value.Node = "u1"
	must(g.Txn().PutTenant("a", a.Rev, a.Value).Commit(ctx))
	if res := sync(); res.Deleted != 2 {
		t.Fatalf("a moved out of the region: %+v", res)
	}
	if got := keys(); !slices.Equal(got, []string{"meta/lease_record_ms", "meta/term", "nodes/e1", "nodes/e2", "tenants/c"}) {
		t.Fatalf("after the move out: %v", got)
	}
	// Many changes at once go in batches.
	tx := g.Txn()
	for i := range 2*mirrorBatch + 7 {
		tx = tx.PutTenant(fmt.Sprintf("t%03d", i), 0, Tenant{Node: "e1", State: StateActive})
	}
	must(tx.Commit(ctx))
	if res := sync(); res.Put != 2*mirrorBatch+7 {
		t.Fatalf("batched: %+v", res)
	}
	// A copy fenced on a term that moved on writes nothing.
	fenced, _, err := r.Fence(ctx)
	if err != nil {
		t.Fatal(err)
	}
	term, _ := r.Term(ctx)
	must(r.Txn().PutTerm(term.Rev, 8).Commit(ctx))
	must(g.Txn().PutTenant("d", 0, Tenant{Node: "e1", State: StateActive}).Commit(ctx))
	if _, err := m.Sync(ctx, fenced); !errors.Is(err, ErrConflict) {
		t.Fatalf("a deposed copy's sync: %v", err)
	}
	if _, err := r.GetTenant(ctx, "d"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a deposed copy wrote d: %v", err)
	}
	tenants, _, _ := r.ListTenants(ctx)
	if n := len(tenants); n != 2*mirrorBatch+7+1 {
		t.Fatalf("%d tenants in the region directory: %v", n, slices.Sorted(maps.Keys(tenants))[:3])
	}
}

// Going up, the mirror makes the global directory's records of the region
// the region's: a failover the region made, a tenant it placed, one it
// deleted; other regions' records and the global directory's own lease
// record are never touched; a copy guarded on the region record writes
// nothing once the record moved on (the global tier took the region back).
func TestMirrorUp(t *testing.T) {
	ctx := testCtx(t)
	g, r := NewStore(NewMemory()), NewStore(NewMemory())
	must := func(_ int64, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(g.Txn().
		PutNode("e1", 0, Node{Addr: "http://e1", Region: "eu"}).
		PutNode("e2", 0, Node{Addr: "http://e2", Region: "eu"}).
		PutNode("u1", 0, Node{Addr: "http://u1", Region: "us"}).
		PutTenant("a", 0, Tenant{Node: "e1", State: StateActive, Replica: "e2"}).
		PutTenant("gone", 0, Tenant{Node: "e1", State: StateActive}).
		PutTenant("b", 0, Tenant{Node: "u1", State: StateActive}).
		PutQuota("b", 0, Quota{Rows: 20}).
		PutLeaseRecord(0, 2000).
		Commit(ctx))
	down := Mirror{From: g.Directory(), Region: "eu"}
	if _, err := down.Sync(ctx, r); err != nil {
		t.Fatal(err)
	}
	// The region leases: a fails over onto e2, c is placed, gone deleted.
	a, err := r.GetTenant(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Failover(ctx, "a", a, "e2", 9); err != nil {
		t.Fatal(err)
	}
	gone, _ := r.GetTenant(ctx, "gone")
	must(r.Txn().PutTenant("c", 0, Tenant{Node: "e2", State: StateActive}).PutQuota("c", 0, Quota{Rows: 5}).
		DeleteTenant("gone", gone.Rev).Commit(ctx))
	if _, err := r.LowerLeaseRecord(ctx, 500); err != nil {
		t.Fatal(err)
	}
	at, err := g.UpdateRegion(ctx, "eu", Versioned[Region]{}, func(rg *Region) error { rg.Leaser = LeaserRegion; return nil })
	if err != nil {
		t.Fatal(err)
	}
	up := Mirror{From: r.Directory(), Region: "eu", Up: true}
	guarded := g.Guarded(IfModRev(RegionKey("eu"), at.Rev))
	res, err := up.Sync(ctx, guarded)
	if err != nil || res.Put != 3 || res.Deleted != 1 {
		t.Fatalf("up: %+v %v, want a, c and c's quota written, gone removed", res, err)
	}
	if got, _ := g.GetTenant(ctx, "a"); got.Value.Node != "e2" || got.Value.FailedFrom != "e1" || got.Value.ForkedHistory != 9 {
		t.Fatalf("a in the global directory: %+v", got.Value)
	}
	if _, err := g.GetTenant(ctx, "b"); err != nil {
		t.Fatalf("another region's tenant: %v", err)
	}
	if q, _ := g.GetQuota(ctx, "b"); q.Value.Rows != 20 {
		t.Fatalf("another region's quota: %+v", q)
	}
	if rec, _ := g.LeaseRecord(ctx); rec.Value != 2000 {
		t.Fatalf("the global record copied up: %d", rec.Value)
	}
	if res, err := up.Sync(ctx, guarded); err != nil || res.Put+res.Deleted != 0 {
		t.Fatalf("nothing changed: %+v %v", res, err)
	}
	// The global tier took the region back: the region's copy writes
	// nothing.
	if _, err := g.UpdateRegion(ctx, "eu", at, func(rg *Region) error { rg.Leaser = LeaserGlobal; return nil }); err != nil {
		t.Fatal(err)
	}
	must(r.Txn().PutTenant("late", 0, Tenant{Node: "e1", State: StateActive}).Commit(ctx))
	if _, err := up.Sync(ctx, guarded); !errors.Is(err, ErrConflict) {
		t.Fatalf("a copy up after the global tier took the region back: %v", err)
	}
	if _, err := g.GetTenant(ctx, "late"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("late written: %v", err)
	}
}
