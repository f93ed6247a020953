package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/fenec-go/fenec/tests/cluster"
	"github.com/fenec-go/fenec/tests/dnsstub"
)

// leaseSecs is the routers' lease in these tests: short, so a lapse and a
// failover take a couple of seconds.
const leaseSecs = "1"

// leasedPair starts a router leasing for leaseSecs and two --lease nodes
// under --sync always, n2 the standby of n1 (and n1 of n2), both recorded
// as taking leases. Extra node flags go to both.
func leasedPair(t *testing.T) (*cluster.Cluster, *cluster.Router, *cluster.Node, *cluster.Node) {
	t.Helper()
	return leasedPairWaiting(t, "5")
}

// leasedPairWaiting is leasedPair with the router's --upstream-timeout.
func leasedPairWaiting(t *testing.T, upstream string) (*cluster.Cluster, *cluster.Router, *cluster.Node, *cluster.Node) {
	t.Helper()
	c := cluster.New(t)
	r := c.StartRouter("router", cluster.RouterOptions{Args: []string{"--auto-failover", leaseSecs, "--upstream-timeout", upstream}})
	n1, n2 := standbyPair(t, c, r)
	return c, r, n1, n2
}

// standbyPair starts two --lease nodes under --sync always, records them
// with r, which leases them, names n2 n1's standby, and waits until both
// run leases.
func standbyPair(t *testing.T, c *cluster.Cluster, r *cluster.Router) (*cluster.Node, *cluster.Node) {
	t.Helper()
	args := []string{"--lease", "--sync", "always", "--replication-token", replToken}
	n1 := c.StartNode("n1", cluster.NodeOptions{Args: args})
	n2 := c.StartNode("n2", cluster.NodeOptions{Args: args})
	r.Register(n1)
	r.Register(n2)
	wantStatus(t, r.Client().Do("PUT", "/_shard/nodes/n1", map[string]any{"standby": "n2"}), 201, "name n2 n1's standby")
	waitLeased(t, r, "n1", "n2")
	return n1, n2
}

// waitLeased waits until the router records every named node as taking
// leases and each runs one.
func waitLeased(t *testing.T, r *cluster.Router, nodes ...string) {
	t.Helper()
	cluster.Eventually(t, wait, func() error {
		var a struct {
			Nodes []struct {
				Node   string `json:"node"`
				Ran    bool   `json:"ran"`
				LeftMS int64  `json:"left_ms"`
			} `json:"nodes"`
		}
		res := r.Client().Do("GET", "/_shard/leases", nil)
		if res.Status != 200 || json.Unmarshal(res.Body, &a) != nil {
			return fmt.Errorf("leases: %s", res)
		}
		running := map[string]bool{}
		for _, n := range a.Nodes {
			running[n.Node] = n.Ran && n.LeftMS > 0
		}
		for _, n := range nodes {
			if !running[n] {
				return fmt.Errorf("%s not leased yet: %s", n, res.Body)
			}
		}
		return nil
	})
}

// waitOn waits until the router places tenant on node.
func waitOn(t *testing.T, r *cluster.Router, tenant, node string) {
	t.Helper()
	cluster.Eventually(t, wait, func() error {
		if got := placement(t, r.Client(), tenant)["node"]; got != node {
			return fmt.Errorf("%s on %v, want %s", tenant, got, node)
		}
		return nil
	})
}

// kvTenant places tenant on n with a kv collection holding keys.
func kvTenant(t *testing.T, r *cluster.Router, tenant string, n *cluster.Node, keys int) {
	t.Helper()
	r.Place(tenant, n)
	c := r.Client()
	c.MustQuery(tenant, "create collection kv (k text @unique, v int)")
	for k := range keys {
		c.MustQuery(tenant, "put kv {k: $1, v: 0}", "k"+strconv.Itoa(k))
	}
}

