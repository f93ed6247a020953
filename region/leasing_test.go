package region

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fenec-go/fenec/internal/testkit"
	"github.com/fenec-go/fenec/internal/testkit/testnode"
	"github.com/fenec-go/fenec/lease"
	"github.com/fenec-go/fenec/node"
	"github.com/fenec-go/fenec/region/leasing"
)

// leaseNode is a fenec-node under --lease (or not) whose /_admin/lease can
// be cut off from the router alone: grants then hang until the router
// gives up on them, while data requests, the router's and the test's own,
// still reach it.
type leaseNode struct {
	*testnode.Node
	cut  atomic.Bool
	stop chan struct{} // closed at cleanup: cut calls end
}

func startLeaseNode(tb testing.TB, takesLease bool) *leaseNode {
	tb.Helper()
	n := &leaseNode{stop: make(chan struct{})}
	n.Node = testnode.Start(tb, testnode.Options{
		Configure: func(c *node.Config) {
			c.Sync = "always"
			c.Lease = takesLease
		},
		Wrap: func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if n.cut.Load() && r.URL.Path == "/_admin/lease" {
					// Read whole, so the server notices the caller hang up.
					_, _ = io.Copy(io.Discard, r.Body)
					select {
					case <-r.Context().Done():
					case <-n.stop:
					}
					return
				}
				next.ServeHTTP(w, r)
			})
		},
	})
	// Registered after the node's own cleanup, so run before it: the cut
	// calls end before the node is closed.
	tb.Cleanup(func() { close(n.stop) })
	return n
}

// write puts one row straight to the node (not through the router).
func (n *leaseNode) write(tb testing.TB, tenant string, v int) (int, http.Header) {
	tb.Helper()
	body := fmt.Sprintf(`{"query": "put c {n: %d}"}`, v)
	st, h, _ := cpDo(tb, http.MethodPost, n.URL()+"/t/"+tenant+"/query", "", []byte(body), nil)
	return st, h
}

const testLease = 600 * time.Millisecond

func startLeasingRouter(tb testing.TB) *cpRouter {
	tb.Helper()
	return startCPRouter(tb, func(c *Config) { c.AutoFailover = testLease })
}

// addLeaseNode records n and waits until the router found it takes leases
// (or, for a node that takes none, that it never records it so).
func (r *cpRouter) addLeaseNode(tb testing.TB, name string, n *leaseNode, extra map[string]any) {
	tb.Helper()
	body := map[string]any{"addr": n.Addr(), "token": cpAdminToken, "region": "eu"}
	for k, v := range extra {
		body[k] = v
	}
	if st, b := r.shard(tb, http.MethodPut, "nodes/"+name, body, nil); st != http.StatusCreated {
		tb.Fatalf("put node %s: %d %s", name, st, b)
	}
}

// waitLeased waits until node is recorded lease:true and has run a lease
// from this router's grants.
func (r *cpRouter) waitLeased(tb testing.TB, name string) {
	tb.Helper()
	testkit.Eventually(tb, cpWait, func() error {
		for _, st := range r.leases(tb).Nodes {
			if st.Node == name && st.Ran && st.LeftMS > 0 {
				return nil
			}
		}
		return fmt.Errorf("%s not leased yet: %+v", name, r.leases(tb))
	})
}

func (r *cpRouter) leases(tb testing.TB) leasing.Leases {
	tb.Helper()
	var a leasing.Leases
	if st, b := r.shard(tb, http.MethodGet, "leases", nil, &a); st != http.StatusOK {
		tb.Fatalf("leases: %d %s", st, b)
	}
	return a
}

