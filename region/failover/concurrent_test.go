package failover

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/region/nodeapi"
	"github.com/fenec-go/fenec/wire"
)

// copyNode is a node over loopback HTTP holding the copies of a lost
// region's tenants: it promotes every copy it is asked to (POST
// /_admin/promote) and takes quotas, telling the test of each call.
type copyNode struct {
	srv      *httptest.Server
	promotes chan []string // the tenants of each call of many, as it comes
	quotas   chan string   // each tenant whose quota was put
}

func startCopyNode(t *testing.T) *copyNode {
	t.Helper()
	c := &copyNode{promotes: make(chan []string, 16), quotas: make(chan string, 16)}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		switch {
		case req.Method == http.MethodPost && req.URL.Path == "/_admin/promote":
			var body wire.PromoteMany
			if err := json.NewDecoder(req.Body).Decode(&body); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			ans := wire.PromotedMany{}
			var names []string
			for i, p := range body.Tenants {
				names = append(names, p.Tenant)
				ans.Tenants = append(ans.Tenants, wire.PromotedTenant{Tenant: p.Tenant, Status: http.StatusOK, Promoted: true, Seq: 1, History: uint64(100 + i)})
			}
			c.promotes <- names
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(ans)
		case req.Method == http.MethodPut && strings.HasSuffix(req.URL.Path, "/quota"):
			var q wire.Quota
			_ = json.NewDecoder(req.Body).Decode(&q)
			c.quotas <- strings.TrimSuffix(strings.TrimPrefix(req.URL.Path, "/_admin/tenants/"), "/quota")
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(q)
		default:
			http.NotFound(w, req)
		}
	}))
	t.Cleanup(c.srv.Close)
	return c
}

// lostRig is a Failover over an in-memory directory (dir in front of it)
// holding nodes n1 and n2 of a lost region, each the primary of one
// tenant (t1, t2; t1 with a quota), and the copy node c holding both
// copies. The router's view is read from the directory each time it is
// asked, unless view is set; settle stands in for the wait for it.
// OwnNode reads the node's record and its region's, OwnRegion the
// region's, as the router's do.
type lostRig struct {
	f      *Failover
	s      *global.Store
	c      *copyNode
	settle func(ctx context.Context, rev int64) // set before a failover runs
	view   *global.View                         // the router's view if set; else read from the directory
	lost   atomic.Value                         // func(string) bool: the copy nodes known lost, if set

	ownNode, ownRegion atomic.Int64 // the guard's reads by node and by region
}

// ownRegion guards s on region r's record as the directory holds it now
// (absent: on its absence), as the router's owner check does.
func ownRegion(ctx context.Context, s *global.Store, r string) (*global.Store, error) {
	kv, err := s.Directory().Get(ctx, global.RegionKey(r))
	if err != nil && !errors.Is(err, global.ErrNotFound) {
		return nil, err
	}
	return s.Guarded(global.IfModRev(global.RegionKey(r), kv.ModRev)), nil
}

func newLostRig(t *testing.T, wrap func(global.Directory) global.Directory) *lostRig {
	t.Helper()
	mem := global.NewMemory()
	t.Cleanup(func() { mem.Close() })
	r := &lostRig{c: startCopyNode(t), settle: func(context.Context, int64) {}}
	r.s = global.NewStore(wrap(mem))
	ctx := context.Background()
	tx := r.s.Txn().
		PutNode("n1", 0, global.Node{Addr: "http://127.0.0.1:1", Region: "eu"}).
		PutNode("n2", 0, global.Node{Addr: "http://127.0.0.1:1", Region: "eu"}).
		PutNode("c", 0, global.Node{Addr: r.c.srv.URL, Region: "us"}).
		PutTenant("t1", 0, global.Tenant{Node: "n1", Replica: "c", State: global.StateActive}).
		PutTenant("t2", 0, global.Tenant{Node: "n2", Replica: "c", State: global.StateActive}).
		PutQuota("t1", 0, global.Quota{Rows: 7})
	if _, err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	client := nodeapi.New(30*time.Second, "") // past every wait of these tests: a node call ends when its node answers
	t.Cleanup(client.Close)
	r.f = New(Deps{
		Changes: func(context.Context) (*global.Store, error) { return r.s, nil },
		OwnNode: func(ctx context.Context, s *global.Store, n string) (*global.Store, error) {
			r.ownNode.Add(1)
			at, err := s.GetNode(ctx, n)
			if err != nil {
				return nil, err
			}
			return ownRegion(ctx, s, at.Value.Region)
		},
		OwnRegion: func(ctx context.Context, s *global.Store, region string) (*global.Store, error) {
			r.ownRegion.Add(1)
			if region != "eu" {
				return nil, errNotOurs
			}
			return ownRegion(ctx, s, region)
		},
		CopyLost: func(n string) bool {
			lost, _ := r.lost.Load().(func(string) bool)
			return lost != nil && lost(n)
		},
		Nodes: client,
		Fence: func(string) wire.Promote { return wire.Promote{} },
		OpMu:  new(sync.Mutex),
		View: func() *global.View {
			if r.view != nil {
				return r.view
			}
			v, _, err := global.LoadView(context.Background(), mem)
			if err != nil {
				t.Error(err)
			}
			return v
		},
		Settle:      func(ctx context.Context, rev int64) { r.settle(ctx, rev) },
		CarryQuota:  func(context.Context, *global.Store, global.Node, string, string) {},
		Repair:      nopRepair{},
		HeldEnded:   func(string) {},
		NodeTimeout: 5 * time.Second,
	})
	t.Cleanup(r.f.Close)
	return r
}

