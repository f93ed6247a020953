package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/fenec-go/fenec/internal/testkit"
	"github.com/fenec-go/fenec/tests/cluster"
)

// The tests below run a two-region deployment (cluster.Regions): the
// global tier, regions eu and us with a leading router and a standby each
// and nodes under --lease --sync always, each node's tenants copied on the
// next; writers read and write one register per tenant through the
// regions' routers, with keyed writes, and each tenant's history is
// checked for linearizability with porcupine: no acknowledged write is
// lost and no read sees the past. They hand eu's leasing over and back,
// lose the global tier, force the takeover, and kill eu's router in the
// middle of a handoff.

// regionLease is every router's lease in these tests, in seconds.
const regionLease = "1"

// regionRegister is one tenant's register under writers: its history, and
// the longest time no operation on it came back.
type regionRegister struct {
	tenant string
	h      *history

	mu      sync.Mutex
	last    time.Time     // guarded by mu: when an operation last came back
	longest time.Duration // guarded by mu
	at      time.Time     // guarded by mu: when the longest pause ended
}

func (r *regionRegister) done(now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if gap := now.Sub(r.last); !r.last.IsZero() && gap > r.longest {
		r.longest, r.at = gap, now
	}
	r.last = now
}

func (r *regionRegister) pause() (time.Duration, time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.longest, r.at
}

// writers runs clients on each tenant's register until stop: clients per
// tenant, each through one of the routers given (in turn). Writes carry
// an Idempotency-Key and are sent again until answered 200, reads too, so
// each operation has one outcome; one cut short by the end is left open.
type writers struct {
	t      *testing.T
	start  time.Time
	cancel context.CancelFunc
	wg     sync.WaitGroup
	regs   map[string]*regionRegister
}