// A node cut off from the router while its own clients reach it stops
// taking their writes before its tenant is promoted on its copy; the copy
// takes writes through the router at once; the failover is counted.
func TestAutoFailoverOfCutNodeCP(t *testing.T) {
	r := startLeasingRouter(t)
	a, b := startLeaseNode(t, true), startLeaseNode(t, true)
	r.addLeaseNode(t, "a", a, nil)
	r.addLeaseNode(t, "b", b, nil)
	r.waitLeased(t, "a")
	r.waitLeased(t, "b")
	if st, body := r.shard(t, http.MethodPut, "nodes/a", map[string]any{"standby": "b"}, nil); st != http.StatusCreated {
		t.Fatalf("standby: %d %s", st, body)
	}
	// Placed and written at once: the create's grant, or the forwarder's
	// retry, lets the first write in.
	r.place(t, "t1", "a")
	r.mustQuery(t, "t1", "create collection c (n int)")
	for i := range 10 {
		r.mustQuery(t, "t1", fmt.Sprintf("put c {n: %d}", i))
	}
	if st, _ := a.write(t, "t1", 100); st != http.StatusOK {
		t.Fatalf("direct write under the lease: %d", st)
	}
	if _, _, m := cpDo(t, http.MethodGet, r.url+"/_metrics", cpRouterToken, nil, nil); !strings.Contains(string(m), `fenec_router_lease_age_seconds{node="a"}`) ||
		!strings.Contains(string(m), `fenec_router_auto_failovers_total{outcome="done"} 0`) {
		t.Fatalf("lease series missing from /_metrics")
	}
	rec, err := r.rt.store.LeaseRecord(cpCtx(t))
	if err != nil || rec.Value != testLease.Milliseconds() {
		t.Fatalf("lease record %v %v", rec.Value, err)
	}

	// Cut: a's own client keeps writing straight to it. A write it
	// acknowledges after the router's copy shows t1 on b would make two
	// primaries.
	a.cut.Store(true)
	var lateAcks atomic.Int32
	refused := make(chan http.Header, 1)
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			st, h := a.write(t, "t1", 1000+i)
			onB := false
			if rec, ok := r.rt.watcher.View().Tenant("t1"); ok && rec.Node == "b" {
				onB = true
			}
			if st == http.StatusOK && onB {
				lateAcks.Add(1)
			}
			if st == http.StatusServiceUnavailable {
				refused <- h
				return
			}
			time.Sleep(2 * time.Millisecond)
		}
	})
	var h http.Header
	select {
	case h = <-refused:
	case <-time.After(cpWait):
		t.Fatal("the cut node kept taking writes")
	}
	wg.Wait()
	if h.Get("Fenec-Refused") != "lease" || h.Get("Retry-After") == "" {
		t.Fatalf("refusal headers %v", h)
	}
	testkit.Eventually(t, cpWait, func() error {
		if e := r.tenantsOf(t)["t1"]; e.Node != "b" {
			return fmt.Errorf("t1 still on %s", e.Node)
		}
		return nil
	})
	if n := lateAcks.Load(); n > 0 {
		t.Fatalf("the cut node acknowledged %d writes after its tenant was promoted", n)
	}
	r.mustQuery(t, "t1", "put c {n: 5000}")
	if st, _ := a.write(t, "t1", 6000); st != http.StatusServiceUnavailable {
		t.Fatalf("old primary took a write after the failover: %d", st)
	}
	// The directory shows t1 on b before the failover has returned (it
	// then records a lapsed) and been counted: both are waited for.
	testkit.Eventually(t, cpWait, func() error {
		if got := metricValue(t, r, `fenec_router_auto_failovers_total{outcome="done"}`); got < 1 {
			return fmt.Errorf("auto failovers done: %v", got)
		}
		for _, st := range r.leases(t).Nodes {
			if st.Node == "a" && st.FailedOver {
				return nil
			}
		}
		return fmt.Errorf("leases: a not failed over: %+v", r.leases(t))
	})
	// Healed, a is leased again with nothing on its list.
	a.cut.Store(false)
	testkit.Eventually(t, cpWait, func() error {
		st := a.leaseStatus(t)
		if st.LeftMS <= 0 || len(st.Tenants) != 0 {
			return fmt.Errorf("a's lease after the heal: %+v", st)
		}
		return nil
	})
}

func (n *leaseNode) leaseStatus(tb testing.TB) lease.Status {
	tb.Helper()
	st, _, body := cpDo(tb, http.MethodGet, n.URL()+"/_admin/lease", cpAdminToken, nil, nil)
	var s lease.Status
	if st != http.StatusOK || json.Unmarshal(body, &s) != nil {
		tb.Fatalf("lease status: %d %s", st, body)
	}
	return s
}

// A node started without --lease is leased by no router and never failed
// over automatically, while a leased node lost beside it is.
func TestNodeWithoutLeaseNeverFailedOverCP(t *testing.T) {
	r := startLeasingRouter(t)
	free, a, b := startLeaseNode(t, false), startLeaseNode(t, true), startLeaseNode(t, true)
	r.addLeaseNode(t, "free", free, nil)
	r.addLeaseNode(t, "a", a, nil)
	r.addLeaseNode(t, "b", b, nil)
	r.waitLeased(t, "a")
	r.waitLeased(t, "b")
	for _, n := range []string{"free", "a"} {
		if st, body := r.shard(t, http.MethodPut, "nodes/"+n, map[string]any{"standby": "b"}, nil); st != http.StatusCreated {
			t.Fatalf("standby of %s: %d %s", n, st, body)
		}
	}
	r.place(t, "tf", "free")
	r.place(t, "ta", "a")
	r.mustQuery(t, "tf", "create collection c (n int)")
	r.mustQuery(t, "ta", "create collection c (n int)")
	free.cut.Store(true)
	a.cut.Store(true)
	free.CloseClientConnections()
	testkit.Eventually(t, cpWait, func() error {
		if e := r.tenantsOf(t)["ta"]; e.Node != "b" {
			return fmt.Errorf("ta still on %s", e.Node)
		}
		return nil
	})
	if e := r.tenantsOf(t)["tf"]; e.Node != "free" {
		t.Fatalf("a node without --lease was failed over: %+v", e)
	}
	for _, st := range r.leases(t).Nodes {
		if st.Node == "free" {
			t.Fatalf("a node without --lease is leased: %+v", st)
		}
	}
	var nodes []nodeEntry
	r.shard(t, http.MethodGet, "nodes", nil, &nodes)
	for _, n := range nodes {
		if want := n.Name != "free"; n.Lease != want {
			t.Fatalf("node %s recorded lease:%v", n.Name, n.Lease)
		}
	}
}

