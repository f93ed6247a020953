package leasing

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/internal/testkit"
	"github.com/fenec-go/fenec/lease"
)

// The tests below run the router's leasing inside a testing/synctest
// bubble: an in-memory directory and its watcher, a lead the test sets,
// nodes that are lease.NodeLease values reached through a transport that
// can hang a node's grants, and a failover that points a node's tenants
// at their replicas in the directory. Time is the bubble's: a lease of
// three seconds takes no time at all, and every moment is exact.

const simLeaseLen = 3 * time.Second

// simLead is a lead the test decides.
type simLead struct {
	store *global.Store

	mu      sync.Mutex
	leading bool          // guarded by mu
	term    uint64        // guarded by mu
	fenced  *global.Store // guarded by mu
	downs   []uint64      // guarded by mu: stepDown calls
	cut     bool          // guarded by mu: the directory's quorum out of reach (reads fail)
}

// setCut cuts the router off its directory's quorum (or heals the cut):
// it goes on believing it leads, but no read of the directory answers.
func (s *simLead) setCut(cut bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cut = cut
}

func (s *simLead) Status() (bool, uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.leading, s.term
}

func (s *simLead) Changes(context.Context) (*global.Store, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.leading {
		return nil, ErrNotLeader
	}
	if s.cut {
		return nil, context.DeadlineExceeded
	}
	return s.fenced, nil
}

func (s *simLead) StepDown(highest uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.leading = false
	s.downs = append(s.downs, highest)
}

func (s *simLead) Lost(context.Context, error) {}

