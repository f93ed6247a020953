package tests

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fenec-go/fenec/tests/cluster"
)

// dataToken is the data token of the nodes in these tests.
const dataToken = "e2e-data-token"

// stranger is the loopback address a hostile client sends from, so that
// it is a client of its own to every server, apart from the test's
// well-behaved clients on 127.0.0.1.
const stranger = "127.0.0.2"

// guardedPair starts a router leasing for leaseSecs and two --lease nodes
// under --sync always that take data requests only with dataToken, n2 n1's
// standby, and waits until both run leases.
func guardedPair(t *testing.T) (*cluster.Router, *cluster.Node, *cluster.Node) {
	t.Helper()
	c := cluster.New(t)
	r := c.StartRouter("router", cluster.RouterOptions{Args: []string{"--auto-failover", leaseSecs, "--upstream-timeout", "5"}})
	args := []string{"--lease", "--sync", "always", "--replication-token", replToken, "--http-token", dataToken}
	n1 := c.StartNode("n1", cluster.NodeOptions{Args: args})
	n2 := c.StartNode("n2", cluster.NodeOptions{Args: args})
	r.Register(n1)
	r.Register(n2)
	wantStatus(t, r.Client().Do("PUT", "/_shard/nodes/n1", map[string]any{"standby": "n2"}), 201, "name n2 n1's standby")
	waitLeased(t, r, "n1", "n2")
	return r, n1, n2
}

// leaseAnswers is the router's count of a node: whether it failed it over,
// and how long ago its last grant answer came back.
func leaseAnswers(t *testing.T, r *cluster.Router, node string) (failedOver bool, lastAnswer time.Duration) {
	t.Helper()
	var a struct {
		Nodes []struct {
			Node         string `json:"node"`
			LastAnswerMS int64  `json:"last_answer_ms"`
			Answered     bool   `json:"answered"`
			FailedOver   bool   `json:"failed_over"`
		} `json:"nodes"`
	}
	res := r.Client().Do("GET", "/_shard/leases", nil)
	if res.Status != 200 || json.Unmarshal(res.Body, &a) != nil {
		t.Fatalf("leases: %s", res)
	}
	for _, n := range a.Nodes {
		if n.Node == node {
			if !n.Answered {
				return n.FailedOver, time.Hour
			}
			return n.FailedOver, time.Duration(n.LastAnswerMS) * time.Millisecond
		}
	}
	t.Fatalf("leases name no node %s: %s", node, res.Body)
	return false, 0
}

// stillLeased waits until the router has had grant answers from node
// twice over since the moment given (two renewals, a lease's worth), and
// fails t if it failed the node over meanwhile or the node stays silent.
func stillLeased(t *testing.T, r *cluster.Router, node string, since time.Time) {
	t.Helper()
	lease, _ := time.ParseDuration(leaseSecs + "s")
	cluster.Eventually(t, wait, func() error {
		failed, last := leaseAnswers(t, r, node)
		if failed {
			t.Fatalf("the router failed %s over", node)
		}
		if time.Since(since) < lease || time.Since(since)-last < lease*2/3 {
			return fmt.Errorf("%s's last grant answer %v ago, %v since the strangers", node, last, time.Since(since))
		}
		return nil
	})
}