// A node that took a higher term of the router's own directory than the
// router's fences it, once the directory shows its term moved on: the
// router stops leasing and taking changes. A node holding a term the
// directory never reached (a forged grant) deposes no one: it is counted
// as not answering, and the router leads on.
func TestDeposedRouterStopsCP(t *testing.T) {
	r := startLeasingRouter(t)
	a, b := startLeaseNode(t, true), startLeaseNode(t, true)
	r.addLeaseNode(t, "a", a, nil)
	r.addLeaseNode(t, "b", b, nil)
	r.waitLeased(t, "a")
	r.waitLeased(t, "b")
	term := r.leases(t).Term
	list := []string{}
	g, _ := json.Marshal(lease.Grant{Term: term + 5, Router: "other", N: 1, MS: 1000, Tenants: list, List: lease.ListID(list), Dir: "global"})
	if st, _, body := cpDo(t, http.MethodPost, b.URL()+"/_admin/lease", cpAdminToken, g, nil); st != http.StatusOK {
		t.Fatalf("forged higher grant: %d %s", st, body)
	}
	testkit.Eventually(t, cpWait, func() error {
		for _, st := range r.leases(t).Nodes {
			if st.Node == "b" && st.FailedOver && st.LeasedBy != "" {
				return nil
			}
		}
		return fmt.Errorf("b not counted as refusing: %+v", r.leases(t))
	})
	if !r.rt.Leading() || !r.leases(t).Leasing {
		t.Fatal("deposed by a term its directory never reached")
	}
	r.waitLeased(t, "a")
	for range 5 { // another router promoted five times
		if _, err := r.rt.store.Promote(cpCtx(t), "other"); err != nil {
			t.Fatal(err)
		}
	}
	if st, _, body := cpDo(t, http.MethodPost, a.URL()+"/_admin/lease", cpAdminToken, g, nil); st != http.StatusOK {
		t.Fatalf("higher grant: %d %s", st, body)
	}
	testkit.Eventually(t, cpWait, func() error {
		if r.rt.Leading() || r.leases(t).Leasing {
			return fmt.Errorf("still leading %v / leasing %v", r.rt.Leading(), r.leases(t).Leasing)
		}
		return nil
	})
	if st, _ := r.shard(t, http.MethodPut, "tenants/x", map[string]any{"node": "a"}, nil); st != http.StatusConflict {
		t.Fatalf("a deposed router took a change: %d", st)
	}
}

// A tenant held by another operation when its node lapses is named by no
// grant of its node meanwhile, and is failed over once released.
func TestHeldTenantOffTheListCP(t *testing.T) {
	r := startLeasingRouter(t)
	a, b := startLeaseNode(t, true), startLeaseNode(t, true)
	r.addLeaseNode(t, "a", a, nil)
	r.addLeaseNode(t, "b", b, nil)
	r.waitLeased(t, "a")
	r.waitLeased(t, "b")
	if st, body := r.shard(t, http.MethodPut, "nodes/a", map[string]any{"standby": "b"}, nil); st != http.StatusCreated {
		t.Fatalf("standby: %d %s", st, body)
	}
	r.place(t, "h", "a")
	r.place(t, "f", "a")
	r.mustQuery(t, "h", "create collection c (n int)")
	ctx := cpCtx(t)
	cur, err := r.rt.store.GetTenant(ctx, "h")
	if err != nil {
		t.Fatal(err)
	}
	s, err := r.rt.lead.Changes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	held, err := s.Hold(ctx, "h", cur, "quota")
	if err != nil {
		t.Fatal(err)
	}
	a.cut.Store(true)
	testkit.Eventually(t, cpWait, func() error {
		if e := r.tenantsOf(t)["f"]; e.Node != "b" {
			return fmt.Errorf("f still on %s", e.Node)
		}
		return nil
	})
	if e := r.tenantsOf(t)["h"]; e.Node != "a" {
		t.Fatalf("held tenant failed over while held: %+v", e)
	}
	// Healed while h is still held: a's grants name neither tenant.
	a.cut.Store(false)
	testkit.Eventually(t, cpWait, func() error {
		st := a.leaseStatus(t)
		if st.LeftMS <= 0 {
			return fmt.Errorf("a not leased again: %+v", st)
		}
		if len(st.Tenants) != 0 {
			return fmt.Errorf("a's lease names %v", st.Tenants)
		}
		return nil
	})
	if _, err := s.Release(ctx, "h", held, "quota"); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, cpWait, func() error {
		if e := r.tenantsOf(t)["h"]; e.Node != "b" {
			return fmt.Errorf("h still on %s", e.Node)
		}
		return nil
	})
	r.mustQuery(t, "h", "put c {n: 1}")
	if st, _ := a.write(t, "h", 2); st != http.StatusServiceUnavailable {
		t.Fatalf("old node took a write for h: %d", st)
	}
}

