package tests

import (
	"strings"
	"testing"
)

// TestNewcomer walks a newcomer's first minutes: a router and a node, the
// node recorded, a tenant placed, a collection made, rows put, got and
// searched, all through the router.
func TestNewcomer(t *testing.T) {
	r, n := oneNode(t)
	c := r.Client()

	nodes := c.Do("GET", "/_shard/nodes", nil)
	wantStatus(t, nodes, 200, "list nodes")
	if strings.Contains(string(nodes.Body), "e2e-admin-token") || !strings.Contains(string(nodes.Body), `"name":"n1"`) {
		t.Fatalf("nodes: %s", nodes.Body)
	}

	// Placed with no node named: the only node takes it.
	placed := c.Do("PUT", "/_shard/tenants/shop", map[string]any{})
	wantStatus(t, placed, 201, "place")
	if m := placed.JSON(t).(map[string]any); m["node"] != n.Name || m["tenant"] != "shop" {
		t.Fatalf("placed: %s", placed.Body)
	}

	c.MustQuery("shop", "create collection items (name text @text, price int @sorted)")
	put := c.MustQuery("shop", `put items [{name: "red wool socks", price: 9}, {name: "blue cotton socks", price: 7}, {name: "wool hat", price: 25}]`)
	if strings.TrimSpace(string(put.Body)) != `{"affected":3,"ids":[1,2,3]}` || put.Header.Get("Fenec-Seq") == "" {
		t.Fatalf("put: %s seq %q", put.Body, put.Header.Get("Fenec-Seq"))
	}
	if got := ids(t, c.MustQuery("shop", "get items where price < 10 order price")); got != "2,1" {
		t.Fatalf("get by price: %s", got)
	}
	if got := ids(t, c.MustQuery("shop", "get items select id match name 'wool' limit 10")); got != "1,3" && got != "3,1" {
		t.Fatalf("match wool: %s", got)
	}
	if got := c.MustQuery("shop", "get items count"); strings.TrimSpace(string(got.Body)) != `{"count":3}` {
		t.Fatalf("count: %s", got.Body)
	}

	// The tenant is on the node, and only there: the node answers the same.
	direct := NewDirect(t, n)
	if got := ids(t, direct.MustQuery("shop", "get items order id")); got != "1,2,3" {
		t.Fatalf("on the node: %s", got)
	}
	tenants := c.Do("GET", "/_shard/tenants", nil)
	if !strings.Contains(string(tenants.Body), `"name":"shop"`) || !strings.Contains(string(tenants.Body), `"node":"n1"`) {
		t.Fatalf("tenants: %s", tenants.Body)
	}
	wantError(t, c.Query("nobody", "get items"), 404, "unknown tenant")
}