// lead makes the router lead at the directory's next term.
func (s *simLead) lead(t testing.TB) uint64 {
	t.Helper()
	ctx := context.Background()
	term, err := s.store.Promote(ctx, "sim")
	if err != nil {
		t.Fatal(err)
	}
	fenced, _, err := s.store.Fence(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	s.leading, s.term, s.fenced = true, term, fenced
	s.mu.Unlock()
	return term
}

// simNode is one node as the transport reaches it.
type simNode struct {
	lease *lease.NodeLease // nil: the node takes no lease
	down  bool             // grants hang until the call's bound
}

// simNet carries grants to simNodes on the node clock.
type simNet struct {
	clock lease.Clock

	mu    sync.Mutex
	nodes map[string]*simNode // guarded by mu
}

func (n *simNet) node(name string) *simNode {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.nodes[name]
}

func (n *simNet) setDown(name string, down bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.nodes[name].down = down
}

func (n *simNet) Send(ctx context.Context, name string, g lease.Grant) (lease.Answer, error) {
	n.mu.Lock()
	nd, ok := n.nodes[name]
	down := ok && nd.down
	n.mu.Unlock()
	switch {
	case !ok:
		return lease.Answer{}, ErrUnknownNode
	case down:
		<-ctx.Done()
		return lease.Answer{}, ctx.Err()
	case nd.lease == nil:
		return lease.Answer{}, lease.ErrTakesNoLease
	}
	return nd.lease.Handle(n.clock.Now(), g)
}

// probe answers for the node recorded at n.Addr (the sim's nodes are
// recorded at their names).
func (n *simNet) probe(ctx context.Context, rec global.Node) (bool, error) {
	nd := n.node(rec.Addr)
	switch {
	case nd == nil:
		return false, ErrUnknownNode
	case nd.down:
		<-ctx.Done()
		return false, ctx.Err()
	}
	return nd.lease != nil, nil
}

// writable says whether node may write tenant now, by its own lease.
func (n *simNet) writable(name, tenant string) bool {
	nd := n.node(name)
	if nd == nil || nd.lease == nil {
		return false
	}
	ok, _ := nd.lease.Writable(n.clock.Now(), tenant)
	return ok
}

// leaseSim is a leasing over an in-memory directory in a bubble.
type leaseSim struct {
	t     *testing.T
	clock lease.Clock
	dir   *global.Memory
	store *global.Store
	w     *global.Watcher
	lead  *simLead
	net   *simNet
	l     *Leasing

	// pinned, when set, is the view the leasing is shown instead of the
	// watcher's; hold, when set, runs as a failover begins.
	pinned atomic.Pointer[global.View]
	hold   func()

	mu        sync.Mutex
	failovers []simFailover // guarded by mu
}

type simFailover struct {
	node string
	at   time.Duration
}

func newLeaseSim(t *testing.T) *leaseSim {
	t.Helper()
	clock := lease.NewMonoClock()
	dir := global.NewMemory()
	store := global.NewStore(dir)
	s := &leaseSim{
		t: t, clock: clock, dir: dir, store: store,
		w:    global.StartWatcher(context.Background(), dir, nil),
		lead: &simLead{store: store},
		net:  &simNet{clock: clock, nodes: map[string]*simNode{}},
	}
	s.l = New(Deps{
		ID:  "sim",
		Own: simLeaseLen,
		View: func() *global.View {
			if v := s.pinned.Load(); v != nil {
				return v
			}
			return s.w.View()
		},
		Lead:      s.lead,
		Transport: s.net,
		Probe:     s.net.probe,
		Failover:  s.failover,
		Settle:    func(ctx context.Context, rev int64) { _ = s.w.WaitRev(ctx, rev) },
		Clock:     clock,
		Log:       testkit.Logger(),
	})
	s.w.OnTenantChange(func(global.TenantChange) { s.l.Poke() })
	t.Cleanup(func() {
		s.l.Close()
		_ = s.w.Close()
		_ = s.dir.Close()
	})
	<-s.w.Ready()
	return s
}

// failover points every tenant of node at its replica, as the router's
// failover does once each copy is promoted, and records the call.
func (s *leaseSim) failover(ctx context.Context, node string, _ bool) FailoverResult {
	if s.hold != nil {
		s.hold()
	}
	s.mu.Lock()
	s.failovers = append(s.failovers, simFailover{node: node, at: s.clock.Now()})
	s.mu.Unlock()
	res := FailoverResult{Node: node, Promoted: []string{}, Failed: []FailoverFailure{}}
	st, err := s.lead.Changes(ctx)
	if err != nil {
		res.Failed = append(res.Failed, FailoverFailure{Why: err.Error()})
		return res
	}
	tenants, _, err := st.ListTenants(ctx)
	if err != nil {
		res.Failed = append(res.Failed, FailoverFailure{Why: err.Error()})
		return res
	}
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for n := range tenants {
			if !yield(n) {
				return
			}
		}
	}) {
		at := tenants[name]
		if at.Value.Node != node {
			continue
		}
		if at.Value.Replica == "" || at.Value.HeldBy != "" {
			res.Failed = append(res.Failed, FailoverFailure{Tenant: name, Why: "no copy, or held"})
			continue
		}
		done, err := st.Failover(ctx, name, at, at.Value.Replica, 1)
		if err != nil {
			res.Failed = append(res.Failed, FailoverFailure{Tenant: name, Why: err.Error()})
			continue
		}
		_ = s.w.WaitRev(ctx, done.Rev)
		res.Promoted = append(res.Promoted, name)
	}
	return res
}

func (s *leaseSim) failedOver() []simFailover {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.failovers)
}

// addNode starts a node (taking leases or not) and records it, as PUT
// /_shard/nodes does: lease:false until the leasing's probe marks it.
func (s *leaseSim) addNode(name string, takesLease bool) {
	s.t.Helper()
	nd := &simNode{}
	if takesLease {
		nd.lease = lease.NewNodeLease(lease.Binding{}, nil)
	}
	s.net.mu.Lock()
	s.net.nodes[name] = nd
	s.net.mu.Unlock()
	rev, err := s.store.Txn().PutNode(name, 0, global.Node{Addr: name, Token: "x", Region: "eu"}).Commit(context.Background())
	if err != nil {
		s.t.Fatal(err)
	}
	s.settle(rev)
}

// markLeased records nodes as taking leases, as a leading router's probe
// does.
func (s *leaseSim) markLeased(nodes ...string) {
	s.t.Helper()
	for _, name := range nodes {
		rev, err := s.store.WriteNode(context.Background(), name, false, func(n *global.Node, _ bool) bool {
			n.Lease = true
			return true
		})
		if err != nil {
			s.t.Fatal(err)
		}
		s.settle(rev)
	}
}