// errNotOurs is the rig's owner check refusing a region other than eu,
// as the router's refuses a region another side leases.
var errNotOurs = errors.New("region not leased by this router's side")

type nopRepair struct{}

func (nopRepair) FailedOff(string) {}

// failedOver checks that tenant is placed on c, released.
func (r *lostRig) failedOver(t *testing.T, tenant string, res Result) {
	t.Helper()
	if len(res.Promoted) != 1 || res.Promoted[0] != tenant || len(res.Failed) != 0 {
		t.Fatalf("failover of %s's node: %+v", tenant, res)
	}
	at, err := r.s.GetTenant(context.Background(), tenant)
	if err != nil || at.Value.Node != "c" || at.Value.HeldBy != "" {
		t.Fatalf("%s after its failover: %+v, %v", tenant, at.Value, err)
	}
}

// settleOf is a settle that blocks, until open is closed, the wait for
// the revision at which tenant's record was last written, once that
// record says want; blocked is closed as it starts blocking.
func (r *lostRig) settleOf(tenant string, want func(global.Tenant) bool, blocked, open chan struct{}) func(context.Context, int64) {
	var once sync.Once
	return func(ctx context.Context, rev int64) {
		at, err := r.s.GetTenant(ctx, tenant)
		if err != nil || at.Rev != rev || !want(at.Value) {
			return
		}
		once.Do(func() { close(blocked) })
		select {
		case <-open:
		case <-ctx.Done():
		}
	}
}

// Nodes lapsing together (a region lost whole) fail over at once: one
// node's failover waits for another's release transaction, never for the
// view settling on it. The view of a directory across regions may take a
// link's round trip and more to show a write; n2's failover ends while
// n1's waits for its view.
func TestLapsedNodesReleaseWhileAnotherSettles(t *testing.T) {
	r := newLostRig(t, func(d global.Directory) global.Directory { return d })
	blocked, open := make(chan struct{}), make(chan struct{})
	r.settle = r.settleOf("t1", func(v global.Tenant) bool { return v.Node == "c" }, blocked, open)
	ctx := context.Background()
	first := make(chan Result, 1)
	go func() { first <- r.f.Node(ctx, "n1", false) }()
	select {
	case <-blocked:
	case res := <-first:
		t.Fatalf("n1's failover ended without waiting for its view: %+v", res)
	case <-time.After(10 * time.Second):
		t.Fatal("n1's failover never released t1")
	}
	second := make(chan Result, 1)
	go func() { second <- r.f.Node(ctx, "n2", false) }()
	ended := false
	select {
	case res := <-second:
		ended = true
		r.failedOver(t, "t2", res)
	case <-time.After(10 * time.Second):
		t.Error("n2's failover did not end while n1's waited for its view: OpMu held across the settling")
	}
	close(open)
	r.failedOver(t, "t1", <-first)
	if !ended {
		r.failedOver(t, "t2", <-second)
	}
}

// A batch's promotions are sent while the view settles on its hold; the
// quota carried to the copy is read from the view once it settled, never
// before.
func TestPromoteWhileHoldSettles(t *testing.T) {
	r := newLostRig(t, func(d global.Directory) global.Directory { return d })
	blocked, open := make(chan struct{}), make(chan struct{})
	r.settle = r.settleOf("t1", func(v global.Tenant) bool { return v.HeldBy == global.HoldFailover }, blocked, open)
	done := make(chan Result, 1)
	go func() { done <- r.f.Node(context.Background(), "n1", false) }()
	select {
	case <-blocked:
	case <-time.After(10 * time.Second):
		t.Fatal("n1's failover never held t1")
	}
	select {
	case names := <-r.c.promotes:
		if len(names) != 1 || names[0] != "t1" {
			t.Fatalf("promoted %v, want [t1]", names)
		}
	case <-time.After(10 * time.Second):
		t.Error("t1's copy not promoted while the view settled on its hold")
	}
	select {
	case q := <-r.c.quotas:
		t.Fatalf("%s's quota carried before the view settled on its hold", q)
	case <-time.After(100 * time.Millisecond): // a quota sent too early shows here
	}
	close(open)
	r.failedOver(t, "t1", <-done)
	select {
	case q := <-r.c.quotas:
		if q != "t1" {
			t.Fatalf("quota carried for %q, want t1", q)
		}
	default:
		t.Fatal("t1's quota not carried to its copy")
	}
}