// A node cut off from the router while its own client still reaches it
// stops taking that client's writes before its tenant's copy is promoted:
// no direct write that began after the promoted copy acknowledged one is
// acknowledged. The old node refuses with Fenec-Refused: lease after.
func TestLeaseCutNodeStopsBeforePromotion(t *testing.T) {
	_, r, n1, n2 := leasedPair(t)
	kvTenant(t, r, "cut", n1, 1)
	caughtUp(t, "cut", n1, n2)
	direct := NewDirect(t, n1)
	via := r.Client()
	start := time.Now()
	since := func() int64 { return int64(time.Since(start)) }

	n1.Cut()
	var firstNew atomic.Int64 // when a write through the router first came back 200 from n2
	firstNew.Store(math.MaxInt64)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 1; ctx.Err() == nil; i++ {
			res := via.DoCtx(ctx, "PATCH", "/t/cut/kv?k=eq.k0", fmt.Sprintf(`{"v": %d}`, -i), "Idempotency-Key", "via-"+strconv.Itoa(i))
			if res.Status == 200 {
				if placement(t, via, "cut")["node"] == "n2" {
					firstNew.CompareAndSwap(math.MaxInt64, since())
					return
				}
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
	// n1's own view of its lease, asked directly (not through the cut).
	var lapsedAt atomic.Int64
	wg.Go(func() {
		admin := n1.Admin()
		for ctx.Err() == nil {
			res := admin.DoCtx(ctx, "GET", "/_admin/lease", nil)
			var st struct {
				LeftMS int64 `json:"left_ms"`
			}
			if res.Status == 200 && json.Unmarshal(res.Body, &st) == nil && st.LeftMS == 0 {
				lapsedAt.Store(since())
				return
			}
			time.Sleep(2 * time.Millisecond)
		}
	})
	var late []string
	for i := 1; ctx.Err() == nil; i++ {
		began := since()
		res := direct.DoCtx(ctx, "PATCH", "/t/cut/kv?k=eq.k0", fmt.Sprintf(`{"v": %d}`, i))
		if res.Status == 200 && began > firstNew.Load() {
			late = append(late, fmt.Sprintf("write %d began %v after n2 took one", i, time.Duration(began-firstNew.Load())))
		}
		if res.Status == 503 {
			if res.Header.Get("Fenec-Refused") != "lease" || res.Header.Get("Retry-After") == "" {
				t.Fatalf("refusal headers %v", res.Header)
			}
			if firstNew.Load() != math.MaxInt64 {
				break
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
	wg.Wait()
	if len(late) > 0 {
		t.Fatalf("two primaries: the cut node acknowledged %d writes after its copy took one: %v", len(late), late)
	}
	if l := lapsedAt.Load(); l == 0 || l > firstNew.Load() {
		t.Fatalf("the cut node's lease lapsed at %v, the copy took a write at %v", time.Duration(l), time.Duration(firstNew.Load()))
	}
	waitOn(t, r, "cut", "n2")
	res := direct.Do("PATCH", "/t/cut/kv?k=eq.k0", `{"v": 1}`)
	wantError(t, res, 503, "write on the cut node after its failover")
}

// A --sync always node killed under writers through the router: the
// writers write again on the promoted copy and no acknowledged write is
// lost; every key's history is linearizable. A node started without
// --lease, killed beside it, is never failed over.
func TestLeaseKilledNodeWritersGoOn(t *testing.T) {
	c, r, n1, _ := leasedPair(t)
	free := c.StartNode("free", cluster.NodeOptions{Args: []string{"--sync", "always", "--replication-token", replToken}})
	r.Register(free)
	wantStatus(t, r.Client().Do("PUT", "/_shard/nodes/free", map[string]any{"standby": "n2"}), 201, "name n2 free's standby")
	const keys = 3
	kvTenant(t, r, "kill", n1, keys)
	kvTenant(t, r, "still", free, 1)

	hs := make([]*history, keys)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	for k := range keys {
		hs[k] = &history{start: time.Now()}
		for w := range 2 {
			cl := cluster.NewClient(t, r.URL(), cluster.RouterToken)
			wg.Go(func() { keyClient(ctx, t, cl, "kill", "k"+strconv.Itoa(k), k*10+w, hs[k]) })
		}
	}
	atLeast := func(n int) {
		t.Helper()
		cluster.Eventually(t, wait, func() error {
			for k, h := range hs {
				if got := h.len(); got < n {
					return fmt.Errorf("key %d: %d operations, want %d", k, got, n)
				}
			}
			return nil
		})
	}
	atLeast(30)
	n1.Kill()
	free.Kill()
	waitOn(t, r, "kill", "n2")
	before := hs[0].len()
	atLeast(before + 30)
	cancel()
	wg.Wait()
	// A last read of every key: an acknowledged write lost shows here.
	for k, h := range hs {
		rctx, rcancel := context.WithTimeout(context.Background(), wait)
		keyClientOnce(rctx, t, r.Client(), "kill", "k"+strconv.Itoa(k), 999, h)
		rcancel()
	}
	for k, h := range hs {
		checkLinearizable(t, "key k"+strconv.Itoa(k), h.ops)
	}
	if got := placement(t, r.Client(), "still")["node"]; got != "free" {
		t.Fatalf("a node without --lease was failed over: still on %v", got)
	}
	for _, row := range r.Client().Do("GET", "/_shard/nodes", nil).Rows(t) {
		if row["name"] == "free" && row["lease"] == true {
			t.Fatalf("a node without --lease recorded as taking one: %v", row)
		}
	}
}

// keyClientOnce reads key once, recording the read in h.
func keyClientOnce(ctx context.Context, t *testing.T, c *cluster.Client, tenant, key string, id int, h *history) {
	t.Helper()
	op := porcupine.Operation{ClientId: id, Input: regInput{}, Call: h.now()}
	for ctx.Err() == nil {
		res := c.DoCtx(ctx, "GET", "/t/"+tenant+"/kv?k=eq."+key+"&select=v", nil)
		if res.Status != 200 {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		var rows []struct{ V int64 }
		if err := json.Unmarshal(res.Body, &rows); err != nil || len(rows) != 1 {
			t.Fatalf("last read of %s: %s", key, res)
		}
		op.Output, op.Return = rows[0].V, h.now()
		h.add(op)
		return
	}
	t.Fatalf("last read of %s: %v", key, ctx.Err())
}

// keyClient reads and writes one key of tenant through the router until
// ctx ends. Writes carry an Idempotency-Key and are sent again until
// answered 200 (a 500 of unknown outcome too), so each has one outcome.
func keyClient(ctx context.Context, t *testing.T, c *cluster.Client, tenant, key string, id int, h *history) {
	for i := 0; ctx.Err() == nil; i++ {
		in := regInput{write: i%2 == 0, v: int64(id*1_000_000 + i + 1)}
		op := porcupine.Operation{ClientId: id, Input: in, Call: h.now()}
		for {
			var res *cluster.Resp
			if in.write {
				res = c.DoCtx(ctx, "PATCH", "/t/"+tenant+"/kv?k=eq."+key, fmt.Sprintf(`{"v": %d}`, in.v),
					"Idempotency-Key", key+"-"+strconv.Itoa(id)+"-"+strconv.Itoa(i))
			} else {
				res = c.DoCtx(ctx, "GET", "/t/"+tenant+"/kv?k=eq."+key+"&select=v", nil)
			}
			if ctx.Err() != nil {
				if in.write {
					op.Return = math.MaxInt64
					h.add(op)
				}
				return
			}
			if res.Status != 200 {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			if in.write {
				op.Output = int64(0)
			} else {
				var rows []struct{ V int64 }
				if err := json.Unmarshal(res.Body, &rows); err != nil || len(rows) != 1 {
					t.Errorf("client %d read: %s", id, res)
					return
				}
				op.Output = rows[0].V
			}
			op.Return = h.now()
			h.add(op)
			break
		}
	}
}

// A node stopped (SIGSTOP) past its lease and continued after its
// tenant was promoted takes no write for it, even from grants waiting in
// its socket.
func TestLeasePausedNodeTakesNoWrite(t *testing.T) {
	_, r, n1, n2 := leasedPair(t)
	kvTenant(t, r, "paused", n1, 1)
	caughtUp(t, "paused", n1, n2)
	direct := NewDirect(t, n1)
	n1.Pause()
	waitOn(t, r, "paused", "n2")
	wantStatus(t, r.Client().Do("PATCH", "/t/paused/kv?k=eq.k0", `{"v": 7}`), 200, "write on the new primary")
	n1.Continue()
	for i := range 20 {
		res := direct.Do("PATCH", "/t/paused/kv?k=eq.k0", fmt.Sprintf(`{"v": %d}`, 100+i))
		if res.Status == 200 {
			t.Fatalf("the continued node took write %d for a tenant promoted elsewhere", i)
		}
	}
	// It is leased again, naming none of its old tenants.
	cluster.Eventually(t, wait, func() error {
		res := n1.Admin().Do("GET", "/_admin/lease", nil)
		var st struct {
			Tenants []string `json:"tenants"`
			LeftMS  int64    `json:"left_ms"`
		}
		if res.Status != 200 || json.Unmarshal(res.Body, &st) != nil || st.LeftMS <= 0 {
			return fmt.Errorf("n1's lease: %s", res)
		}
		if len(st.Tenants) != 0 {
			return fmt.Errorf("n1's lease names %v", st.Tenants)
		}
		return nil
	})
	res := direct.Do("PATCH", "/t/paused/kv?k=eq.k0", `{"v": 1}`)
	if res.Status == 200 {
		t.Fatal("the continued node took a write once leased again")
	}
	got := r.Client().Do("GET", "/t/paused/kv?k=eq.k0&select=v", nil)
	wantStatus(t, got, 200, "read on the new primary")
	if string(got.Body) != `[{"v":7}]`+"\n" && string(got.Body) != `[{"v":7}]` {
		t.Fatalf("new primary holds %s", got.Body)
	}
}

// A node recorded by a name its resolver stops answering (its machine
// gone, the DNS server slow to refuse) holds up only its own renewal and
// failover: the router, looking names up at a DNS server that never
// answers for it, fails it over onto its copy, while every write to a
// healthy node's tenant goes on being taken and the healthy node is
// never failed over.
func TestLeaseSilentNameDelaysNoOther(t *testing.T) {
	c := cluster.New(t)
	dns := dnsstub.New(t)
	// A 2 s lease: the test asks that no write to n1 is ever refused, which
	// a starved machine must not turn into a spurious lapse.
	// --insecure: n3 is recorded by a name in clear, which a router takes
	// only so (the name is loopback here, which the router cannot know).
	r := c.StartRouter("router", cluster.RouterOptions{Args: []string{
		"--auto-failover", "2", "--upstream-timeout", "5", "--resolver", dns.Addr(), "--insecure"}})
	// The nodes look n3's name up at the same server: n2 follows n3 by it.
	args := []string{"--lease", "--sync", "always", "--replication-token", replToken, "--resolver", dns.Addr()}
	n1 := c.StartNode("n1", cluster.NodeOptions{Args: args})
	n2 := c.StartNode("n2", cluster.NodeOptions{Args: args})
	n3 := c.StartNode("n3", cluster.NodeOptions{Args: args})
	r.Register(n1)
	r.Register(n2)
	const name = "n3.fenec.test"
	dns.Set(name, netip.MustParseAddr("127.0.0.1"))
	_, port, err := net.SplitHostPort(n3.Addr())
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, r.Client().Do("PUT", "/_shard/nodes/n3", map[string]any{
		"addr": "http://" + name + ":" + port, "token": cluster.AdminToken, "region": "local", "standby": "n2",
	}), 201, "record n3 by name")
	wantStatus(t, r.Client().Do("PUT", "/_shard/nodes/n1", map[string]any{"standby": "n2"}), 201, "name n2 n1's standby")
	waitLeased(t, r, "n1", "n2", "n3")
	kvTenant(t, r, "steady", n1, 1)
	kvTenant(t, r, "lost", n3, 1)
	caughtUp(t, "lost", n3, n2)

	// One writer on the healthy node's tenant, through the router, for the
	// whole test: every write must be taken.
	ctx, cancel := context.WithCancel(context.Background())
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		refused  []string
		wrote    int
		longest  time.Duration
		lastDone = time.Now()
	)
	t.Cleanup(func() { cancel(); wg.Wait() })
	cl := cluster.NewClient(t, r.URL(), cluster.RouterToken)
	wg.Go(func() {
		for i := 0; ctx.Err() == nil; i++ {
			res := cl.DoCtx(ctx, "PATCH", "/t/steady/kv?k=eq.k0", fmt.Sprintf(`{"v": %d}`, i))
			if ctx.Err() != nil {
				return
			}
			mu.Lock()
			if res.Status == 200 {
				wrote++
				longest = max(longest, time.Since(lastDone))
				lastDone = time.Now()
			} else {
				refused = append(refused, res.String())
			}
			mu.Unlock()
			time.Sleep(5 * time.Millisecond)
		}
	})

	dns.Silence(name)
	n3.Kill()
	waitOn(t, r, "lost", "n2")
	wantStatus(t, r.Client().Do("PATCH", "/t/lost/kv?k=eq.k0", `{"v": 1}`), 200, "write to the failed-over tenant on its copy")
	// Two more leases of the healthy node's writes after the failover.
	time.Sleep(4 * time.Second)
	cancel()
	wg.Wait()
	if len(refused) > 0 {
		t.Fatalf("%d writes to the healthy node's tenant refused while n3's name hung, first: %s", len(refused), refused[0])
	}
	if wrote == 0 {
		t.Fatal("no write to the healthy node's tenant was taken")
	}
	if dns.Dropped() == 0 {
		t.Fatal("nobody looked n3's name up once it went silent: the test showed nothing")
	}
	if got := placement(t, r.Client(), "steady")["node"]; got != "n1" {
		t.Fatalf("the healthy node's tenant was failed over: on %v", got)
	}
	t.Logf("%d writes to the healthy node's tenant, the longest gap between two %v; %d lookups of n3 left unanswered",
		wrote, longest, dns.Dropped())
}

// A copy that stops acknowledging (its node paused) loses none of the
// writes its primary answers without it: before answering them the
// primary has the leasing router record the copy behind, and when the
// primary is then killed its tenant is not failed over onto that copy —
// the failover says why and what to do. The primary back, every answered
// write is there, and the tenant takes writes again.
func TestLeaseCopyBehindNotPromoted(t *testing.T) {
	_, r, n1, n2 := leasedPairWaiting(t, "30") // no held write is cut by the router
	kvTenant(t, r, "lag", n1, 1)
	caughtUp(t, "lag", n1, n2)
	via := r.Client()
	// n2 follows under its own name, so n1 counts its acks: a write is
	// answered at once and nothing is recorded behind.
	cluster.Eventually(t, wait, func() error {
		res := n1.Admin().Do("GET", "/_admin/lease", nil)
		if !strings.Contains(string(res.Body), `"in_step":["lag"]`) || !strings.Contains(string(res.Body), `"lag":"n2"`) {
			return fmt.Errorf("n1's lease: %s", res)
		}
		return nil
	})
	for i := range 5 {
		wantStatus(t, via.Do("PATCH", "/t/lag/kv?k=eq.k0", fmt.Sprintf(`{"v": %d}`, -i)), 200, "a write the copy acknowledges")
	}
	// Each was answered on the copy's ack: none waited out the bound and
	// had the copy recorded behind.
	if p := placement(t, via, "lag"); p["replica"] != "n2" || p["replica_behind"] != nil {
		t.Fatalf("placement before: %v", p)
	}

	n2.Pause() // acknowledges nothing from here
	began := time.Now()
	wantStatus(t, via.Do("PATCH", "/t/lag/kv?k=eq.k0", `{"v": 1}`), 200, "the write the paused copy never acknowledged")
	held := time.Since(began)
	p := placement(t, via, "lag")
	if b, _ := p["replica_behind"].(float64); b <= 0 {
		t.Fatalf("write answered after %v, the replica not recorded behind: %v", held, p)
	}
	wantStatus(t, via.Do("PATCH", "/t/lag/kv?k=eq.k0", `{"v": 2}`), 200, "a second write, the copy recorded behind")
	t.Logf("the first write was held %v; the replica recorded behind at seq %v", held, p["replica_behind"])

	n1.Kill()
	n2.Continue()
	// The router fails n1 over on its lapsed lease, and refuses to promote
	// the copy; asked by hand, it says why.
	cluster.Eventually(t, wait, func() error {
		res := via.Do("POST", "/_shard/nodes/n1/failover", map[string]any{})
		if res.Status != 502 || !strings.Contains(string(res.Body), "recorded behind") || !strings.Contains(string(res.Body), "force") {
			return fmt.Errorf("failover by hand: %s", res)
		}
		return nil
	})
	time.Sleep(3 * time.Second) // more than a lapse: the leasing router tried too
	if p := placement(t, via, "lag"); p["node"] != "n1" {
		t.Fatalf("the tenant was failed over onto the copy that lacks its writes: %v", p)
	}

	n1.Restart()
	cluster.Eventually(t, wait, func() error {
		res := via.Do("GET", "/t/lag/kv?k=eq.k0&select=v", nil)
		if res.Status != 200 || !strings.Contains(string(res.Body), `"v":2`) {
			return fmt.Errorf("read after n1 came back: %s", res)
		}
		return nil
	})
	cluster.Eventually(t, wait, func() error {
		if res := via.Do("PATCH", "/t/lag/kv?k=eq.k0", `{"v": 3}`); res.Status != 200 {
			return fmt.Errorf("write after n1 came back: %s", res)
		}
		return nil
	})
}

// A copy's node killed costs the writes of its primary's tenant no more
// than a lost primary costs its own (about a lease), not a fixed wait
// longer than the routers' upstream timeout: with a lease of 1 s and an
// upstream timeout of 3 s, every write after the kill is answered 200 on
// its first try — the first once the primary had the copy recorded behind
// (never answered as held by a copy that did not hold it) — where a 5 s
// wait for the dead copy had the router answer 502.
func TestLeaseKilledCopyStallsNoWriteOfItsPrimary(t *testing.T) {
	_, r, n1, n2 := leasedPairWaiting(t, "3")
	kvTenant(t, r, "dep", n1, 1)
	caughtUp(t, "dep", n1, n2)
	cluster.Eventually(t, wait, func() error {
		res := n1.Admin().Do("GET", "/_admin/lease", nil)
		if !strings.Contains(string(res.Body), `"in_step":["dep"]`) {
			return fmt.Errorf("n1's lease: %s", res)
		}
		return nil
	})
	via := r.Client()
	wantStatus(t, via.Do("PATCH", "/t/dep/kv?k=eq.k0", `{"v": 1}`), 200, "a write the copy acknowledges")

	n2.Kill()
	for i := range 5 {
		wantStatus(t, via.Do("PATCH", "/t/dep/kv?k=eq.k0", fmt.Sprintf(`{"v": %d}`, 2+i)), 200, "a write after the copy's node was killed")
	}
	if b, _ := placement(t, via, "dep")["replica_behind"].(float64); b <= 0 {
		t.Fatal("writes answered without the copy, which is not recorded behind")
	}
	if res := via.Do("GET", "/t/dep/kv?k=eq.k0&select=v", nil); res.Status != 200 || !strings.Contains(string(res.Body), `"v":6`) {
		t.Fatalf("read back: %s", res)
	}
}

// A router restarted on its directory with a shorter lease (from
// --auto-failover 5 to 1) shortens the node's lease with its first
// acknowledged grant, and a tenant placed at once takes its first write at
// once, through the router, on the first try: the node takes the restarted
// router's grants as newer than the longer lease it held, list included.
func TestRouterRestartedWithShorterLease(t *testing.T) {
	c := cluster.New(t)
	r := c.StartRouter("router", cluster.RouterOptions{Args: []string{"--auto-failover", "5"}})
	n1 := c.StartNode("n1", cluster.NodeOptions{Args: []string{"--lease", "--sync", "always"}})
	r.Register(n1)
	waitLeased(t, r, "n1")
	kvTenant(t, r, "before", n1, 1)

	r.Stop()
	r.SetFlag("--auto-failover", "1")
	r.Restart()
	r.Place("fresh", n1)
	wantStatus(t, r.Client().Query("fresh", "create collection kv (k text @unique, v int)"), 200,
		"the first write of a tenant placed at once after the restart")
	waitLeased(t, r, "n1")
	var st struct {
		LeftMS  int64    `json:"left_ms"`
		Tenants []string `json:"tenants"`
	}
	res := n1.Admin().Do("GET", "/_admin/lease", nil)
	if res.Status != 200 || json.Unmarshal(res.Body, &st) != nil {
		t.Fatalf("n1's lease: %s", res)
	}
	if st.LeftMS > 1000 {
		t.Fatalf("n1's lease has %d ms left after the restarted router's grants ran one, want at most its lease of 1000: %s", st.LeftMS, res.Body)
	}
	wantStatus(t, r.Client().Do("PATCH", "/t/before/kv?k=eq.k0", `{"v": 1}`), 200, "a write on the tenant placed before the restart")
}