// place records tenant on node with its replica ("" for none).
func (s *leaseSim) place(tenant, node, replica string) {
	s.t.Helper()
	ctx := context.Background()
	n, err := s.store.GetNode(ctx, node)
	if err != nil {
		s.t.Fatal(err)
	}
	rec, err := s.store.PlaceTenant(ctx, tenant, global.Tenant{Node: node, State: global.StateActive, Replica: replica, Lineage: 1}, n.Rev)
	if err != nil {
		s.t.Fatal(err)
	}
	s.settle(rec.Rev)
}

// nodeRev is node's record's revision.
func (s *leaseSim) nodeRev(node string) int64 {
	s.t.Helper()
	n, err := s.store.GetNode(context.Background(), node)
	if err != nil {
		s.t.Fatal(err)
	}
	return n.Rev
}

func (s *leaseSim) settle(rev int64) {
	s.t.Helper()
	if err := s.w.WaitRev(context.Background(), rev); err != nil {
		s.t.Fatal(err)
	}
	synctest.Wait()
}

// sleepTo sleeps until the bubble's clock reads at (on the leasing's
// clock), then lets every goroutine settle at that instant.
func (s *leaseSim) sleepTo(at time.Duration) {
	if d := at - s.clock.Now(); d > 0 {
		time.Sleep(d)
	}
	synctest.Wait()
}

// status is the leasing's view of node.
func (s *leaseSim) status(node string) (lease.NodeStatus, bool) {
	for _, st := range s.l.Nodes() {
		if st.Node == node {
			return st, true
		}
	}
	return lease.NodeStatus{}, false
}

// A node recorded without lease:true is probed, marked, and leased; a
// tenant placed on it is granted at once (not at the next round); once
// the node stops answering it is failed over no sooner than the lease and
// a tenth after its last answer and within a round after that, and the
// copy that took its tenant is granted the tenant as the failover ends.
func TestLeasingFailsOverAtTheLapseSim(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newLeaseSim(t)
		s.lead.lead(t)
		s.l.Start(t.Context())
		s.addNode("a", true)
		s.addNode("b", true)
		// Nodes are probed at the leasing's next look (a tenth of a
		// lease, at most 100 ms), and granted at once once marked.
		s.sleepTo(200 * time.Millisecond)
		for _, n := range []string{"a", "b"} {
			if nd, _ := s.w.View().Node(n); !nd.Lease {
				t.Fatalf("%s not recorded as taking leases: %+v", n, nd)
			}
			if st, ok := s.status(n); !ok || !st.Ran || st.LeftMS <= 0 {
				t.Fatalf("%s not leased: %+v", n, st)
			}
		}
		placedAt := s.clock.Now()
		s.place("t1", "a", "b")
		if s.clock.Now() != placedAt || !s.net.writable("a", "t1") {
			t.Fatalf("t1 not writable on a at the instant it was placed (%v later)", s.clock.Now()-placedAt)
		}

		s.sleepTo(2 * time.Second)
		s.net.setDown("a", true)
		st, _ := s.status("a")
		last := s.clock.Now() - time.Duration(st.LastAnswerMS)*time.Millisecond
		// a lapses a lease and a tenth after its last answer; its lapse is
		// judged once no grant to it is out, which is at most a round
		// (a third of the lease, a grant's bound) later.
		lapse := last + simLeaseLen + simLeaseLen/10
		s.sleepTo(lapse - time.Millisecond)
		if fo := s.failedOver(); len(fo) != 0 {
			t.Fatalf("failed over before the lease and a tenth: %+v", fo)
		}
		if s.net.writable("a", "t1") {
			t.Fatal("a still writes t1 a tenth of a lease after its last answer's lease")
		}
		s.sleepTo(lapse + simLeaseLen/3)
		fo := s.failedOver()
		if len(fo) != 1 || fo[0].node != "a" || fo[0].at < lapse {
			t.Fatalf("failovers %+v, want a at or after %v", fo, lapse)
		}
		foAt := fo[0].at
		if rec, _ := s.w.View().Tenant("t1"); rec.Node != "b" {
			t.Fatalf("t1 on %s after the failover", rec.Node)
		}
		if !s.net.writable("b", "t1") {
			t.Fatal("b cannot write t1 once the failover ended")
		}
		// a back: leased again, naming none of its old tenants.
		s.net.setDown("a", false)
		s.sleepTo(foAt + simLeaseLen)
		if st, _ := s.status("a"); st.FailedOver || st.LeftMS <= 0 || st.Tenants != 0 {
			t.Fatalf("a back: %+v", st)
		}
		if s.net.writable("a", "t1") {
			t.Fatal("a writes t1 after it was failed over")
		}
		if n := len(s.failedOver()); n != 1 {
			t.Fatalf("%d failovers", n)
		}
	})
}