func startWriters(t *testing.T, perTenant int, routes map[string][]*cluster.Router) *writers {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &writers{t: t, start: time.Now(), cancel: cancel, regs: map[string]*regionRegister{}}
	t.Cleanup(w.stop)
	id := 0
	for _, tenant := range slices.Sorted(mapKeys(routes)) {
		reg := &regionRegister{tenant: tenant, h: &history{start: w.start}}
		w.regs[tenant] = reg
		for i := range perTenant {
			rt := routes[tenant][i%len(routes[tenant])]
			cl := cluster.NewClient(t, rt.URL(), cluster.RouterToken)
			id++
			cid := id
			w.wg.Go(func() { registerClient(ctx, t, cl, reg, cid) })
		}
	}
	return w
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// registerClient is one client of a tenant's register.
func registerClient(ctx context.Context, t *testing.T, c *cluster.Client, reg *regionRegister, id int) {
	rng := rand.New(rand.NewPCG(uint64(id), 11))
	path := "/t/" + reg.tenant + "/kv?k=eq.x"
	for i := 0; ctx.Err() == nil; i++ {
		in := regInput{write: rng.IntN(2) == 0, v: int64(id*1_000_000 + i + 1)}
		op := porcupine.Operation{ClientId: id, Input: in, Call: reg.h.now()}
		for {
			var r *cluster.Resp
			if in.write {
				r = c.DoCtx(ctx, "PATCH", path, fmt.Sprintf(`{"v": %d}`, in.v), "Idempotency-Key", reg.tenant+"-"+strconv.Itoa(id)+"-"+strconv.Itoa(i))
			} else {
				r = c.DoCtx(ctx, "GET", path+"&select=v", nil)
			}
			if ctx.Err() != nil {
				if in.write { // it may have landed: open until the end
					op.Return = math.MaxInt64
					reg.h.add(op)
				}
				return
			}
			if r.Status != 200 {
				time.Sleep(5 * time.Millisecond) // refused (a lease, a handoff) or cut: ask again
				continue
			}
			if in.write {
				op.Output = int64(0)
			} else {
				var rows []struct{ V int64 }
				if err := json.Unmarshal(r.Body, &rows); err != nil || len(rows) != 1 {
					t.Errorf("%s client %d read: %s", reg.tenant, id, r)
					return
				}
				op.Output = rows[0].V
			}
			op.Return = reg.h.now()
			reg.h.add(op)
			reg.done(time.Now())
			break
		}
	}
}

// atLeast waits until every tenant's history holds n more operations than
// it held when called.
func (w *writers) atLeast(n int) {
	w.t.Helper()
	base := map[string]int{}
	for name, reg := range w.regs {
		base[name] = reg.h.len()
	}
	cluster.Eventually(w.t, wait, func() error {
		for name, reg := range w.regs {
			if got := reg.h.len() - base[name]; got < n {
				return fmt.Errorf("%s: %d operations more, want %d", name, got, n)
			}
		}
		return nil
	})
}

func (w *writers) stop() {
	w.cancel()
	w.wg.Wait()
}

// check stops the writers, checks each tenant's history and reports its
// longest pause.
func (w *writers) check() {
	w.t.Helper()
	w.stop()
	for _, name := range slices.Sorted(mapKeys(w.regs)) {
		reg := w.regs[name]
		reg.h.mu.Lock()
		ops := slices.Clone(reg.h.ops)
		reg.h.mu.Unlock()
		checkLinearizable(w.t, "register of "+name, ops)
		longest, at := reg.pause()
		w.t.Logf("%s: %d operations; the longest time no operation came back: %v (ending %v into the test)",
			name, len(ops), longest.Round(time.Millisecond), at.Sub(w.start).Round(time.Millisecond))
	}
}

// registerTenant places tenant on node n of region r at the global tier,
// with its register (kv, key x at 0), and waits for its copy to hold it.
func registerTenant(t *testing.T, rs *cluster.Regions, r *cluster.Region, tenant string, n *cluster.Node) {
	t.Helper()
	g := rs.Global.Client()
	wantStatus(t, g.Do("PUT", "/_shard/tenants/"+tenant, map[string]any{"node": n.Name}), 201, "place "+tenant)
	g.MustQuery(tenant, "create collection kv (k text @unique, v int)")
	g.MustQuery(tenant, "put kv {k: 'x', v: 0}")
	g.MustQuery(tenant, "put kv {k: 'direct', v: 0}")
	copyOn := r.Node(placement(t, g, tenant)["replica"].(string))
	caughtUp(t, tenant, n, copyOn)
}

// placementOf is tenant's row in the router's GET /_shard/tenants, if it
// lists it.
func placementOf(t *testing.T, c *cluster.Client, tenant string) (map[string]any, bool) {
	t.Helper()
	for _, row := range c.Do("GET", "/_shard/tenants", nil).Rows(t) {
		if row["name"] == tenant {
			return row, true
		}
	}
	return nil, false
}

// regionOf reads region name as router rt lists it.
func regionOf(t *testing.T, rt *cluster.Router, name string) map[string]any {
	t.Helper()
	res := rt.Client().Do("GET", "/_shard/regions", nil)
	wantStatus(t, res, 200, "regions")
	for _, row := range res.Rows(t) {
		if row["name"] == name {
			return row
		}
	}
	t.Fatalf("no region %s on %s: %s", name, rt.Name, res)
	return nil
}

// bindingOf reads the directory leasing node n and the epoch.
func bindingOf(t *testing.T, n *cluster.Node) (string, float64) {
	t.Helper()
	res := n.Admin().Do("GET", "/_admin/lease", nil)
	var st struct {
		Dir   string  `json:"dir"`
		Epoch float64 `json:"epoch"`
	}
	if res.Status != 200 || json.Unmarshal(res.Body, &st) != nil {
		t.Fatalf("%s's lease: %s", n.Name, res)
	}
	return st.Dir, st.Epoch
}

// leasedNodes names the nodes rt's GET /_shard/leases lists.
func leasedNodes(t *testing.T, rt *cluster.Router) []string {
	t.Helper()
	var a struct {
		Nodes []struct {
			Node string `json:"node"`
		} `json:"nodes"`
	}
	res := rt.Client().Do("GET", "/_shard/leases", nil)
	if res.Status != 200 || json.Unmarshal(res.Body, &a) != nil {
		t.Fatalf("leases on %s: %s", rt.Name, res)
	}
	var out []string
	for _, n := range a.Nodes {
		out = append(out, n.Node)
	}
	slices.Sort(out)
	return out
}

// directWriter writes key "direct" of tenant straight to node n (not
// through a router) until stop, recording when each write it was answered
// 200 was sent.
type directWriter struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	oks    []time.Time // guarded by mu: when each write answered 200 was sent
}