// A standby promoted starts leasing at the new term and counts every node
// as granted then, failing none over for it; the router it was promoted
// over, fenced by the nodes, stops leasing and taking changes.
func TestPromotedStandbyLeasesCP(t *testing.T) {
	a := startCPRouter(t, func(c *Config) { c.ID = "ra"; c.AutoFailover = testLease })
	b := startCPRouter(t, func(c *Config) {
		c.ID, c.Standby, c.DirectoryURLs, c.AutoFailover = "rb", true, a.rt.DirectoryURLs(), testLease
	})
	n1, n2 := startLeaseNode(t, true), startLeaseNode(t, true)
	a.addLeaseNode(t, "n1", n1, nil)
	a.addLeaseNode(t, "n2", n2, nil)
	a.waitLeased(t, "n1")
	a.waitLeased(t, "n2")
	a.place(t, "p", "n1")
	a.mustQuery(t, "p", "create collection c (n int)")
	if l := b.leases(t); l.Leasing || len(l.Nodes) != 0 {
		t.Fatalf("a standby leases: %+v", l)
	}
	var prom struct {
		Leader string `json:"leader"`
		Term   uint64 `json:"term"`
	}
	if st, body := b.shard(t, http.MethodPost, "promote", nil, &prom); st != http.StatusOK {
		t.Fatalf("promote: %d %s", st, body)
	}
	b.waitLeased(t, "n1")
	b.waitLeased(t, "n2")
	if l := b.leases(t); l.Term != prom.Term {
		t.Fatalf("promoted router leases at term %d, promoted to %d", l.Term, prom.Term)
	}
	testkit.Eventually(t, cpWait, func() error {
		if a.rt.Leading() || a.leases(t).Leasing {
			return fmt.Errorf("the old router still leads (%v) or leases (%v)", a.rt.Leading(), a.leases(t).Leasing)
		}
		return nil
	})
	// The tenant stayed, and writes through the new leader.
	if e := b.tenantsOf(t)["p"]; e.Node != "n1" {
		t.Fatalf("p moved at the promotion: %+v", e)
	}
	b.mustQuery(t, "p", "put c {n: 1}")
	if st := n1.leaseStatus(t); st.Term != prom.Term || !slices.Equal(st.Tenants, []string{"p"}) {
		t.Fatalf("n1's lease after the promotion: %+v", st)
	}
}

// Recording a leased node again at the address it already has (an operator
// re-running its registration) keeps it leased: the router probes each
// address once, so a dropped lease:true would stop its grants and with
// them every write on the node. Naming its standby meanwhile, while the
// router writes the node's record too, is not refused as a conflict.
func TestNodeRecordedAgainStaysLeasedCP(t *testing.T) {
	r := startLeasingRouter(t)
	a, b := startLeaseNode(t, true), startLeaseNode(t, true)
	r.addLeaseNode(t, "a", a, nil)
	r.addLeaseNode(t, "b", b, nil)
	if st, body := r.shard(t, http.MethodPut, "nodes/a", map[string]any{"standby": "b"}, nil); st != http.StatusCreated {
		t.Fatalf("name b a's standby: %d %s", st, body)
	}
	r.waitLeased(t, "a")
	r.waitLeased(t, "b")
	r.addLeaseNode(t, "a", a, nil)
	v := r.rt.watcher.View()
	if n, ok := v.Node("a"); !ok || !n.Lease {
		t.Fatalf("a recorded again: %+v, want lease:true", n)
	}
	if n, _ := v.Node("b"); !n.Standby || !n.Lease {
		t.Fatalf("b: %+v, want standby and lease", n)
	}
	r.place(t, "t", "a")
	r.mustQuery(t, "t", "create collection c (n int)")
	// Past two leases: a lease granted before the record was written again
	// has lapsed by now unless a was granted more.
	time.Sleep(2 * testLease)
	r.waitLeased(t, "a")
	if st, _ := a.write(t, "t", 1); st != http.StatusOK {
		t.Fatalf("write on a after it was recorded again: %d", st)
	}
}