// A router that does not lead grants nothing; once it leads it grants
// every node at its term, counting each as granted then (a node is failed
// over no sooner than a lease and a tenth after the lead began); a node
// that took a higher term deposes it: the lead is stepped down and the
// leasing stops.
func TestLeasingFollowsTheLeadSim(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newLeaseSim(t)
		s.addNode("a", true)
		s.addNode("b", true)
		s.markLeased("a", "b") // as a router leading before found them
		s.place("ta", "a", "b")
		s.l.Start(t.Context())
		s.sleepTo(time.Second)
		if s.l.Leading() || len(s.l.Nodes()) != 0 {
			t.Fatal("a router that does not lead leases")
		}
		s.net.setDown("a", true)
		term := s.lead.lead(t)
		led := s.clock.Now()
		// The leasing sees the lead at its next look: at most a tick.
		s.sleepTo(led + s.l.Tick())
		if !s.l.Leading() || s.l.Leases().Term != term {
			t.Fatalf("leasing %+v, want term %d", s.l.Leases(), term)
		}
		// a never answered: it is counted as granted when the leasing
		// began, and failed over a lease and a tenth after that.
		lapse := simLeaseLen + simLeaseLen/10
		s.sleepTo(led + lapse - time.Millisecond)
		if fo := s.failedOver(); len(fo) != 0 {
			t.Fatalf("a node never reached failed over before a lease from the lead's start: %+v", fo)
		}
		s.sleepTo(led + s.l.Tick() + lapse + simLeaseLen/3)
		if fo := s.failedOver(); len(fo) != 1 || fo[0].node != "a" || fo[0].at < led+lapse {
			t.Fatalf("failovers %+v, lead at %v", fo, led)
		}
		// Another router is promoted (the directory's term moves on,
		// which this lead does not watch) and b takes its higher term:
		// the router is deposed.
		for range 3 {
			if _, err := s.lead.store.Promote(t.Context(), "other"); err != nil {
				t.Fatal(err)
			}
		}
		nb := s.net.node("b").lease
		list := []string{}
		if _, err := nb.Handle(s.clock.Now(), lease.Grant{Term: term + 3, Router: "other", N: 1, MS: 1000, Tenants: list, List: lease.ListID(list)}); err != nil {
			t.Fatal(err)
		}
		s.sleepTo(s.clock.Now() + simLeaseLen)
		if s.l.Leading() {
			t.Fatal("still leasing after a node took a higher term")
		}
		s.lead.mu.Lock()
		downs := slices.Clone(s.lead.downs)
		s.lead.mu.Unlock()
		if !slices.Equal(downs, []uint64{term + 3}) {
			t.Fatalf("stepDown calls %v", downs)
		}
	})
}