// A stranger's bad tokens through the router slow the stranger, never the
// router: the node keys its back-off on the client the router names, so
// well-behaved clients behind the same router keep writing, the router's
// grants keep renewing the node's lease, and the healthy node is not
// failed over. The stranger itself is held off, its right token included.
func TestBadTokensThroughRouterLockOutOnlyTheirClient(t *testing.T) {
	r, n1, _ := guardedPair(t)
	r.Place("a", n1)
	good := cluster.NewClient(t, r.URL(), dataToken)
	good.MustQuery("a", "create collection kv (k text @unique, v int)")

	bad := cluster.NewClientFrom(t, r.URL(), "", stranger)
	for i := range 5 {
		wantError(t, bad.Query("a", "get kv"), 401, fmt.Sprintf("stranger's request %d without a token", i+1))
	}
	struck := time.Now()
	res := good.Query("a", "put kv {k: 'after', v: 1}")
	wantStatus(t, res, 200, "a well-behaved write through the router after a stranger's five bad tokens")

	// The stranger is slowed: refused 429 whatever token it now sends.
	held := cluster.NewClientFrom(t, r.URL(), dataToken, stranger)
	m := wantError(t, held.Query("a", "get kv"), 429, "the stranger, now with the right token")
	if !strings.Contains(fmt.Sprint(m["error"]), "bad tokens") {
		t.Fatalf("the stranger's refusal does not say why: %v", m)
	}

	stillLeased(t, r, "n1", struck)
	if got := placement(t, r.Client(), "a")["node"]; got != "n1" {
		t.Fatalf("tenant a moved to %v", got)
	}
	wantStatus(t, good.Query("a", "put kv {k: 'later', v: 2}"), 200, "a write a lease after the strangers")
	// Direct admin calls from the router's own address are never refused
	// for data-token strikes either.
	wantStatus(t, n1.Admin().Do("GET", "/_admin/lease", nil), 200, "the node's lease, asked with its admin token")
}

// The router does not forward a tenant's replication feed: it is served by
// nodes to their copies only. Unauthenticated asks for it are answered by
// the router itself, and leave the node's back-off untouched.
func TestReplicationFeedNotForwarded(t *testing.T) {
	r, n1, _ := guardedPair(t)
	r.Place("a", n1)
	good := cluster.NewClient(t, r.URL(), dataToken)
	good.MustQuery("a", "create collection kv (k text @unique, v int)")
	anyone := cluster.NewClient(t, r.URL(), "")
	for _, p := range []string{"/t/a/_replication", "/t/a/_replication?since=0", "/t/a/_replication/", "/t/a/%5Freplication"} {
		for range 3 {
			m := wantError(t, anyone.Do("GET", p, nil), 404, "GET "+p+" through the router")
			if !strings.Contains(fmt.Sprint(m["error"]), "replication feed") {
				t.Fatalf("GET %s: the refusal does not name the feed: %v", p, m)
			}
		}
	}
	struck := time.Now()
	wantStatus(t, good.Query("a", "put kv {k: 'after', v: 1}"), 200, "a write after twelve asks for the feed")
	stillLeased(t, r, "n1", struck)
}

// An operator's cross-tenant read of a node run with --http-token reads
// every tenant (it carries what a read needs: the router runs it through
// the node's admin read route), and leaves the node's back-off untouched;
// one whose query writes is refused 400 and changes nothing.
func TestCrossTenantReadOnTokenNode(t *testing.T) {
	r, n1, _ := guardedPair(t)
	good := cluster.NewClient(t, r.URL(), dataToken)
	names := []string{"t1", "t2", "t3", "t4", "t5", "t6"}
	for i, name := range names {
		r.Place(name, n1)
		good.MustQuery(name, "create collection kv (k text @unique, v int)")
		good.MustQuery(name, "put kv {k: $1, v: $2}", name, i)
	}
	read := func() {
		t.Helper()
		res := r.Client().Do("POST", "/_shard/query", map[string]any{
			"tenants": "*", "query": "get kv order v", "merge": map[string]any{"concat": true},
		})
		wantStatus(t, res, 200, "cross-tenant read")
		var ans struct {
			Rows    []map[string]any          `json:"rows"`
			Tenants map[string]map[string]any `json:"tenants"`
		}
		if err := json.Unmarshal(res.Body, &ans); err != nil {
			t.Fatalf("cross-tenant read: %v: %s", err, res.Body)
		}
		for _, name := range names {
			if e, ok := ans.Tenants[name]["error"]; ok || ans.Tenants[name]["seq"] == nil {
				t.Fatalf("tenant %s: %v (error %v)", name, ans.Tenants[name], e)
			}
		}
		if len(ans.Rows) != len(names) {
			t.Fatalf("rows: %v", ans.Rows)
		}
	}
	read()
	struck := time.Now()
	read()
	// A query that writes is refused whole before it runs anywhere.
	for _, q := range []string{"del kv", "set kv {v: 0}", "drop collection kv"} {
		res := r.Client().Do("POST", "/_shard/query", map[string]any{"tenants": "*", "query": q, "merge": map[string]any{"concat": true}})
		if m := wantError(t, res, 400, "cross-tenant "+q); !strings.Contains(fmt.Sprint(m["error"]), "reads only") {
			t.Fatalf("cross-tenant %s: %v", q, m)
		}
	}
	read()
	wantStatus(t, good.Query("t1", "put kv {k: 'after', v: 9}"), 200, "a write after the cross-tenant reads")
	stillLeased(t, r, "n1", struck)
}

