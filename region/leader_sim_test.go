package region

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/internal/testkit"
	"github.com/fenec-go/fenec/lease"
	"github.com/fenec-go/fenec/region/lead"
	"github.com/fenec-go/fenec/region/leasing"
)

// The test below runs the router's lead and its leasing inside a
// testing/synctest bubble over an in-memory directory, with nodes that are
// lease.NodeLease values reached at once (the leasing's own simulation,
// with a lead the test decides, is in package region/leasing).

// simNodes carries grants to lease.NodeLease values on the bubble's clock;
// every node takes leases.
type simNodes struct {
	clock lease.Clock

	mu    sync.Mutex
	nodes map[string]*lease.NodeLease // guarded by mu
}

func (n *simNodes) node(name string) *lease.NodeLease {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.nodes[name]
}

func (n *simNodes) Send(_ context.Context, name string, g lease.Grant) (lease.Answer, error) {
	nd := n.node(name)
	if nd == nil {
		return lease.Answer{}, ErrUnknownNode
	}
	return nd.Handle(n.clock.Now(), g)
}

func (n *simNodes) probe(_ context.Context, rec global.Node) (bool, error) {
	return n.node(rec.Addr) != nil, nil
}

// writable says whether node may write tenant now, by its own lease.
func (n *simNodes) writable(name, tenant string) bool {
	ok, _ := n.node(name).Writable(n.clock.Now(), tenant)
	return ok
}

// leadSim is a directory, its watcher and nodes in a bubble.
type leadSim struct {
	t     *testing.T
	clock lease.Clock
	store *global.Store
	w     *global.Watcher
	nodes *simNodes
}

func newLeadSim(t *testing.T) *leadSim {
	t.Helper()
	clock := lease.NewMonoClock()
	dir := global.NewMemory()
	s := &leadSim{
		t: t, clock: clock, store: global.NewStore(dir),
		w:     global.StartWatcher(context.Background(), dir, nil),
		nodes: &simNodes{clock: clock, nodes: map[string]*lease.NodeLease{}},
	}
	t.Cleanup(func() {
		_ = s.w.Close()
		_ = dir.Close()
	})
	<-s.w.Ready()
	return s
}

// addNode starts a node taking leases and records it as leased.
func (s *leadSim) addNode(name string) {
	s.t.Helper()
	s.nodes.mu.Lock()
	s.nodes.nodes[name] = lease.NewNodeLease(lease.Binding{}, nil)
	s.nodes.mu.Unlock()
	rev, err := s.store.Txn().PutNode(name, 0, global.Node{Addr: name, Token: "x", Region: "eu", Lease: true}).Commit(context.Background())
	if err != nil {
		s.t.Fatal(err)
	}
	s.settle(rev)
}

// place records tenant on node.
func (s *leadSim) place(tenant, node string) {
	s.t.Helper()
	ctx := context.Background()
	n, err := s.store.GetNode(ctx, node)
	if err != nil {
		s.t.Fatal(err)
	}
	rec, err := s.store.PlaceTenant(ctx, tenant, global.Tenant{Node: node, State: global.StateActive, Lineage: 1}, n.Rev)
	if err != nil {
		s.t.Fatal(err)
	}
	s.settle(rec.Rev)
}

func (s *leadSim) settle(rev int64) {
	s.t.Helper()
	if err := s.w.WaitRev(context.Background(), rev); err != nil {
		s.t.Fatal(err)
	}
	synctest.Wait()
}

// sleepTo sleeps until the bubble's clock reads at, then lets every
// goroutine settle at that instant.
func (s *leadSim) sleepTo(at time.Duration) {
	if d := at - s.clock.Now(); d > 0 {
		time.Sleep(d)
	}
	synctest.Wait()
}

// leasingOver is a leasing over the sim's directory and nodes, leading by
// ld with lease own; it fails no node over.
func (s *leadSim) leasingOver(ld *lead.Lead, own time.Duration) *leasing.Leasing {
	l := leasing.New(leasing.Deps{
		ID: "r", Own: own, View: s.w.View, Lead: ld,
		Transport: s.nodes, Probe: s.nodes.probe,
		Failover: func(_ context.Context, node string, _ bool) FailoverResult {
			s.t.Errorf("node %s failed over", node)
			return FailoverResult{Node: node}
		},
		Settle: func(ctx context.Context, rev int64) { _ = s.w.WaitRev(ctx, rev) },
		Clock:  s.clock, Log: testkit.Logger(),
	})
	unwatch := s.w.OnTenantChange(func(global.TenantChange) { l.Poke() })
	s.t.Cleanup(func() { unwatch(); l.Close() })
	return l
}

// A router restarted on its directory with a shorter lease (from five
// seconds to one) shortens a node's lease with its first acknowledged
// grant, and a tenant placed at once takes writes at once: its claim of
// the lead moves the term on, so the node takes the restarted router's
// grants as newer than the lease it holds, and its old, longer lease and
// its old list do not outlast the restart.
func TestRestartedRouterShortensTheLeaseSim(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newLeadSim(t)
		s.addNode("a")
		s.place("old", "a")
		first := lead.New(lead.Deps{ID: "r", Store: s.store, View: s.w.View, Ready: s.w.Ready, Log: testkit.Logger()})
		if ok, err := first.Claim(t.Context()); !ok || err != nil {
			t.Fatalf("claim: %v %v", ok, err)
		}
		long := s.leasingOver(first, 5*time.Second)
		long.Start(t.Context())
		s.sleepTo(2 * time.Second)
		if !s.nodes.writable("a", "old") {
			t.Fatal("a does not write its tenant under the first router")
		}
		long.Close()

		// Restarted with a one-second lease, on the same directory.
		second := lead.New(lead.Deps{ID: "r", Store: s.store, View: s.w.View, Ready: s.w.Ready, Log: testkit.Logger()})
		if ok, err := second.Claim(t.Context()); !ok || err != nil {
			t.Fatalf("claim again: %v %v", ok, err)
		}
		short := s.leasingOver(second, time.Second)
		short.Start(t.Context())
		// The leasing's first look: a tenth of its lease, at most 100 ms.
		s.sleepTo(s.clock.Now() + 100*time.Millisecond)
		s.place("new", "a")
		if !s.nodes.writable("a", "new") {
			st := s.nodes.node("a").Status(s.clock.Now())
			t.Fatalf("a tenant placed after the restart cannot be written at once: a's lease %+v", st)
		}
		if left := s.nodes.node("a").Status(s.clock.Now()).LeftMS; left > 1000 {
			t.Fatalf("a's lease has %d ms left after the restarted router's grants, want at most its lease of 1000", left)
		}
	})
}