// A tenant another operation holds when its node is failed over stays off
// that node's list while the node answers again, until the hold's wait
// (ten minutes, no time at all here) ends; a node that takes no lease is
// never recorded so, asked again every thirty seconds.
func TestLeasingHeldTenantAndNoLeaseNodeSim(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newLeaseSim(t)
		s.lead.lead(t)
		s.l.Start(t.Context())
		s.addNode("a", true)
		s.addNode("b", true)
		s.addNode("free", false)
		s.place("h", "a", "b")
		s.place("f", "a", "b")
		ctx := context.Background()
		st, _ := s.lead.Changes(ctx)
		at, err := st.GetTenant(ctx, "h")
		if err != nil {
			t.Fatal(err)
		}
		held, err := st.Hold(ctx, "h", at, "quota")
		if err != nil {
			t.Fatal(err)
		}
		s.settle(held.Rev)
		s.sleepTo(time.Second)
		s.net.setDown("a", true)
		s.sleepTo(s.clock.Now() + 2*simLeaseLen)
		if rec, _ := s.w.View().Tenant("f"); rec.Node != "b" {
			t.Fatalf("f on %s", rec.Node)
		}
		if rec, _ := s.w.View().Tenant("h"); rec.Node != "a" {
			t.Fatalf("held h failed over: %+v", rec)
		}
		s.net.setDown("a", false)
		s.sleepTo(s.clock.Now() + simLeaseLen)
		if s.net.writable("a", "h") || s.net.writable("a", "f") {
			t.Fatal("a writes a tenant it was failed off, or one held meanwhile")
		}
		if stA, _ := s.status("a"); stA.LeftMS <= 0 || stA.Tenants != 0 {
			t.Fatalf("a back: %+v", stA)
		}
		// The hold's wait ends: h, still on a, is a's again.
		s.sleepTo(s.clock.Now() + HeldWaitLimit)
		if !s.net.writable("a", "h") {
			t.Fatal("h not back on a's list once the failover's wait ended")
		}
		if nd, _ := s.w.View().Node("free"); nd.Lease {
			t.Fatal("a node that takes no lease was recorded as taking one")
		}
		if _, ok := s.status("free"); ok {
			t.Fatal("a node that takes no lease is leased")
		}
	})
}

// GrantNow sends the node its list at once and returns with its answer;
// it refuses while the router does not lead.
func TestLeasingGrantNowSim(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newLeaseSim(t)
		s.l.Start(t.Context())
		if err := s.l.GrantNow(t.Context(), "a"); !errors.Is(err, ErrNotLeader) {
			t.Fatalf("GrantNow not leading: %v", err)
		}
		s.lead.lead(t)
		s.addNode("a", true)
		s.sleepTo(time.Second)
		// A tenant the leasing has not seen yet: GrantNow syncs first.
		rec, err := s.store.PlaceTenant(context.Background(), "late", global.Tenant{Node: "a", State: global.StateActive, Lineage: 1}, s.nodeRev("a"))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.w.WaitRev(context.Background(), rec.Rev); err != nil {
			t.Fatal(err)
		}
		at := s.clock.Now()
		if err := s.l.GrantNow(t.Context(), "a"); err != nil {
			t.Fatal(err)
		}
		if s.clock.Now() != at || !s.net.writable("a", "late") {
			t.Fatal("GrantNow returned before the node could write the tenant")
		}
		if got := s.l.Lease(); got != simLeaseLen {
			t.Fatalf("Lease() %v", got)
		}
		s.net.setDown("a", true)
		gctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		defer cancel()
		if err := s.l.GrantNow(gctx, "a"); err == nil {
			t.Fatal("GrantNow to a node that does not answer returned nil")
		}
	})
}

// A node whose failover is under way when its region leaves the leasing's
// scope (the region handed over, or fenced) is let go once the failover
// ends, though the failover forgot the node's list as it ended and the
// leasing first saw the new scope after that: before, such a node stayed
// in the Leaser for good, granted and listed in GET /_shard/leases by a
// router whose directory no longer leased it.
func TestLeasingLetsGoANodeFailedOverAsItsRegionLeftSim(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newLeaseSim(t)
		s.lead.lead(t)
		s.l.Start(t.Context())
		s.addNode("a", true)
		s.addNode("b", true)
		s.sleepTo(200 * time.Millisecond)
		s.place("t1", "a", "b")

		// The leasing sees the directory as it was until a's failover has
		// run; the region is handed to its own router meanwhile.
		s.pinned.Store(s.w.View())
		s.hold = func() {
			ctx := context.Background()
			at, err := s.store.ReadRegion(ctx, "eu")
			if err == nil {
				_, err = s.store.UpdateRegion(ctx, "eu", at, func(r *global.Region) error {
					r.Leaser, r.Epoch = global.LeaserRegion, 1
					return nil
				})
			}
			if err != nil {
				t.Error(err)
			}
			_ = s.w.WaitRev(ctx, s.w.Rev()+1)
			s.pinned.Store(nil)
		}
		s.net.setDown("a", true)
		s.sleepTo(2*time.Second + 2*simLeaseLen)
		if fo := s.failedOver(); len(fo) != 1 || fo[0].node != "a" {
			t.Fatalf("failovers %+v, want a's", fo)
		}
		for _, n := range []string{"a", "b"} {
			if st, ok := s.status(n); ok {
				t.Fatalf("%s still leased by a router whose directory no longer leases its region: %+v", n, st)
			}
		}
	})
}

