package global

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/fenec-go/fenec/internal/testkit"
)

// farKeys lists the far records d holds, with the node each far tenant's
// names, as "key" or "key@node".
func farKeys(t *testing.T, ctx context.Context, d Directory) []string {
	t.Helper()
	var out []string
	for _, p := range []string{PrefixFarTenants, PrefixFarNodes} {
		kvs, _, err := d.List(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		for _, kv := range kvs {
			k := kv.Key
			if strings.HasPrefix(k, PrefixFarTenants) {
				ten, err := decode[Tenant](kv)
				if err != nil {
					t.Fatal(err)
				}
				k += "@" + ten.Value.Node
			}
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// A region's directory holds the records of the tenants homed elsewhere
// with a read copy or their replica on one of its nodes, and of their
// primaries' nodes, and nothing else; the region's own records stay as
// they are. A failover of such a tenant, its read copy dropped, and its
// deletion reach the region's directory from the watches alone, and each
// time a full Sync finds nothing left to write. Run against the memory
// directory, embedded etcd, and a sealing directory.
func TestFarRecordsFollowTheGlobalDirectory(t *testing.T) {
	forEachDirectory(t, func(t *testing.T, open func(t testing.TB) Directory) {
		ctx, cancel := context.WithCancel(testCtx(t))
		defer cancel()
		gd, rd := open(t), open(t)
		g, r := NewStore(gd), NewStore(rd)
		grev, err := g.Txn().
			PutNode("e1", 0, Node{Addr: "http://e1", Region: "eu"}).
			PutNode("e2", 0, Node{Addr: "http://e2", Region: "eu"}).
			PutNode("u1", 0, Node{Addr: "http://u1", Region: "us"}).
			PutNode("a1", 0, Node{Addr: "http://a1", Region: "ap"}).
			PutTenant("t1", 0, Tenant{Node: "e1", State: StateActive, Replica: "e2", ReadCopies: MakeNodeList("a1", "u1")}).
			PutTenant("t2", 0, Tenant{Node: "e1", State: StateActive, ReadCopies: MakeNodeList("a1")}).
			PutTenant("t3", 0, Tenant{Node: "u1", State: StateActive, ReadCopies: MakeNodeList("e2")}).
			PutTenant("t4", 0, Tenant{Node: "e2", State: StateActive, Replica: "u1", Survive: SurviveRegion}).
			PutTenant("t5", 0, Tenant{Node: "e2", State: StateActive}).
			PutQuota("t1", 0, Quota{Rows: 10}).
			Commit(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// The region's own record of its node, as its mirror keeps it.
		if _, err := r.Txn().PutNode("u1", 0, Node{Addr: "http://u1", Region: "us"}).Commit(ctx); err != nil {
			t.Fatal(err)
		}
		var dirty Dirty
		src, dst := follow(t, ctx, gd, &dirty), follow(t, ctx, rd, &dirty)
		far := Far{Region: "us"}
		// Revisions are the member's on etcd, shared by every prefix: each
		// watch is waited for up to the writes made through it.
		step := func(grev int64, want ...string) {
			t.Helper()
			src.upTo(t, ctx, grev)
			res, err := far.SyncTracked(ctx, r, src.t, dst.t, &dirty)
			if err != nil {
				t.Fatal(err)
			}
			if n := len(res.Written); n > 0 {
				dst.upTo(t, ctx, res.Written[n-1])
			}
			dirty.Reset() // the sync's own writes are not changes to look at again, as the link has it
			if got := farKeys(t, ctx, rd); !slices.Equal(got, want) {
				t.Fatalf("far records %v, want %v", got, want)
			}
			if res, err := far.Sync(ctx, gd, r); err != nil || res.Put+res.Deleted != 0 {
				t.Fatalf("a full sync after the tracked one wrote %+v %v", res, err)
			}
		}
		step(grev, "far/nodes/e1", "far/nodes/e2", "far/tenants/t1@e1", "far/tenants/t4@e2")
		if n, err := r.GetNode(ctx, "u1"); err != nil || n.Value.Addr != "http://u1" {
			t.Fatalf("the region's own node: %+v %v", n, err)
		}
		if _, err := r.GetTenant(ctx, "t1"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("a far tenant among the region's own: %v", err)
		}

		// t1 fails over onto e2: its record names e2, and e1 is no far
		// tenant's node any more.
		at, err := g.GetTenant(ctx, "t1")
		if err != nil {
			t.Fatal(err)
		}
		at, err = g.Failover(ctx, "t1", at, "e2", 9)
		if err != nil {
			t.Fatal(err)
		}
		step(at.Rev, "far/nodes/e2", "far/tenants/t1@e2", "far/tenants/t4@e2")

		// t1's read copy in us dropped; t4 deleted: nothing is far.
		at, err = g.UpdateTenant(ctx, "t1", at, func(ten *Tenant) error { ten.ReadCopies = MakeNodeList("a1"); return nil })
		if err != nil {
			t.Fatal(err)
		}
		step(at.Rev, "far/nodes/e2", "far/tenants/t4@e2")
		grev, err = gd.Delete(ctx, TenantKey("t4"))
		if err != nil {
			t.Fatal(err)
		}
		step(grev)
		if n, err := r.GetNode(ctx, "u1"); err != nil || n.Value.Addr != "http://u1" {
			t.Fatalf("the region's own node after: %+v %v", n, err)
		}
	})
}

// The far records are not the region's: the view keeps them apart from
// its tenants and nodes, the mirror copies none of them up, and a far
// node's token is sealed in the region's directory as in the global one.
func TestFarRecordsStayApart(t *testing.T) {
	ctx := testCtx(t)
	k := testKeyring(t)
	graw, rraw := NewMemory(), NewMemory()
	defer graw.Close()
	defer rraw.Close()
	g, r := NewStore(Sealing(graw, k)), NewStore(Sealing(rraw, k))
	_, err := g.Txn().
		PutNode("e1", 0, Node{Addr: "http://e1", Region: "eu", Token: "e1-secret"}).
		PutNode("u1", 0, Node{Addr: "http://u1", Region: "us", Token: "u1-secret"}).
		PutTenant("t1", 0, Tenant{Node: "e1", State: StateActive, ReadCopies: MakeNodeList("u1")}).
		Commit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := (Mirror{From: g.Directory(), Region: "us"}).Sync(ctx, r); err != nil {
		t.Fatal(err)
	}
	if res, err := (Far{Region: "us"}).Sync(ctx, g.Directory(), r); err != nil || res.Put != 2 {
		t.Fatalf("far sync: %+v %v", res, err)
	}
	raw, err := rraw.Get(ctx, FarNodeKey("e1"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw.Value), "e1-secret") || !strings.Contains(string(raw.Value), `"sealed"`) {
		t.Fatalf("a far node's token in the region's directory: %s", raw.Value)
	}
	v, _, err := LoadView(ctx, r.Directory())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := v.Tenant("t1"); ok || v.NumTenants() != 0 {
		t.Fatalf("a far tenant among the region's tenants")
	}
	if _, ok := v.Node("e1"); ok {
		t.Fatalf("a far node among the region's nodes")
	}
	ten, ok := v.FarTenant("t1")
	n, nok := v.FarNode("e1")
	if !ok || ten.Node != "e1" || !nok || n.Token != "e1-secret" || v.NumFarTenants() != 1 {
		t.Fatalf("far records in the view: %+v %v, %+v %v", ten, ok, n, nok)
	}
	// The region leases itself: the mirror copies its own records up and
	// leaves the far ones where they are.
	if _, err := graw.Delete(ctx, TenantKey("t1")); err != nil {
		t.Fatal(err)
	}
	if _, err := (Mirror{From: r.Directory(), Region: "us", Up: true}).Sync(ctx, g); err != nil {
		t.Fatal(err)
	}
	kvs, _, err := graw.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range kvs {
		if strings.HasPrefix(kv.Key, "far/") || kv.Key == TenantKey("t1") {
			t.Fatalf("the mirror copied a far record up: %s", kv.Key)
		}
	}
}

// Random changes of the global directory — tenants placed, failed over,
// given and denied copies in us and elsewhere, deleted; nodes moved
// between regions and deleted — and of the region's far records behind
// the sync's back, synced from the watches after each few, never leave
// the far records behind: a full Sync finds nothing to write at the end.
func TestFarSyncTrackedConvergesUnderRandomChanges(t *testing.T) {
	copied := 0
	for seed := range uint64(30) {
		copied += randomFarRun(t, seed)
	}
	if copied == 0 {
		t.Fatal("no run copied a far record: the changes made none")
	}
}

// randomFarRun runs one seed and returns how many far records it wrote.
func randomFarRun(t *testing.T, seed uint64) int {
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	rnd := rand.New(rand.NewPCG(seed, 11))
	gd, rd := NewMemory(), NewMemory()
	defer gd.Close()
	defer rd.Close()
	r := NewStore(rd)
	nodes := []string{"e1", "e2", "u1", "u2", "a1"}
	regions := []string{"eu", "us", "ap"}
	put := func(d Directory, key string, v any) {
		b, err := encode(v)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := d.Put(ctx, key, b); err != nil {
			t.Fatal(err)
		}
	}
	for i, n := range nodes {
		put(gd, NodeKey(n), Node{Addr: "http://" + n, Region: []string{"eu", "eu", "us", "us", "ap"}[i]})
	}
	pick := func() string { return nodes[rnd.IntN(len(nodes))] }
	change := func() {
		tn := fmt.Sprintf("t%d", rnd.IntN(20))
		switch k := rnd.IntN(12); {
		case k < 7:
			ten := Tenant{Node: pick(), State: StateActive}
			if c := pick(); rnd.IntN(3) == 0 && c != ten.Node {
				ten.Replica = c
			}
			var copies []string
			for range rnd.IntN(3) {
				if c := pick(); !slices.Contains(copies, c) && c != ten.Node && c != ten.Replica {
					copies = append(copies, c)
				}
			}
			ten.ReadCopies = MakeNodeList(copies...)
			put(gd, TenantKey(tn), ten)
		case k < 9:
			if _, err := gd.Delete(ctx, TenantKey(tn)); err != nil {
				t.Fatal(err)
			}
		case k < 10:
			n := pick()
			if rnd.IntN(4) == 0 {
				if _, err := gd.Delete(ctx, NodeKey(n)); err != nil {
					t.Fatal(err)
				}
				return
			}
			put(gd, NodeKey(n), Node{Addr: "http://" + n, Region: regions[rnd.IntN(len(regions))]})
		default: // the region's copy written behind the sync's back
			if rnd.IntN(2) == 0 {
				put(rd, FarTenantKey(tn), Tenant{Node: pick(), State: StateActive})
			} else {
				put(rd, FarNodeKey(pick()), Node{Addr: "http://stale", Region: "eu"})
			}
		}
	}
	var dirty Dirty
	src, dst := follow(t, ctx, gd, &dirty), follow(t, ctx, rd, &dirty)
	far := Far{Region: "us"}
	copied := 0
	for range 40 {
		for range rnd.IntN(6) {
			change()
		}
		src.upTo(t, ctx, rev(t, ctx, gd))
		dst.upTo(t, ctx, rev(t, ctx, rd))
		if rnd.IntN(5) == 0 {
			put(rd, FarNodeKey(pick()), Node{Addr: "http://racing", Region: "eu"}) // a conflict
		}
		res, err := far.SyncTracked(ctx, r, src.t, dst.t, &dirty)
		if err != nil && !errors.Is(err, ErrConflict) {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if err == nil {
			dirty.Reset()
			copied += res.Put
		}
		if n := len(res.Written); n > 0 {
			dst.upTo(t, ctx, res.Written[n-1])
		}
	}
	src.upTo(t, ctx, rev(t, ctx, gd))
	dst.upTo(t, ctx, rev(t, ctx, rd))
	if _, err := far.SyncTracked(ctx, r, src.t, dst.t, &dirty); err != nil {
		t.Fatalf("seed %d: last sync: %v", seed, err)
	}
	if res, err := far.Sync(ctx, gd, r); err != nil || res.Put+res.Deleted != 0 {
		t.Fatalf("seed %d: a full sync after the tracked ones wrote %+v %v: the far records were behind", seed, res, err)
	}
	return copied
}

// A watcher of a region's directory tells its subscribers of a far
// tenant's change as of one (Far), so a region's router cuts requests out
// to the node a far tenant failed over off, and its leasing, which has no
// far tenant to lease, can pass it over.
func TestWatcherTellsFarChanges(t *testing.T) {
	ctx := testCtx(t)
	d := openMemory(t)
	put := func(key string, v any) {
		b, err := encode(v)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := d.Put(ctx, key, b); err != nil {
			t.Fatal(err)
		}
	}
	put(FarNodeKey("e1"), Node{Addr: "http://e1", Region: "eu"})
	put(FarTenantKey("t1"), Tenant{Node: "e1", State: StateActive, Replica: "e2", ReadCopies: MakeNodeList("u1")})
	w := startWatcher(t, d)
	var log changeLog
	defer w.OnTenantChange(log.add)()
	put(FarTenantKey("t1"), Tenant{Node: "e2", State: StateActive, FailedFrom: "e1", ReadCopies: MakeNodeList("u1")})
	put(TenantKey("own"), Tenant{Node: "u1", State: StateActive})
	testkit.Eventually(t, testTimeout, func() error {
		if got := log.all(); len(got) != 2 {
			return fmt.Errorf("%d changes told", len(got))
		}
		return nil
	})
	got := log.all()
	if from, ok := got[0].FailedOver(); !got[0].Far || got[0].Name != "t1" || !ok || from != "e1" {
		t.Fatalf("the far tenant's failover told as %+v", got[0])
	}
	if got[1].Far || got[1].Name != "own" {
		t.Fatalf("the region's own tenant told as %+v", got[1])
	}
	v := w.View()
	if v.NumTenants() != 1 || v.NumFarTenants() != 1 || len(v.TenantsOn("e2")) != 0 {
		t.Fatalf("the view mixes far tenants with its own: %d own, %d far", v.NumTenants(), v.NumFarTenants())
	}
}

// farBench is a global directory of n tenants on four eu nodes, each with
// its replica on the next, one in a hundred with a read copy on u1, held
// as a region's link holds it, and us's directory with its far records
// copied.
func farBench(b *testing.B, n int) (*Store, *Tracked, *Tracked) {
	b.Helper()
	ctx := context.Background()
	kvs := []KV{}
	add := func(key string, v any) {
		val, err := encode(v)
		if err != nil {
			b.Fatal(err)
		}
		kvs = append(kvs, KV{Key: key, Value: val, ModRev: 1})
	}
	eu := []string{"e1", "e2", "e3", "e4"}
	for _, e := range eu {
		add(NodeKey(e), Node{Addr: "http://" + e, Region: "eu"})
	}
	add(NodeKey("u1"), Node{Addr: "http://u1", Region: "us"})
	for i := range n {
		ten := Tenant{Node: eu[i%4], Replica: eu[(i+1)%4], State: StateActive}
		if i%100 == 0 {
			ten.ReadCopies = MakeNodeList("u1")
		}
		add(TenantKey(fmt.Sprintf("t%06d", i)), ten)
	}
	rd := NewMemory()
	b.Cleanup(func() { rd.Close() })
	r := NewStore(rd)
	src := NewTracked(kvs, 1)
	dst := NewTracked(nil, 0)
	var all Dirty
	all.MarkAll()
	res, err := Far{Region: "us"}.SyncTracked(ctx, r, src, dst, &all)
	if err != nil || res.Put != n/100+1 {
		b.Fatalf("first sync: %+v %v", res, err)
	}
	rkvs, rrev, err := rd.List(ctx, "")
	if err != nil {
		b.Fatal(err)
	}
	return r, src, NewTracked(rkvs, rrev)
}

// One tenant's change, far or not, costs the same whatever the directory
// holds: its far record and its nodes' are looked at, not every tenant.
func BenchmarkFarSyncTrackedOneChange(b *testing.B) {
	for _, n := range []int{1_000, 100_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			r, src, dst := farBench(b, n)
			ctx := context.Background()
			for i := 0; b.Loop(); i++ {
				var d Dirty
				d.Mark(TenantKey(fmt.Sprintf("t%06d", (i*7)%n)))
				if _, err := (Far{Region: "us"}).SyncTracked(ctx, r, src, dst, &d); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