func startDirectWriter(t *testing.T, n *cluster.Node, tenant string) *directWriter {
	ctx, cancel := context.WithCancel(context.Background())
	d := &directWriter{cancel: cancel}
	t.Cleanup(d.stop)
	cl := NewDirect(t, n)
	d.wg.Go(func() {
		for i := 1; ctx.Err() == nil; i++ {
			sent := time.Now()
			rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
			res := cl.DoCtx(rctx, "PATCH", "/t/"+tenant+"/kv?k=eq.direct", fmt.Sprintf(`{"v": %d}`, i))
			rcancel()
			if res.Status == 200 {
				d.mu.Lock()
				d.oks = append(d.oks, sent)
				d.mu.Unlock()
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
	return d
}

func (d *directWriter) stop() {
	d.cancel()
	d.wg.Wait()
}

// after counts the direct writes answered 200 that were sent after at.
func (d *directWriter) after(at time.Time) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, s := range d.oks {
		if s.After(at) {
			n++
		}
	}
	return n
}

// firstWriteOn waits until a keyed write to tenant through rt lands while
// rt places the tenant on node, and returns when it was sent.
func firstWriteOn(t *testing.T, rt *cluster.Router, tenant, node string) time.Time {
	t.Helper()
	cl := rt.Client()
	var at time.Time
	cluster.Eventually(t, wait, func() error {
		if placement(t, cl, tenant)["node"] != node {
			return fmt.Errorf("%s not on %s yet", tenant, node)
		}
		sent := time.Now()
		if res := cl.Do("PATCH", "/t/"+tenant+"/kv?k=eq.direct", `{"v": -1}`, "Idempotency-Key", "probe-"+strconv.FormatInt(sent.UnixNano(), 36)); res.Status != 200 {
			return fmt.Errorf("write on %s: %s", tenant, res)
		}
		at = sent
		return nil
	})
	return at
}

// A planned handoff of eu's leasing to its own router and back, under
// writers through eu's routers, with eu1 cut off the network as the
// handoff begins: its tenant fails over onto its copy (by whichever side
// leased then), no acknowledged write is lost, no read sees the past, the
// cut node never takes a write after its tenant's new primary took one,
// and us, leased by the global tier throughout, writes on. Each node ends
// bound to the directory that leases it, at the epoch of each handoff.
func TestRegionHandoffUnderWriters(t *testing.T) {
	c := cluster.New(t)
	rs := c.StartRegions(cluster.RegionsOptions{Lease: regionLease, Regions: map[string]int{"eu": 3, "us": 2}})
	eu, us := rs.Region["eu"], rs.Region["us"]
	waitLeased(t, rs.Global, "eu1", "eu2", "eu3", "us1", "us2")
	registerTenant(t, rs, eu, "eu-a", eu.Node("eu1"))
	registerTenant(t, rs, eu, "eu-b", eu.Node("eu2"))
	registerTenant(t, rs, us, "us-a", us.Node("us1"))
	w := startWriters(t, 3, map[string][]*cluster.Router{
		"eu-a": {eu.Leader, eu.Standby}, "eu-b": {eu.Leader, eu.Standby}, "us-a": {us.Leader, us.Standby},
	})
	direct := startDirectWriter(t, eu.Node("eu1"), "eu-a")
	w.atLeast(50)

	handed := make(chan *cluster.Resp, 1)
	go func() {
		handed <- eu.Leader.Client().Do("POST", "/_shard/regions/eu/handoff", map[string]any{"to": "region"})
	}()
	time.Sleep(20 * time.Millisecond)
	eu.CutNode(eu.Node("eu1"))
	wantStatus(t, <-handed, 200, "hand eu's leasing to its router")
	newOn := firstWriteOn(t, eu.Leader, "eu-a", "eu2")
	waitLeased(t, eu.Leader, "eu2", "eu3")
	w.atLeast(50)
	for _, n := range []string{"eu2", "eu3"} {
		if dir, epoch := bindingOf(t, eu.Node(n)); dir != "region:eu" || epoch != 1 {
			t.Fatalf("%s bound to %s at epoch %v after the handoff", n, dir, epoch)
		}
	}
	if got := leasedNodes(t, rs.Global); !slices.Equal(got, []string{"us1", "us2"}) {
		t.Fatalf("the global tier leases %v after handing eu over", got)
	}

	wantStatus(t, rs.Global.Client().Do("POST", "/_shard/regions/eu/handoff", map[string]any{"to": "global"}), 200, "hand eu's leasing back")
	waitLeased(t, rs.Global, "eu2", "eu3")
	w.atLeast(50)
	eu.HealNode(eu.Node("eu1"))
	w.atLeast(50)
	w.check()
	direct.stop()
	if n := direct.after(newOn); n > 0 {
		t.Fatalf("eu1 took %d writes of eu-a sent after eu2 took one: two primaries", n)
	}
	for _, n := range []string{"eu2", "eu3"} {
		if dir, epoch := bindingOf(t, eu.Node(n)); dir != "global" || epoch != 2 {
			t.Fatalf("%s bound to %s at epoch %v after the handoff back", n, dir, epoch)
		}
	}
	if reg := regionOf(t, rs.Global, "eu"); reg["leaser"] != "global" || reg["epoch"] != float64(2) {
		t.Fatalf("eu after the handoff back: %v", reg)
	}
}

// eu leases its own nodes; then the global tier's routers and its
// directory are killed. eu goes on writing, and a killed eu node's tenant
// writes again on its copy, failed over by eu's router, within a lease and
// a tenth plus a third of a lease (the failover's stated bound) of the
// kill, and a margin for the promotion and the writer's next try. No
// acknowledged write is lost.
func TestRegionLeasesWithoutTheGlobalTier(t *testing.T) {
	c := cluster.New(t)
	rs := c.StartRegions(cluster.RegionsOptions{Lease: regionLease, Regions: map[string]int{"eu": 2, "us": 2}})
	eu := rs.Region["eu"]
	waitLeased(t, rs.Global, "eu1", "eu2")
	registerTenant(t, rs, eu, "eu-a", eu.Node("eu1"))
	registerTenant(t, rs, eu, "eu-b", eu.Node("eu2"))
	wantStatus(t, eu.Leader.Client().Do("POST", "/_shard/regions/eu/handoff", map[string]any{"to": "region"}), 200, "hand eu's leasing to its router")
	waitLeased(t, eu.Leader, "eu1", "eu2")
	w := startWriters(t, 3, map[string][]*cluster.Router{"eu-a": {eu.Leader, eu.Standby}, "eu-b": {eu.Leader, eu.Standby}})
	w.atLeast(30)

	rs.GlobalStandby.Kill()
	rs.Global.Kill()
	w.atLeast(100) // eu writes on without the global tier

	via := eu.Leader.Client()
	eu.Node("eu1").Kill()
	killed := time.Now()
	var resumed time.Duration
	cluster.Eventually(t, wait, func() error {
		res := via.Do("PATCH", "/t/eu-a/kv?k=eq.direct", `{"v": 7}`, "Idempotency-Key", "after-"+strconv.FormatInt(time.Now().UnixNano(), 36))
		if res.Status != 200 {
			return fmt.Errorf("write on eu-a: %s", res)
		}
		if on := placement(t, via, "eu-a")["node"]; on != "eu2" {
			return fmt.Errorf("eu-a still on %v", on)
		}
		resumed = time.Since(killed)
		return nil
	})
	lease := time.Second
	bound := lease + lease/10 + lease/3
	margin := 500 * time.Millisecond
	t.Logf("eu-a wrote again on eu2 %v after eu1's kill (the failover's bound %v)", resumed.Round(time.Millisecond), bound)
	if resumed > bound+margin {
		t.Fatalf("eu-a wrote again %v after eu1's kill, past the lease and a tenth plus a round (%v) and %v for the promotion", resumed, bound, margin)
	}
	w.atLeast(50)
	// eu-b's copy was on eu1: its first write after the kill waits the
	// copy's bound (5 s) for the copy to be recorded behind, as any write
	// whose copy stops acknowledging does.
	w.check()
	m := eu.Leader.Client().Do("GET", "/_metrics", nil)
	if !strings.Contains(string(m.Body), `fenec_router_auto_failovers_total{outcome="done"} 1`) {
		t.Fatalf("eu's router did not count its failover: %s", testkit.LinesWith(string(m.Body), "auto_failovers"))
	}
}

// eu is leased by the global tier when the global tier is cut off from eu
// (both go on running) and eu1 is killed. eu's operator forces the
// takeover on eu's router: eu's nodes it reaches take its grants, fenced
// to it; eu1, which it never reached, is failed over by hand, with force;
// eu's tenants write again, no acknowledged write is lost, no read sees
// the past. When the global tier reaches eu again it leases none of eu's
// nodes (they refuse it), fails none over, and its directory shows what
// eu did: eu-a on eu2, the region leased by itself.
func TestRegionForcedTakeover(t *testing.T) {
	c := cluster.New(t)
	rs := c.StartRegions(cluster.RegionsOptions{Lease: regionLease, Regions: map[string]int{"eu": 3, "us": 2}})
	eu, us := rs.Region["eu"], rs.Region["us"]
	waitLeased(t, rs.Global, "eu1", "eu2", "eu3", "us1", "us2")
	registerTenant(t, rs, eu, "eu-a", eu.Node("eu1"))
	registerTenant(t, rs, eu, "eu-b", eu.Node("eu2"))
	registerTenant(t, rs, us, "us-a", us.Node("us1"))
	cluster.Eventually(t, wait, func() error {
		if p, ok := placementOf(t, eu.Leader.Client(), "eu-b"); !ok || p["node"] != "eu2" {
			return fmt.Errorf("eu-b not in eu's copy: %v", p)
		}
		return nil
	})
	w := startWriters(t, 3, map[string][]*cluster.Router{
		"eu-a": {eu.Leader, eu.Standby}, "eu-b": {eu.Leader, eu.Standby}, "us-a": {us.Leader, us.Standby},
	})
	w.atLeast(30)

	eu.CutFromGlobal()
	eu.Node("eu1").Kill()
	via := eu.Leader.Client()
	res := via.Do("POST", "/_shard/regions/eu/handoff", map[string]any{"to": "region"})
	wantError(t, res, 503, "a planned handoff with the global tier cut off")
	// The global directory answered eu's link moments ago: forcing is
	// refused until it has been silent for the guard's window.
	res = via.Do("POST", "/_shard/regions/eu/handoff", map[string]any{"to": "region", "force": true})
	if e := wantError(t, res, 409, "a forced takeover just after the global directory answered"); !strings.Contains(e["error"].(string), "use a planned handoff") ||
		!strings.Contains(e["error"].(string), "even_if_global_answers") {
		t.Fatalf("the refusal says neither what to do nor how to force: %v", e)
	}
	cluster.Eventually(t, wait, func() error {
		res = via.Do("POST", "/_shard/regions/eu/handoff", map[string]any{"to": "region", "force": true})
		if res.Status != 200 {
			return fmt.Errorf("forced takeover: %s", res)
		}
		return nil
	})
	waitLeased(t, eu.Leader, "eu2", "eu3")
	for _, n := range []string{"eu2", "eu3"} {
		if dir, epoch := bindingOf(t, eu.Node(n)); dir != "region:eu" || epoch != 2 {
			t.Fatalf("%s bound to %s at epoch %v after the forced takeover", n, dir, epoch)
		}
	}
	// eu1 was never reached: nobody fails it over on their own.
	time.Sleep(3 * time.Second)
	if on := placement(t, via, "eu-a")["node"]; on != "eu1" {
		t.Fatalf("eu-a failed over from a node the region never reached, with no operator: on %v", on)
	}
	res = via.Do("POST", "/_shard/nodes/eu1/failover", map[string]any{"force": true})
	wantStatus(t, res, 200, "the operator's failover of eu1")
	w.atLeast(50)

	eu.HealFromGlobal()
	g := rs.Global.Client()
	cluster.Eventually(t, wait, func() error {
		reg := regionOf(t, rs.Global, "eu")
		if reg["leaser"] != "region" || reg["epoch"] != float64(2) {
			return fmt.Errorf("eu at the global tier: %v", reg)
		}
		if on := placement(t, g, "eu-a")["node"]; on != "eu2" {
			return fmt.Errorf("eu-a at the global tier: on %v", on)
		}
		if got := leasedNodes(t, rs.Global); !slices.Equal(got, []string{"us1", "us2"}) {
			return fmt.Errorf("the global tier leases %v", got)
		}
		return nil
	})
	w.atLeast(50)
	w.check()
	for _, n := range []string{"eu2", "eu3"} {
		if dir, epoch := bindingOf(t, eu.Node(n)); dir != "region:eu" || epoch != 2 {
			t.Fatalf("%s bound to %s at epoch %v after the global tier came back", n, dir, epoch)
		}
	}
	// The global tier, cut off, judged eu's nodes lapsed and tried: its
	// promotions were refused by the nodes (another directory leases
	// them) or never arrived, and its directory took eu's records, not
	// its own: eu-b is still on eu2, its copy on eu3 still a copy.
	for _, cl := range []*cluster.Client{g, via} {
		if p := placement(t, cl, "eu-b"); p["node"] != "eu2" || p["replica"] != "eu3" {
			t.Fatalf("eu-b at %s: %v", cl.Base(), p)
		}
	}
	if role, _, _ := replState(t, eu.Node("eu3"), "eu-b"); role != "replica" {
		t.Fatalf("eu-b's copy on eu3 is a %s", role)
	}
	// The global tier refuses changes for eu's tenants, naming eu's router.
	res = g.Do("PUT", "/_shard/tenants/eu-a/quota", map[string]any{"rows": 10})
	if e := wantError(t, res, 409, "a change for eu's tenant at the global tier"); !strings.Contains(e["error"].(string), "region eu") {
		t.Fatalf("the refusal names no region: %v", e)
	}
}

// eu's leading router is killed in the middle of a handoff of eu's
// leasing — to eu, and back to the global tier — and eu's standby is
// promoted (eu's directory has three members, so it outlives its
// leader). The handoff is done or rolled back, never left in between:
// every eu node ends bound to the directory the region record names, at
// its epoch; the other side leases none of them; writers through eu's
// standby lose no acknowledged write.
func TestRegionRouterKilledMidHandoff(t *testing.T) {
	for _, to := range []string{"region", "global"} {
		t.Run("to "+to, func(t *testing.T) { testKilledMidHandoff(t, to) })
	}
}

func testKilledMidHandoff(t *testing.T, to string) {
	c := cluster.New(t)
	rs := c.StartRegions(cluster.RegionsOptions{Lease: regionLease, Regions: map[string]int{"eu": 2}, HA: true})
	eu := rs.Region["eu"]
	waitLeased(t, rs.Global, "eu1", "eu2")
	registerTenant(t, rs, eu, "eu-a", eu.Node("eu1"))
	registerTenant(t, rs, eu, "eu-b", eu.Node("eu2"))
	if to == "global" {
		wantStatus(t, eu.Leader.Client().Do("POST", "/_shard/regions/eu/handoff", map[string]any{"to": "region"}), 200, "hand eu's leasing to its router first")
		waitLeased(t, eu.Leader, "eu1", "eu2")
	}
	w := startWriters(t, 3, map[string][]*cluster.Router{"eu-a": {eu.Standby, eu.Witness}, "eu-b": {eu.Standby, eu.Witness}})
	w.atLeast(30)

	asked := make(chan *cluster.Resp, 1)
	go func() { asked <- rs.Global.Client().Do("POST", "/_shard/regions/eu/handoff", map[string]any{"to": to}) }()
	time.Sleep(time.Duration(rand.IntN(80)) * time.Millisecond)
	eu.Leader.Kill()
	t.Logf("eu's router killed with eu's record at the global tier %v", regionOf(t, rs.Global, "eu")["handoff"])
	wantStatus(t, eu.Standby.Client().Do("POST", "/_shard/promote", nil), 200, "promote eu's standby")

	var reg map[string]any
	cluster.Eventually(t, wait, func() error {
		reg = regionOf(t, rs.Global, "eu")
		h, _ := reg["handoff"].(map[string]any)
		if h == nil || (h["state"] != "done" && h["state"] != "rolled_back") {
			return fmt.Errorf("eu's handoff still in flight: %v", reg)
		}
		if mine := regionOf(t, eu.Standby, "eu"); mine["leaser"] != reg["leaser"] || mine["epoch"] != reg["epoch"] {
			return fmt.Errorf("eu's own record %v, the global tier's %v", mine, reg)
		}
		return nil
	})
	t.Logf("the handoff ended %v; the operator was answered %s", reg["handoff"].(map[string]any)["state"], <-asked)
	wantDir, leaser, other := "global", rs.Global, eu.Standby
	if reg["leaser"] == "region" {
		wantDir, leaser, other = "region:eu", eu.Standby, rs.Global
	}
	waitLeased(t, leaser, "eu1", "eu2")
	cluster.Eventually(t, wait, func() error {
		for _, n := range []string{"eu1", "eu2"} {
			if dir, epoch := bindingOf(t, eu.Node(n)); dir != wantDir || epoch != reg["epoch"] {
				return fmt.Errorf("%s bound to %s at epoch %v, the record says %s at %v", n, dir, epoch, reg["leaser"], reg["epoch"])
			}
		}
		if got := leasedNodes(t, other); len(got) != 0 {
			return fmt.Errorf("%s leases %v too", other.Name, got)
		}
		return nil
	})
	w.atLeast(50)
	w.check()
}

// The global tier gives eu's leasing to eu's router, which is slow to take
// it (its link to the global directory made a slow one) and is killed, its
// link cut (the global tier still reaches eu's nodes), while the handoff
// stands given. Nobody leases eu then: the
// global tier rolls the handoff back once its lease has passed and leases
// eu again — unless the killed router's take, held on the network, lands
// first, when eu's standby, promoted, leases with it. Either way every eu
// node ends bound as the record says, no acknowledged write is lost, and
// the writes pause about a lease at most.
func TestRegionTakerKilledAfterGiven(t *testing.T) {
	c := cluster.New(t)
	rs := c.StartRegions(cluster.RegionsOptions{Lease: regionLease, Regions: map[string]int{"eu": 2}, HA: true})
	eu := rs.Region["eu"]
	waitLeased(t, rs.Global, "eu1", "eu2")
	registerTenant(t, rs, eu, "eu-a", eu.Node("eu1"))
	registerTenant(t, rs, eu, "eu-b", eu.Node("eu2"))
	w := startWriters(t, 3, map[string][]*cluster.Router{"eu-a": {eu.Standby, eu.Witness}, "eu-b": {eu.Standby, eu.Witness}})
	w.atLeast(30)

	eu.SlowLink(150 * time.Millisecond)
	asked := make(chan *cluster.Resp, 1)
	go func() {
		asked <- rs.Global.Client().Do("POST", "/_shard/regions/eu/handoff", map[string]any{"to": "region"})
	}()
	cluster.Eventually(t, wait, func() error {
		h, _ := regionOf(t, rs.Global, "eu")["handoff"].(map[string]any)
		if h == nil || h["state"] != "given" {
			return fmt.Errorf("eu's handoff: %v", h)
		}
		return nil
	})
	eu.CutLink()
	eu.Leader.Kill()
	wantStatus(t, eu.Standby.Client().Do("POST", "/_shard/promote", nil), 200, "promote eu's standby")
	time.Sleep(2 * time.Second) // past the giver's bound: it rolls back, or finds the dead router's take landed
	eu.SlowLink(0)
	eu.HealLink()

	var reg map[string]any
	cluster.Eventually(t, wait, func() error {
		reg = regionOf(t, rs.Global, "eu")
		h, _ := reg["handoff"].(map[string]any)
		if h == nil || (h["state"] != "done" && h["state"] != "rolled_back") {
			return fmt.Errorf("eu's handoff still in flight: %v", reg)
		}
		if mine := regionOf(t, eu.Standby, "eu"); mine["leaser"] != reg["leaser"] || mine["epoch"] != reg["epoch"] {
			return fmt.Errorf("eu's own record %v, the global tier's %v", mine, reg)
		}
		return nil
	})
	t.Logf("the handoff ended %v (%v); the operator was answered %s", reg["handoff"].(map[string]any)["state"],
		reg["handoff"].(map[string]any)["why"], <-asked)
	wantDir, leaser, other := "global", rs.Global, eu.Standby
	if reg["leaser"] == "region" {
		wantDir, leaser, other = "region:eu", eu.Standby, rs.Global
	}
	waitLeased(t, leaser, "eu1", "eu2")
	cluster.Eventually(t, wait, func() error {
		for _, n := range []string{"eu1", "eu2"} {
			if dir, epoch := bindingOf(t, eu.Node(n)); dir != wantDir || epoch != reg["epoch"] {
				return fmt.Errorf("%s bound to %s at epoch %v, the record says %s at %v", n, dir, epoch, reg["leaser"], reg["epoch"])
			}
		}
		if got := leasedNodes(t, other); len(got) != 0 {
			return fmt.Errorf("%s leases %v too", other.Name, got)
		}
		return nil
	})
	w.atLeast(50)
	w.check()
}