// A stranger guessing the router's own token is held off after five
// misses: its address is answered 429 with Retry-After, whatever token it
// sends, while a client on another address with the right token is served
// as before. A client that presented the right token (a peer, an
// operator's machine) is never held off by guesses from its own address:
// its right token is still taken.
func TestBadRouterTokensHoldOffOnlyTheirClient(t *testing.T) {
	c := cluster.New(t)
	r := c.StartRouter("router", cluster.RouterOptions{})
	good := r.Client()
	wantStatus(t, good.Do("GET", "/_shard/nodes", nil), 200, "the operator, with the router token")

	const peerAddr = "127.0.0.3"
	peer := cluster.NewClientFrom(t, r.URL(), cluster.RouterToken, peerAddr)
	wantStatus(t, peer.Do("GET", "/_shard/nodes", nil), 200, "a peer, with the router token")

	for i, tok := range []string{"", "guess-1", "guess-2", "guess-3", "guess-4"} {
		guess := cluster.NewClientFrom(t, r.URL(), tok, stranger)
		wantError(t, guess.Do("GET", "/_shard/nodes", nil), 401, fmt.Sprintf("the stranger's try %d", i+1))
		wantStatus(t, good.Do("GET", "/_shard/nodes", nil), 200, "the operator, between the stranger's tries")
	}
	for _, tok := range []string{"guess-5", cluster.RouterToken} {
		held := cluster.NewClientFrom(t, r.URL(), tok, stranger)
		res := held.Do("GET", "/_shard/nodes", nil)
		m := wantError(t, res, 429, "the stranger after five misses, token "+tok)
		if s, err := strconv.Atoi(res.Header.Get("Retry-After")); err != nil || s < 1 || s > 60 {
			t.Fatalf("the stranger's 429 has Retry-After %q", res.Header.Get("Retry-After"))
		}
		if msg := fmt.Sprint(m["error"]); !strings.Contains(msg, "too many") || !strings.Contains(msg, "Retry-After") {
			t.Fatalf("the stranger's 429 does not say what to do: %v", m)
		}
	}
	met := good.Do("GET", "/_metrics", nil)
	wantStatus(t, met, 200, "the operator's metrics, the stranger held off")
	for _, want := range []string{`fenec_router_refused_tokens_total{answer="unauthorized"} 5`, `fenec_router_refused_tokens_total{answer="held_off"} 2`} {
		if !strings.Contains(string(met.Body), want+"\n") {
			t.Fatalf("the router's metrics lack %s", want)
		}
	}

	// Guesses from the peer's own address hold that address off, but not
	// the peer's right token.
	for i := range 6 {
		guess := cluster.NewClientFrom(t, r.URL(), "guess", peerAddr)
		if res := guess.Do("GET", "/_shard/nodes", nil); res.Status != 401 && res.Status != 429 {
			t.Fatalf("a guess %d from the peer's address: %s", i+1, res)
		}
	}
	wantError(t, cluster.NewClientFrom(t, r.URL(), "guess", peerAddr).Do("GET", "/_shard/nodes", nil), 429, "a guess from the peer's address, held off")
	wantStatus(t, peer.Do("GET", "/_shard/nodes", nil), 200, "the peer, after guesses from its address")
	wantStatus(t, peer.Do("GET", "/_shard/leases", nil), 200, "the peer's leases, after guesses from its address")
}