// meetingDir is a directory whose reads of the tenants, the nodes and
// region eu's record each wait (a while) for the other two to be under way:
// most is how many were at once. It counts every call.
type meetingDir struct {
	global.Directory
	mu       sync.Mutex
	inFlight int // guarded by mu
	most     int // guarded by mu
	gets     atomic.Int64
	lists    atomic.Int64
	txns     atomic.Int64
	afterGet func() // if set, called once the read of region eu's record returned
}

func (d *meetingDir) meet() func() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.inFlight++
	d.most = max(d.most, d.inFlight)
	deadline := time.Now().Add(3 * time.Second) // reads one after another show as most == 1
	for d.most < 3 && time.Now().Before(deadline) {
		d.mu.Unlock()
		time.Sleep(time.Millisecond)
		d.mu.Lock()
	}
	return func() {
		d.mu.Lock()
		d.inFlight--
		d.mu.Unlock()
	}
}

func (d *meetingDir) Get(ctx context.Context, key string) (global.KV, error) {
	d.gets.Add(1)
	if key != global.RegionKey("eu") {
		return d.Directory.Get(ctx, key)
	}
	defer d.meet()()
	kv, err := d.Directory.Get(ctx, key)
	if d.afterGet != nil {
		d.afterGet()
	}
	return kv, err
}

func (d *meetingDir) List(ctx context.Context, prefix string) ([]global.KV, int64, error) {
	d.lists.Add(1)
	if prefix == global.PrefixTenants || prefix == global.PrefixNodes {
		defer d.meet()()
	}
	return d.Directory.List(ctx, prefix)
}

func (d *meetingDir) Txn(ctx context.Context, conds []global.Cond, ops []global.Op) (int64, error) {
	d.txns.Add(1)
	return d.Directory.Txn(ctx, conds, ops)
}

// A node's failover reads its region's guard, the tenants and the nodes
// at once, then writes twice (the hold, the release): three round trips
// to the directory one after another, not six.
func TestFailoverReadsAtOnce(t *testing.T) {
	var dir *meetingDir
	r := newLostRig(t, func(d global.Directory) global.Directory {
		dir = &meetingDir{Directory: d}
		return dir
	})
	dir.gets.Store(0)
	dir.lists.Store(0)
	dir.txns.Store(0)
	res := r.f.Node(context.Background(), "n1", false)
	g, l, x := dir.gets.Load(), dir.lists.Load(), dir.txns.Load()
	r.failedOver(t, "t1", res)
	dir.mu.Lock()
	most := dir.most
	dir.mu.Unlock()
	if most != 3 {
		t.Errorf("at most %d of the failover's reads under way at once, want 3 (the guard's, the tenants', the nodes')", most)
	}
	if g != 1 || l != 2 || x != 2 {
		t.Errorf("the failover of one tenant made %d gets, %d lists and %d transactions, want 1, 2 and 2", g, l, x)
	}
	if n, rg := r.ownNode.Load(), r.ownRegion.Load(); n != 0 || rg != 1 {
		t.Errorf("the guard read %d times by node and %d by region, want 0 and 1 (the view knows n1's region)", n, rg)
	}
}