// A node says it took a term its directory never reached (a forged grant:
// the admin token stolen, or the node compromised). The router reads its
// directory, finds its own term standing, and is not deposed: the node is
// counted as not answering — failed over once it lapses — and every other
// node is leased as before.
func TestLeasingDoubtsAForgedTermSim(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newLeaseSim(t)
		s.addNode("a", true)
		s.addNode("b", true)
		s.place("ta", "a", "b")
		s.place("tb", "b", "a")
		s.l.Start(t.Context())
		term := s.lead.lead(t)
		s.sleepTo(s.clock.Now() + simLeaseLen)
		if !s.l.Leading() {
			t.Fatal("not leasing")
		}
		na := s.net.node("a").lease
		list := []string{}
		if _, err := na.Handle(s.clock.Now(), lease.Grant{Term: term + 1000, Router: "forger", N: 1, MS: 1000, Tenants: list, List: lease.ListID(list)}); err != nil {
			t.Fatal(err)
		}
		forged := s.clock.Now()
		s.sleepTo(forged + 3*simLeaseLen)
		if !s.l.Leading() {
			t.Fatal("deposed by one node's word")
		}
		s.lead.mu.Lock()
		downs := slices.Clone(s.lead.downs)
		s.lead.mu.Unlock()
		if len(downs) != 0 {
			t.Fatalf("stepDown calls %v", downs)
		}
		if fo := s.failedOver(); len(fo) != 1 || fo[0].node != "a" || fo[0].at < forged {
			t.Fatalf("failovers %+v: want a alone", fo)
		}
		for _, n := range s.l.Nodes() {
			if n.Node == "b" && (n.FailedOver || !n.Answered || n.LeasedBy != "") {
				t.Fatalf("b after a's forged term: %+v", n)
			}
		}
	})
}

// A router cut off from its directory's quorum goes on believing it leads
// (nothing tells it otherwise), but no read confirms its term: its grants
// stop renewing leases, and every node's lease ends no later than a lease
// after the last read that did — before a router promoted on the quorum's
// side, counting a lease and a tenth from its first round, fails any of
// them over. Once reads confirm the term again, grants renew again.
func TestLeasingCutOffFromItsDirectoryStopsRenewingSim(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newLeaseSim(t)
		s.lead.lead(t)
		s.l.Start(t.Context())
		s.addNode("a", true)
		s.addNode("b", true)
		s.sleepTo(200 * time.Millisecond)
		s.place("t1", "a", "b")
		if !s.net.writable("a", "t1") {
			t.Fatal("t1 not writable on a once placed")
		}
		s.sleepTo(2 * time.Second)
		cutAt := s.clock.Now()
		s.lead.setCut(true)
		// Reads confirmed the term at most an eighth of a lease before the
		// cut, and a lease runs a lease from that read: the lease a had at
		// the cut runs on for most of a lease.
		s.sleepTo(cutAt + simLeaseLen/2)
		if !s.net.writable("a", "t1") {
			t.Fatal("a stopped writing t1 half a lease into the cut: the lease it had should still run")
		}
		s.sleepTo(cutAt + simLeaseLen + time.Millisecond)
		if s.net.writable("a", "t1") {
			t.Fatal("a still writes t1 a lease after the last read that could confirm its router's term")
		}
		if fo := s.failedOver(); len(fo) != 0 {
			t.Fatalf("a router cut off its directory failed over %+v", fo)
		}
		healAt := s.clock.Now()
		s.lead.setCut(false)
		s.sleepTo(healAt + simLeaseLen/confirmEvery + simLeaseLen/10)
		if !s.net.writable("a", "t1") {
			t.Fatal("a not leased again once reads confirm the term")
		}
	})
}
