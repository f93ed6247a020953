package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fenec-go/fenec/tests/cluster"
	"github.com/fenec-go/fenec/wire"
)

// A client uses its own region's routers for everything: a tenant of eu
// with a read copy in us is served by us's routers, from the far records
// us's link copies into its directory. Through us's leading router (and
// its standby), with no --near: a write goes to the primary in eu, a read
// after it (Fenec-After) is answered by the copy in us, a read stating
// nothing by the primary; after the tenant fails over within eu (its
// node cut off), us's routers follow within seconds; a move or a delete of the tenant sent to
// them is refused 409 naming the global tier's leading router; after the
// read copy is dropped, they forget the tenant (404, as for any unknown
// tenant). The same once us leases its own nodes.
func TestRegionServesFarTenants(t *testing.T) {
	c := cluster.New(t)
	rs := c.StartRegions(cluster.RegionsOptions{Lease: regionLease, Regions: map[string]int{"eu": 2, "us": 2}})
	rs.AddNode("us", "us3") // no one's standby: it may hold a read copy
	rs.Connect("eu", "us")
	eu, us := rs.Region["eu"], rs.Region["us"]
	waitLeased(t, rs.Global, "eu1", "eu2", "us1", "us2", "us3")
	ids := map[string]string{}
	for _, r := range []*cluster.Region{eu, us} {
		for _, n := range r.Nodes {
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			id, err := n.AdminAPI().ID(ctx)
			cancel()
			if err != nil {
				t.Fatalf("id of %s: %v", n.Name, err)
			}
			ids[id] = n.Name
		}
	}
	g := rs.Global.Client()
	wantStatus(t, g.Do("PUT", "/_shard/tenants/t1", map[string]any{"node": "eu1"}), 201, "place t1 on eu1")
	g.MustQuery("t1", "create collection kv (k text @unique, v int)")
	g.MustQuery("t1", "insert kv {k: 'a', v: 1}")
	res := g.Do("PUT", "/_shard/tenants/t1/read-copies", map[string]any{"regions": []string{"us"}})
	wantStatus(t, res, 200, "a read copy of t1 in us")
	var ans struct {
		ReadCopies []string `json:"read_copies"`
	}
	if err := json.Unmarshal(res.Body, &ans); err != nil || len(ans.ReadCopies) != 1 || us.Node(ans.ReadCopies[0]) == nil {
		t.Fatalf("a read copy in us answered %s", res)
	}
	copyOn := ans.ReadCopies[0]
	served := func(res *cluster.Resp, by, node string) error {
		if res.Status != 200 {
			return fmt.Errorf("answered %s", res)
		}
		if got := res.Header.Get(wire.HeaderServedBy); got != by {
			return fmt.Errorf("served by %q, want %q (node %s)", got, by, ids[res.Header.Get(wire.HeaderNode)])
		}
		if got := ids[res.Header.Get(wire.HeaderNode)]; got != node {
			return fmt.Errorf("answered by %q, want %q", got, node)
		}
		return nil
	}

	for _, rt := range []*cluster.Router{us.Leader, us.Standby} {
		uc := rt.Client()
		// Listed as far, with its home.
		cluster.Eventually(t, wait, func() error {
			if row, ok := placementOf(t, uc, "t1"); !ok || row["far"] != true || row["home"] != "eu" || row["node"] != "eu1" {
				return fmt.Errorf("t1 as %s lists it: %v", rt.Name, row)
			}
			return nil
		})
		// A bounded read: the copy in us, once it holds the tenant.
		cluster.Eventually(t, wait, func() error {
			return served(uc.QueryH("t1", "get kv where k = 'a'", wire.HeaderMaxStaleness, "5000"), wire.ServedByCopy, copyOn)
		})
		// A write: the primary in eu; read after it from the copy.
		res = uc.QueryH("t1", "insert kv {k: '"+rt.Name+"', v: 2}")
		if err := served(res, "", "eu1"); err != nil {
			t.Fatalf("a write through %s: %v", rt.Name, err)
		}
		seq, history := res.Header.Get(wire.HeaderSeq), res.Header.Get(wire.HeaderHistory)
		res = uc.QueryH("t1", "get kv where k = '"+rt.Name+"'", wire.HeaderAfter, seq, wire.HeaderHistory, history)
		if err := served(res, wire.ServedByCopy, copyOn); err != nil {
			t.Fatalf("a read after the write through %s: %v", rt.Name, err)
		}
		if rows := res.Rows(t); len(rows) != 1 {
			t.Fatalf("the copy answered a read after the write without it: %s", res)
		}
		// A read stating nothing: the primary.
		if err := served(uc.QueryH("t1", "get kv where k = 'a'"), "", "eu1"); err != nil {
			t.Fatalf("an unbounded read through %s: %v", rt.Name, err)
		}
		// Changes of the tenant are the global tier's.
		for _, c := range []struct {
			method, path string
			body         any
		}{
			{"POST", "/_shard/tenants/t1/move", map[string]any{"to": "eu2"}},
			{"DELETE", "/_shard/tenants/t1", nil},
			{"PUT", "/_shard/tenants/t1/read-copies", map[string]any{"regions": []string{}}},
		} {
			res := uc.Do(c.method, c.path, c.body)
			if res.Status != 409 || !strings.Contains(string(res.Body), "global tier's leading router") ||
				!strings.Contains(string(res.Body), "homed in region eu") {
				t.Errorf("%s %s through %s: want 409 naming the global tier, got %s", c.method, c.path, rt.Name, res)
			}
		}
	}
	if row, ok := placementOf(t, g, "t1"); !ok || row["node"] != "eu1" || fmt.Sprint(row["read_copies"]) != "["+copyOn+"]" {
		t.Fatalf("t1 after the refused changes: %v", row)
	}

	// eu1 cut off: the global tier fails t1 over onto its copy on eu2, and
	// us's routers follow.
	eu.CutNode(eu.Node("eu1"))
	cluster.Eventually(t, wait, func() error {
		if row, _ := placementOf(t, g, "t1"); row["node"] != "eu2" {
			return fmt.Errorf("t1 at the global tier: %v", row)
		}
		return nil
	})
	moved := time.Now()
	for _, rt := range []*cluster.Router{us.Leader, us.Standby} {
		uc := rt.Client()
		cluster.Eventually(t, wait, func() error {
			return served(uc.QueryH("t1", "get kv where k = 'a'"), "", "eu2")
		})
		res := uc.QueryH("t1", "insert kv {k: 'moved-"+rt.Name+"', v: 3}")
		if err := served(res, "", "eu2"); err != nil {
			t.Fatalf("a write through %s after the failover: %v", rt.Name, err)
		}
	}
	followed := time.Since(moved)
	t.Logf("us's routers forwarded to eu2 %v after the global tier showed the failover", followed.Round(time.Millisecond))
	if followed > 10*time.Second {
		t.Fatalf("us's routers took %v to follow the failover", followed)
	}
	eu.HealNode(eu.Node("eu1"))

	// us leases its own nodes: its routers go on serving t1, its far
	// records still copied down, and still refuse its changes (where
	// they now take us's own).
	wantStatus(t, us.Leader.Client().Do("POST", "/_shard/regions/us/handoff", map[string]any{"to": "region"}), 200, "hand us's leasing to its router")
	for _, rt := range []*cluster.Router{us.Leader, us.Standby} {
		uc := rt.Client()
		if err := served(uc.QueryH("t1", "get kv where k = 'a'"), "", "eu2"); err != nil {
			t.Fatalf("an unbounded read through %s once us leases itself: %v", rt.Name, err)
		}
		res := uc.Do("POST", "/_shard/tenants/t1/move", map[string]any{"to": "us1"})
		if res.Status != 409 || !strings.Contains(string(res.Body), "global tier's leading router") {
			t.Errorf("a move of t1 through %s once us leases itself: %s", rt.Name, res)
		}
	}

	// The copy dropped: forgotten.
	wantStatus(t, g.Do("PUT", "/_shard/tenants/t1/read-copies", map[string]any{"regions": []string{}}), 200, "drop t1's read copy")
	for _, rt := range []*cluster.Router{us.Leader, us.Standby} {
		uc := rt.Client()
		cluster.Eventually(t, wait, func() error {
			res := uc.QueryH("t1", "get kv where k = 'a'")
			if res.Status != 404 || !strings.Contains(string(res.Body), "unknown tenant in this router's region") ||
				!strings.Contains(string(res.Body), "read-copies") {
				return fmt.Errorf("t1 through %s once its copy in us is dropped: %s", rt.Name, res)
			}
			if _, ok := placementOf(t, uc, "t1"); ok {
				return fmt.Errorf("%s still lists t1", rt.Name)
			}
			return nil
		})
	}
	// Still served where it lives.
	if res := g.QueryH("t1", "get kv where k = 'a'"); res.Status != 200 {
		t.Fatalf("t1 through the global tier: %s", res)
	}
}