// A view that has a node in another region than its record (moved on
// since, or never so) does not guard the failover, nor refuse it (the
// region the view names is not this router's): the guard is read again
// by the node's record, and the failover writes under it.
func TestFailoverGuardOfAViewBehind(t *testing.T) {
	r := newLostRig(t, func(d global.Directory) global.Directory { return d })
	kvs, rev, err := r.s.Directory().List(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	for i, kv := range kvs {
		if kv.Key == global.NodeKey("n1") {
			kvs[i].Value = []byte(strings.Replace(string(kv.Value), `"eu"`, `"ap"`, 1))
		}
	}
	v, _ := global.ViewOf(kvs, rev)
	if n, ok := v.Node("n1"); !ok || n.Region != "ap" {
		t.Fatalf("the view behind has n1 as %+v", n)
	}
	r.view = v
	r.failedOver(t, "t1", r.f.Node(context.Background(), "n1", false))
	if n, rg := r.ownNode.Load(), r.ownRegion.Load(); n != 1 || rg != 1 {
		t.Errorf("the guard read %d times by node and %d by region, want 1 and 1", n, rg)
	}
}

// The guard is part of every write of the failover: a region's record
// changed after it was read (a handoff begun) makes the hold fail, and
// no tenant is promoted.
func TestFailoverGuardHolds(t *testing.T) {
	var dir *meetingDir
	r := newLostRig(t, func(d global.Directory) global.Directory {
		dir = &meetingDir{Directory: d}
		return dir
	})
	ctx := context.Background()
	// The region's record changes as the guard has read it, before the
	// hold: the region is another's now.
	dir.afterGet = func() {
		if _, err := r.s.Directory().Put(ctx, global.RegionKey("eu"), []byte(`{}`)); err != nil {
			t.Error(err)
		}
	}
	res := r.f.Node(ctx, "n1", false)
	if len(res.Promoted) != 0 || len(res.Failed) != 1 || !strings.Contains(res.Failed[0].Why, global.ErrConflict.Error()) {
		t.Fatalf("failover under a guard gone stale: %+v", res)
	}
	select {
	case names := <-r.c.promotes:
		t.Fatalf("copies promoted under a guard gone stale: %v", names)
	default:
	}
	at, err := r.s.GetTenant(ctx, "t1")
	if err != nil || at.Value.Node != "n1" || at.Value.HeldBy != "" {
		t.Fatalf("t1 after a failover under a guard gone stale: %+v, %v", at.Value, err)
	}
}

// A batch's tenants whose copies answered are released onto them without
// waiting for a copy node that does not answer yet (a copy in the region
// lost too answers only at the dial's bound): t1, copied on c, is placed
// on c while t3's copy node d holds its promotion.
func TestCopiesReleasedWithoutWaitingForAnotherCopyNode(t *testing.T) {
	r := newLostRig(t, func(d global.Directory) global.Directory { return d })
	arrived, open := make(chan struct{}), make(chan struct{})
	var once sync.Once
	d := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		once.Do(func() { close(arrived) })
		<-open
		http.Error(w, `{"error":"gone"}`, http.StatusServiceUnavailable)
	}))
	t.Cleanup(d.Close)
	ctx := context.Background()
	if _, err := r.s.Txn().
		PutNode("d", 0, global.Node{Addr: d.URL, Region: "eu"}).
		PutTenant("t3", 0, global.Tenant{Node: "n1", Replica: "d", State: global.StateActive}).
		Commit(ctx); err != nil {
		t.Fatal(err)
	}
	done := make(chan Result, 1)
	go func() { done <- r.f.Node(ctx, "n1", false) }()
	select {
	case <-arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("t3's promotion never reached d")
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		at, err := r.s.GetTenant(ctx, "t1")
		if err == nil && at.Value.Node == "c" && at.Value.HeldBy == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("t1 still %+v (%v) while d held t3's promotion: its release waited for another copy node", at.Value, err)
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	close(open)
	res := <-done
	if len(res.Promoted) != 1 || res.Promoted[0] != "t1" || len(res.Failed) != 1 || res.Failed[0].Tenant != "t3" {
		t.Fatalf("failover of n1: %+v", res)
	}
	at, err := r.s.GetTenant(ctx, "t3")
	if err != nil || at.Value.Node != "n1" || at.Value.HeldBy != "" {
		t.Fatalf("t3 after its copy refused: %+v, %v; want it left on n1, released", at.Value, err)
	}
}

// A copy on a node known lost too (a zone tenant's copy in a region lost
// whole) is not promoted, nor its node dialled: its tenant is released on
// its node at once, saying why, rather than at the dial's bound. Once the
// copy's node is no longer known lost, the same failover promotes it.
func TestCopyOnALostNodeNotDialled(t *testing.T) {
	r := newLostRig(t, func(d global.Directory) global.Directory { return d })
	r.lost.Store(func(n string) bool { return n == "c" })
	ctx := context.Background()
	res := r.f.Node(ctx, "n1", false)
	if len(res.Promoted) != 0 || len(res.Failed) != 1 || res.Failed[0].Tenant != "t1" ||
		!strings.Contains(res.Failed[0].Why, "lease lapsed too") || !strings.Contains(res.Failed[0].Why, "PUT /_shard/tenants/t1/survive") {
		t.Fatalf("failover of n1, t1's copy on a lost node: %+v", res)
	}
	select {
	case names := <-r.c.promotes:
		t.Fatalf("the lost copy node was asked to promote %v", names)
	default:
	}
	at, err := r.s.GetTenant(ctx, "t1")
	if err != nil || at.Value.Node != "n1" || at.Value.HeldBy != "" {
		t.Fatalf("t1 after a failover that could not promote it: %+v, %v", at.Value, err)
	}
	r.lost.Store(func(string) bool { return false })
	r.failedOver(t, "t1", r.f.Node(ctx, "n1", false))
}
