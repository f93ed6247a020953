package tests

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fenec-go/fenec/tests/cluster"
)

// TestDeadNodeAnswered502 kills a node and checks the router answers its
// tenant's requests 502 with an error body at once, long before its
// upstream timeout (60 s): the client's own deadline is half that, so an
// answer that waited for the timeout could not arrive in time.
func TestDeadNodeAnswered502(t *testing.T) {
	r, n := oneNode(t, "--upstream-timeout", "60")
	c := r.Client()
	r.Place("a", n)
	c.MustQuery("a", "create collection c (n int)")
	c.MustQuery("a", "put c {n: 1}")

	n.Kill()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	read := c.DoCtx(ctx, "POST", "/t/a/query", map[string]any{"query": "get c"})
	if read.Err != nil {
		t.Fatalf("read to a dead node: no answer before the client gave up: %v", read.Err)
	}
	wantError(t, read, 502, "read to a dead node")
	write := c.DoCtx(ctx, "POST", "/t/a/c", `{"n": 2}`)
	if write.Err != nil {
		t.Fatalf("write to a dead node: no answer before the client gave up: %v", write.Err)
	}
	wantError(t, write, 502, "write to a dead node")
	rest := c.DoCtx(ctx, "GET", "/t/a/c", nil)
	if rest.Err != nil {
		t.Fatalf("GET to a dead node: %v", rest.Err)
	}
	wantError(t, rest, 502, "GET to a dead node")

	// Back on its port and file: the same tenant answers again, the row
	// written before the kill still there.
	n.Restart()
	got := c.Query("a", "get c select n")
	wantStatus(t, got, 200, "read after restart")
	if strings.TrimSpace(string(got.Body)) != `[{"n":1}]` {
		t.Fatalf("after restart: %s", got.Body)
	}
}

// TestRouterRestartKeepsPlacements stops the router cleanly, starts it on
// its directory again, and finds every placement and every row.
func TestRouterRestartKeepsPlacements(t *testing.T) {
	r, n1 := oneNode(t)
	c := r.Client()
	n2 := startSecondNode(t, r)
	tenants := map[string]string{"t1": n1.Name, "t2": n2.Name, "t3": n2.Name}
	for name, node := range tenants {
		wantStatus(t, c.Do("PUT", "/_shard/tenants/"+name, map[string]any{"node": node}), 201, "place "+name)
		c.MustQuery(name, "create collection c (who text)")
		c.MustQuery(name, "put c {who: $1}", name)
	}
	before := c.Do("GET", "/_shard/tenants", nil)
	wantStatus(t, before, 200, "tenants")

	r.Stop()
	r.Restart()
	c = r.Client()

	after := c.Do("GET", "/_shard/tenants", nil)
	wantStatus(t, after, 200, "tenants after restart")
	if string(after.Body) != string(before.Body) {
		t.Fatalf("placements changed across a restart:\nbefore %s\nafter  %s", before.Body, after.Body)
	}
	names := []string{}
	for _, row := range after.Rows(t) {
		names = append(names, row["name"].(string))
		if row["node"] != tenants[row["name"].(string)] {
			t.Fatalf("tenant %v on %v", row["name"], row["node"])
		}
	}
	if slices.Sort(names); strings.Join(names, ",") != "t1,t2,t3" {
		t.Fatalf("tenants after restart: %v", names)
	}
	for name := range tenants {
		got := c.Query(name, "get c select who")
		wantStatus(t, got, 200, "read "+name+" after restart")
		if strings.TrimSpace(string(got.Body)) != `[{"who":"`+name+`"}]` {
			t.Fatalf("%s after restart: %s", name, got.Body)
		}
	}
	nodes := c.Do("GET", "/_shard/nodes", nil)
	if !strings.Contains(string(nodes.Body), `"n1"`) || !strings.Contains(string(nodes.Body), `"n2"`) {
		t.Fatalf("nodes after restart: %s", nodes.Body)
	}
}

// TestCutNodeBoundedByUpstreamTimeout cuts a node off the network (nothing
// closed, nothing answered): the router answers its tenant's requests 502
// once --upstream-timeout (1 s here) has passed, instead of holding them,
// and forwards again once the cut heals.
func TestCutNodeBoundedByUpstreamTimeout(t *testing.T) {
	r, n := oneNode(t, "--upstream-timeout", "1")
	c := r.Client()
	r.Place("a", n)
	c.MustQuery("a", "create collection c (n int)")

	n.Cut()
	wantError(t, c.Query("a", "get c"), 502, "read to a cut node")
	w := c.Do("POST", "/t/a/c", `{"n": 1}`)
	m := wantError(t, w, 502, "write to a cut node")
	if m["outcome"] != "unknown" {
		t.Fatalf("write to a cut node: outcome %v", m["outcome"])
	}
	n.Heal()
	cluster.Eventually(t, wait, func() error {
		if r := c.Query("a", "get c count"); r.Status != 200 {
			return fmt.Errorf("after the heal: %s", r)
		}
		return nil
	})
}

// TestStandbyRouterForwards starts a second router on the first one's
// directory, as a standby: it forwards every tenant from the same
// placements, answers /_shard/ reads, and refuses changes (409) naming
// the router that leads.
func TestStandbyRouterForwards(t *testing.T) {
	c := cluster.New(t)
	r1 := c.StartRouter("r1", cluster.RouterOptions{})
	n := c.StartNode("n1", cluster.NodeOptions{})
	r1.Register(n)
	r1.Place("a", n)
	r1.Client().MustQuery("a", "create collection c (n int)")

	r2 := c.StartRouter("r2", cluster.RouterOptions{Directory: r1.EtcdURL(), Args: []string{"--standby"}})
	c2 := r2.Client()
	cluster.Eventually(t, wait, func() error {
		if r := c2.Query("a", "put c {n: 7}"); r.Status != 200 {
			return fmt.Errorf("write through the standby: %s", r)
		}
		return nil
	})
	if got := r1.Client().MustQuery("a", "get c select n"); strings.TrimSpace(string(got.Body)) != `[{"n":7}]` {
		t.Fatalf("the standby's write, read through the leader: %s", got.Body)
	}
	if got := c2.Do("GET", "/_shard/tenants", nil); got.Status != 200 || !strings.Contains(string(got.Body), `"name":"a"`) {
		t.Fatalf("tenants on the standby: %s", got)
	}
	refused := wantError(t, c2.Do("PUT", "/_shard/tenants/b", map[string]any{"node": "n1"}), 409, "a change on the standby")
	if !strings.Contains(fmt.Sprint(refused), "r1") {
		t.Fatalf("the standby's refusal does not name the leader: %v", refused)
	}
	// A tenant the leader places later is forwarded by the standby too.
	r1.Place("b", n)
	cluster.Eventually(t, wait, func() error {
		if r := c2.Query("b", "create collection c (n int)"); r.Status != 200 {
			return fmt.Errorf("b through the standby: %s", r)
		}
		return nil
	})
}
