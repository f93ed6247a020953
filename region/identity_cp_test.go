package region

import (
	"net/http"
	"strings"
	"testing"

	"github.com/fenec-go/fenec/global"
)

// legacyNode writes node name's record as a router from before ids did:
// no id in it, the address as given.
func legacyNode(tb testing.TB, r *cpRouter, name, addr string) {
	tb.Helper()
	s, err := r.rt.lead.Changes(cpCtx(tb))
	if err != nil {
		tb.Fatal(err)
	}
	rev, err := s.Txn().PutNode(name, 0, global.Node{Addr: addr, Token: cpAdminToken, Region: "eu"}).Commit(cpCtx(tb))
	if err != nil {
		tb.Fatalf("record %s: %v", name, err)
	}
	r.rt.settleTo(cpCtx(tb), rev)
}

// TestLegacyRecordsLearnIDsCP: two records written before ids name one
// node by two spellings of its address. Nothing a router does with them
// deletes the tenant: a repair and a move onto the second name ask both
// who they are and refuse, the records learn the node's id on that first
// contact, and a third name for the node is refused once asked.
func TestLegacyRecordsLearnIDsCP(t *testing.T) {
	r := startCPRouter(t, func(c *Config) { c.Region = "eu" })
	n := startCPNode(t)
	legacyNode(t, r, "n1", n.Addr())
	legacyNode(t, r, "n2", "http://"+n.Addr()+"/")
	r.place(t, "t", "n1")
	r.mustQuery(t, "t", "create collection c (v int)")
	r.mustQuery(t, "t", "put c [{v: 1}, {v: 2}]")
	count := func() string {
		t.Helper()
		_, _, b := r.query(t, "t", "get c count")
		return strings.TrimSpace(string(b))
	}

	st, b := r.shard(t, http.MethodPost, "replicas", nil, nil)
	if st != http.StatusBadGateway || !strings.Contains(string(b), "one node") {
		t.Fatalf("replicas onto the primary by another name: %d %s", st, b)
	}
	if got := count(); got != `{"count":2}` {
		t.Fatalf("t after the repair: %s", got)
	}
	st, b = r.shard(t, http.MethodPost, "tenants/t/move", map[string]any{"to": "n2"}, nil)
	if st != http.StatusConflict || !strings.Contains(string(b), "one node") {
		t.Fatalf("move onto the source by another name: %d %s", st, b)
	}
	if got := count(); got != `{"count":2}` {
		t.Fatalf("t after the move: %s", got)
	}
	var nodes []nodeEntry
	r.shard(t, http.MethodGet, "nodes", nil, &nodes)
	if len(nodes) != 2 || nodes[0].ID != n.Server().ID() || nodes[1].ID != n.Server().ID() {
		t.Fatalf("ids not learned on first contact: %+v (the node is %s)", nodes, n.Server().ID())
	}

	// A third name: refused, naming a record that has the node.
	st, b = r.shard(t, http.MethodPut, "nodes/n3", map[string]any{"addr": "localhost" + n.Addr()[strings.LastIndex(n.Addr(), ":"):], "token": cpAdminToken}, nil)
	if st != http.StatusConflict || !strings.Contains(string(b), "recorded as n") {
		t.Fatalf("a third name: %d %s", st, b)
	}
	// Forgetting the second name leaves the first one working.
	if st, b := r.shard(t, http.MethodDelete, "nodes/n2", nil, nil); st != http.StatusNoContent {
		t.Fatalf("forget n2: %d %s", st, b)
	}
	r.mustQuery(t, "t", "put c {v: 3}")
	if got := count(); got != `{"count":3}` {
		t.Fatalf("t at the end: %s", got)
	}
}

// TestLegacyRecordAskedAtPutCP: a record from before ids is asked its id
// when another name is recorded, so the same node is refused under a new
// name even though no id was ever written down.
func TestLegacyRecordAskedAtPutCP(t *testing.T) {
	r := startCPRouter(t, func(c *Config) { c.Region = "eu" })
	n, other := startCPNode(t), startCPNode(t)
	legacyNode(t, r, "n1", n.Addr())
	st, b := r.shard(t, http.MethodPut, "nodes/n2", map[string]any{"addr": "HTTP://" + n.Addr(), "token": cpAdminToken}, nil)
	if st != http.StatusConflict || !strings.Contains(string(b), "recorded as n1") {
		t.Fatalf("n1 by another name: %d %s", st, b)
	}
	r.addNode(t, "n2", other)
	var nodes []nodeEntry
	r.shard(t, http.MethodGet, "nodes", nil, &nodes)
	if len(nodes) != 2 || nodes[0].ID != n.Server().ID() || nodes[1].ID != other.Server().ID() || nodes[0].ID == nodes[1].ID {
		t.Fatalf("nodes %+v", nodes)
	}
}

// TestPlacementKeepsItsRegionCP: a placement naming a node of another
// region than the one it asks for is refused, and nothing is created.
func TestPlacementKeepsItsRegionCP(t *testing.T) {
	r := startCPRouter(t, nil)
	eu, us := startCPNode(t), startCPNode(t)
	for name, n := range map[string]*cpNode{"eu1": eu, "us1": us} {
		if st, b := r.shard(t, http.MethodPut, "nodes/"+name, map[string]any{"addr": n.Addr(), "token": cpAdminToken, "region": name[:2]}, nil); st != http.StatusCreated {
			t.Fatalf("put %s: %d %s", name, st, b)
		}
	}
	st, b := r.shard(t, http.MethodPut, "tenants/x", map[string]any{"node": "us1", "region": "eu"}, nil)
	if st != http.StatusBadRequest || !strings.Contains(string(b), "us1") || !strings.Contains(string(b), "region us") {
		t.Fatalf("a node of us for a tenant asked in eu: %d %s", st, b)
	}
	if st, _ := us.admin(t, http.MethodGet, "/_admin/tenants/x/replication", nil); st != http.StatusNotFound {
		t.Fatalf("the refused placement made a file on us1: %d", st)
	}
	if _, b := r.shard(t, http.MethodGet, "tenants", nil, nil); strings.Contains(string(b), `"x"`) {
		t.Fatalf("the refused placement is recorded: %s", b)
	}
	if got := r.place(t, "x", "eu1"); got != "eu1" {
		t.Fatalf("placed on %s", got)
	}
	var ans map[string]string
	if st, b := r.shard(t, http.MethodPut, "tenants/y", map[string]any{"node": "us1", "region": "us"}, &ans); st != http.StatusCreated || ans["node"] != "us1" {
		t.Fatalf("a node of the region asked: %d %s", st, b)
	}
}
