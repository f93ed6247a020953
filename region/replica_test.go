package region

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/fenec-go/fenec/internal/jsonerr"
	"github.com/fenec-go/fenec/internal/testkit"
	"github.com/fenec-go/fenec/internal/testkit/testnode"
	"github.com/fenec-go/fenec/node"
	"github.com/fenec-go/fenec/wire"
)

const cpReplToken = testnode.ReplicationToken

// replNode is a fenec-node under --sync always with a replication token,
// at one address across its restarts: the test stops it (it then answers
// nothing but 502) and starts it again on the same directory.
type replNode struct {
	*testnode.Node
}

func startReplNode(tb testing.TB) *replNode {
	tb.Helper()
	return &replNode{testnode.Start(tb, testnode.Options{Configure: func(c *node.Config) { c.Sync = "always" }})}
}

// up starts the node again on its directory (its copies resume
// following); down stops it: it answers nothing but 502 meanwhile.
func (n *replNode) up(tb testing.TB)   { tb.Helper(); n.Start() }
func (n *replNode) down(tb testing.TB) { tb.Helper(); n.Stop() }

func (n *replNode) call(tb testing.TB, method, path, body string) (int, []byte) {
	tb.Helper()
	var b []byte
	if body != "" {
		b = []byte(body)
	}
	st, _, got := cpDo(tb, method, n.URL()+path, cpAdminToken, b, nil)
	return st, got
}

// replication reads a tenant's role and position on the node.
func (n *replNode) replication(tb testing.TB, t string) wire.Replication {
	tb.Helper()
	var st wire.Replication
	code, b := n.call(tb, http.MethodGet, "/_admin/tenants/"+t+"/replication", "")
	if code == http.StatusOK {
		if err := json.Unmarshal(b, &st); err != nil {
			tb.Fatalf("replication of %s: %v", t, err)
		}
	}
	return st
}

func (r *cpRouter) addReplNode(tb testing.TB, name string, n *replNode, extra map[string]any) {
	tb.Helper()
	body := map[string]any{"addr": n.Addr(), "token": cpAdminToken, "region": "eu"}
	for k, v := range extra {
		body[k] = v
	}
	if st, b := r.shard(tb, http.MethodPut, "nodes/"+name, body, nil); st != http.StatusCreated {
		tb.Fatalf("put node %s: %d %s", name, st, b)
	}
}

// tenantsOf reads the router's placements by name.
func (r *cpRouter) tenantsOf(tb testing.TB) map[string]tenantEntry {
	tb.Helper()
	var list []tenantEntry
	if st, b := r.shard(tb, http.MethodGet, "tenants", nil, &list); st != http.StatusOK {
		tb.Fatalf("list tenants: %d %s", st, b)
	}
	out := map[string]tenantEntry{}
	for _, e := range list {
		out[e.Name] = e
	}
	return out
}

// countVia reads tenant t's count of c through the router.
func (r *cpRouter) countVia(tb testing.TB, t string) string {
	tb.Helper()
	_, _, b := r.data(tb, http.MethodGet, "/t/"+t+"/c?count", "", nil)
	return strings.TrimSpace(string(b))
}

// caughtUp waits until the copy on n holds what the primary p holds.
func caughtUp(tb testing.TB, t string, p, n *replNode) {
	tb.Helper()
	testkit.Eventually(tb, cpWait, func() error {
		want, got := p.replication(tb, t), n.replication(tb, t)
		if got.Role != "replica" || got.Seq != want.Seq || got.History != want.History {
			return fmt.Errorf("copy of %s at %+v, primary at %+v", t, got, want)
		}
		return nil
	})
}

// A standby takes a copy of each tenant placed on its node; the node
// lost, a failover by hand promotes the copies with every acknowledged
// write; the node back, its stale files follow the new primaries and
// refuse writes.
func TestStandbyFailoverAndRepairCP(t *testing.T) {
	r := startCPRouter(t, nil)
	a, b := startReplNode(t), startReplNode(t)
	r.addReplNode(t, "a", a, nil)
	r.addReplNode(t, "b", b, nil)
	r.place(t, "early", "a") // before the standby: copied when it is named
	var sb struct {
		Replicated []string `json:"replicated"`
	}
	if st, body := r.shard(t, http.MethodPut, "nodes/a", map[string]any{"standby": "b"}, &sb); st != http.StatusCreated ||
		!slices.Equal(sb.Replicated, []string{"early"}) {
		t.Fatalf("standby: %d %s", st, body)
	}
	r.place(t, "late", "a")
	for _, name := range []string{"early", "late"} {
		if e := r.tenantsOf(t)[name]; e.Node != "a" || e.Replica != "b" {
			t.Fatalf("%s placed %+v", name, e)
		}
	}
	// Nothing is ever placed on a standby.
	if st, body := r.shard(t, http.MethodPut, "tenants/free", map[string]any{}, nil); st != http.StatusCreated ||
		r.tenantsOf(t)["free"].Node != "a" {
		t.Fatalf("placement by the router: %d %s %+v", st, body, r.tenantsOf(t)["free"])
	}
	// Nor moved onto one: refused before anything begins, saying what to
	// do, the tenant left as it was.
	if st, body := r.shard(t, http.MethodPost, "tenants/late/move", map[string]any{"to": "b"}, nil); st != http.StatusConflict ||
		!strings.Contains(string(body), "standby") || !strings.Contains(string(body), "GET /_shard/nodes") {
		t.Fatalf("a move onto the standby: %d %s", st, body)
	}
	if e := r.tenantsOf(t)["late"]; e.Node != "a" || e.Replica != "b" || e.State != "active" || e.Target != "" {
		t.Fatalf("late after a move onto the standby was refused: %+v", e)
	}
	for _, name := range []string{"early", "late", "free"} {
		r.mustQuery(t, name, "create collection c (n int)")
	}
	for i := range 20 {
		r.mustQuery(t, "early", fmt.Sprintf(`put c {n: %d}`, i))
		r.mustQuery(t, "late", fmt.Sprintf(`put c {n: %d}`, i))
	}
	caughtUp(t, "early", a, b)
	caughtUp(t, "late", a, b)

	a.down(t)
	var res FailoverResult
	if st, body := r.shard(t, http.MethodPost, "nodes/a/failover", map[string]any{}, &res); st != http.StatusOK {
		t.Fatalf("failover: %d %s", st, body)
	}
	slices.Sort(res.Promoted)
	if !slices.Equal(res.Promoted, []string{"early", "free", "late"}) || len(res.Failed) != 0 {
		t.Fatalf("failover %+v", res)
	}
	for _, name := range []string{"early", "late"} {
		if got := r.countVia(t, name); got != `{"count":20}` {
			t.Fatalf("%s after failover: %s", name, got)
		}
		r.mustQuery(t, name, `put c {n: 100}`)
		if e := r.tenantsOf(t)[name]; e.Node != "b" || e.Replica != "" {
			t.Fatalf("%s after failover %+v", name, e)
		}
	}
	// A second call has nothing left to do.
	if st, body := r.shard(t, http.MethodPost, "nodes/a/failover", nil, &res); st != http.StatusOK || len(res.Promoted) != 0 {
		t.Fatalf("second failover: %d %s", st, body)
	}

	a.up(t)
	testkit.Eventually(t, cpWait, func() error {
		for _, name := range []string{"early", "late"} {
			if e := r.tenantsOf(t)[name]; e.Replica != "a" {
				return fmt.Errorf("%s not copied back onto a: %+v", name, e)
			}
		}
		return nil
	})
	caughtUp(t, "early", b, a)
	caughtUp(t, "late", b, a)
	st, body := a.call(t, http.MethodPost, "/t/early/query", `{"query": "put c {n: 7}"}`)
	if st != http.StatusServiceUnavailable {
		t.Fatalf("write on the old primary's copy: %d %s", st, body)
	}
}

// A copy that is not its tenant (a file made again in its place) is not
// promoted until an operator forces it.
func TestFailoverRefusesOtherLineageCP(t *testing.T) {
	r := startCPRouter(t, nil)
	a, b := startReplNode(t), startReplNode(t)
	r.addReplNode(t, "a", a, nil)
	r.addReplNode(t, "b", b, nil)
	r.addReplNode(t, "a", a, map[string]any{"standby": "b"})
	r.place(t, "t1", "a")
	r.mustQuery(t, "t1", "create collection c (n int)")
	r.mustQuery(t, "t1", `put c {n: 1}`)
	caughtUp(t, "t1", a, b)
	// The copy is replaced by hand with a file of its own.
	if st, body := b.call(t, http.MethodDelete, "/_admin/tenants/t1", ""); st != http.StatusNoContent {
		t.Fatalf("delete copy: %d %s", st, body)
	}
	if st, body := b.call(t, http.MethodPut, "/_admin/tenants/t1", ""); st != http.StatusCreated {
		t.Fatalf("create stranger: %d %s", st, body)
	}
	a.down(t)
	var res FailoverResult
	st, body := r.shard(t, http.MethodPost, "nodes/a/failover", nil, &res)
	if st != http.StatusBadGateway || len(res.Failed) != 1 || !strings.Contains(res.Failed[0].Why, "lineage") {
		t.Fatalf("failover of another lineage: %d %s", st, body)
	}
	if e := r.tenantsOf(t)["t1"]; e.Node != "a" || e.HeldBy != "" {
		t.Fatalf("refused failover left %+v", e)
	}
	st, body = r.shard(t, http.MethodPost, "nodes/a/failover", map[string]any{"force": true}, &res)
	if st != http.StatusOK || !slices.Equal(res.Promoted, []string{"t1"}) {
		t.Fatalf("forced failover: %d %s", st, body)
	}
	// Forced, the stranger's file is the tenant now, whatever it holds.
	r.mustQuery(t, "t1", "create collection c (n int)")
	r.mustQuery(t, "t1", `put c {n: 2}`)
}

// --replicas spreads one node's copies over the others, and POST
// /_shard/replicas gives a copy to a tenant that had none.
func TestReplicasSpreadCP(t *testing.T) {
	r := startCPRouter(t, func(c *Config) { c.Replicas = true })
	a, b, c := startReplNode(t), startReplNode(t), startReplNode(t)
	r.addReplNode(t, "a", a, nil)
	r.place(t, "lonely", "a") // no other node yet: no copy
	r.addReplNode(t, "b", b, nil)
	r.addReplNode(t, "c", c, nil)
	var rep struct {
		Replicated []string         `json:"replicated"`
		Failed     []replicaFailure `json:"failed"`
	}
	if st, body := r.shard(t, http.MethodPost, "replicas", nil, &rep); st != http.StatusOK || !slices.Equal(rep.Replicated, []string{"lonely"}) {
		t.Fatalf("replicas: %d %s", st, body)
	}
	for i := range 4 {
		r.place(t, fmt.Sprintf("t%d", i), "a")
	}
	on := map[string]int{}
	for name, e := range r.tenantsOf(t) {
		if e.Replica == "" || e.Replica == e.Node {
			t.Fatalf("%s: %+v", name, e)
		}
		on[e.Replica]++
	}
	if on["b"] < 2 || on["c"] < 2 {
		t.Fatalf("copies of a's tenants spread %v", on)
	}
	// Named a's standby, c takes every copy; b's are deleted.
	if st, body := r.shard(t, http.MethodPut, "nodes/a", map[string]any{"standby": "c"}, nil); st != http.StatusCreated {
		t.Fatalf("standby: %d %s", st, body)
	}
	for name, e := range r.tenantsOf(t) {
		if e.Replica != "c" {
			t.Fatalf("%s after naming the standby: %+v", name, e)
		}
		if st, _ := b.call(t, http.MethodGet, "/_admin/tenants/"+name+"/replication", ""); st != http.StatusNotFound {
			t.Fatalf("%s's former copy on b: %d", name, st)
		}
	}
}

// Copies go along with moves and deletes: after a move the copy follows
// the new node (a copy on the node moved to is made again elsewhere), a
// move onto a standby is refused, and a delete removes the copy too.
func TestCopiesFollowMovesAndDeletesCP(t *testing.T) {
	r := startCPRouter(t, func(c *Config) { c.Replicas = true })
	nodes := map[string]*replNode{"a": startReplNode(t), "b": startReplNode(t), "c": startReplNode(t), "s": startReplNode(t)}
	for _, name := range []string{"a", "b", "c", "s"} {
		r.addReplNode(t, name, nodes[name], nil)
	}
	r.addReplNode(t, "c", nodes["c"], map[string]any{"standby": "s"})
	r.place(t, "m", "a")
	r.mustQuery(t, "m", "create collection c (n int)")
	r.mustQuery(t, "m", `put c {n: 1}`)
	first := r.tenantsOf(t)["m"].Replica
	if first != "b" && first != "c" {
		t.Fatalf("copy of m on %q", first)
	}
	caughtUp(t, "m", nodes["a"], nodes[first])
	if st, body := r.shard(t, http.MethodPost, "tenants/m/move", map[string]any{"to": "s"}, nil); st != http.StatusConflict {
		t.Fatalf("move onto a standby: %d %s", st, body)
	}
	// Moved onto its copy's node: the copy is made again on another node.
	if st, body := r.shard(t, http.MethodPost, "tenants/m/move", map[string]any{"to": first}, nil); st != http.StatusOK {
		t.Fatalf("move onto the copy's node: %d %s", st, body)
	}
	e := r.tenantsOf(t)["m"]
	if e.Node != first || e.Replica == "" || e.Replica == first {
		t.Fatalf("after the move %+v", e)
	}
	r.mustQuery(t, "m", `put c {n: 2}`)
	caughtUp(t, "m", nodes[first], nodes[e.Replica])
	// Moved elsewhere: the copy follows the new node.
	to := map[string]string{"a": "b", "b": "a", "c": "a"}[e.Replica]
	if to == first {
		to = "c"
	}
	if st, body := r.shard(t, http.MethodPost, "tenants/m/move", map[string]any{"to": to}, nil); st != http.StatusOK {
		t.Fatalf("move to %s: %d %s", to, st, body)
	}
	r.mustQuery(t, "m", `put c {n: 3}`)
	e2 := r.tenantsOf(t)["m"]
	if e2.Node != to || e2.Replica == "" {
		t.Fatalf("after the second move %+v", e2)
	}
	caughtUp(t, "m", nodes[to], nodes[e2.Replica])
	if st, body := r.shard(t, http.MethodDelete, "tenants/m", nil, nil); st != http.StatusNoContent {
		t.Fatalf("delete: %d %s", st, body)
	}
	if st, body := nodes[e2.Replica].call(t, http.MethodGet, "/_admin/tenants/m/replication", ""); st != http.StatusNotFound {
		t.Fatalf("copy after the delete: %d %s", st, body)
	}
}

// A tenant held by another operation when its node is failed over is
// failed over once that operation ends, onto the copy it had then.
func TestHeldTenantFailedOverWhenReleasedCP(t *testing.T) {
	r := startCPRouter(t, nil)
	a, b := startReplNode(t), startReplNode(t)
	r.addReplNode(t, "a", a, nil)
	r.addReplNode(t, "b", b, nil)
	r.addReplNode(t, "a", a, map[string]any{"standby": "b"})
	r.place(t, "h", "a")
	r.mustQuery(t, "h", "create collection c (n int)")
	r.mustQuery(t, "h", `put c {n: 1}`)
	caughtUp(t, "h", a, b)
	s := r.rt.store
	at, err := s.GetTenant(cpCtx(t), "h")
	if err != nil {
		t.Fatal(err)
	}
	held, err := s.Hold(cpCtx(t), "h", at, "quota")
	if err != nil {
		t.Fatal(err)
	}
	a.down(t)
	var res FailoverResult
	st, body := r.shard(t, http.MethodPost, "nodes/a/failover", nil, &res)
	if st != http.StatusBadGateway || len(res.Failed) != 1 || !strings.Contains(res.Failed[0].Why, "held by quota") {
		t.Fatalf("failover of a held tenant: %d %s", st, body)
	}
	if e := r.tenantsOf(t)["h"]; e.Node != "a" {
		t.Fatalf("held tenant moved at once: %+v", e)
	}
	if _, err := s.Release(cpCtx(t), "h", held, "quota"); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, cpWait, func() error {
		if e := r.tenantsOf(t)["h"]; e.Node != "b" {
			return fmt.Errorf("after the release %+v", e)
		}
		return nil
	})
	r.mustQuery(t, "h", `put c {n: 2}`)
}

// POST /_shard/replicas gives every tenant without a copy one, but none
// to a tenant whose primary does not answer (502, named), until it does.
func TestReplicasOnRequestCP(t *testing.T) {
	r := startCPRouter(t, nil)
	a, b := startReplNode(t), startReplNode(t)
	r.addReplNode(t, "a", a, nil)
	r.addReplNode(t, "b", b, nil)
	r.place(t, "t1", "a")
	r.place(t, "t2", "b")
	if e := r.tenantsOf(t)["t1"]; e.Replica != "" {
		t.Fatalf("a copy without --replicas or a standby: %+v", e)
	}
	b.down(t)
	var rep struct {
		Replicated []string         `json:"replicated"`
		Failed     []replicaFailure `json:"failed"`
	}
	st, body := r.shard(t, http.MethodPost, "replicas", nil, &rep)
	if st != http.StatusBadGateway || !slices.Equal(rep.Replicated, []string{}) || len(rep.Failed) != 2 {
		// t1's copy would go on b, which is down; t2's primary is b.
		t.Fatalf("replicas with b down: %d %s", st, body)
	}
	b.up(t)
	st, body = r.shard(t, http.MethodPost, "replicas", nil, &rep)
	if st != http.StatusOK || !slices.Equal(rep.Replicated, []string{"t1", "t2"}) {
		t.Fatalf("replicas: %d %s", st, body)
	}
	tn := r.tenantsOf(t)
	if tn["t1"].Replica != "b" || tn["t2"].Replica != "a" {
		t.Fatalf("copies %+v", tn)
	}
	r.mustQuery(t, "t2", "create collection c (n int)")
	caughtUp(t, "t2", b, a)
}

// TestReplicaAnswersJSON: the answers to naming a standby and to POST
// /_shard/replicas are written with these fields, in this order, empty
// lists as [] (clients and docs/ read them so).
func TestReplicaAnswersJSON(t *testing.T) {
	failed := []replicaFailure{{Tenant: "t2", Why: "node n2: <down> & out"}}
	for _, tc := range []struct {
		v    any
		want string
	}{
		{standbyAnswer{Node: "n1", Standby: "n2", Replicated: []string{"t1"}, Unreplicated: []string{"t2"}, Failed: failed},
			`{"failed":[{"tenant":"t2","why":"node n2: <down> & out"}],"node":"n1","replicated":["t1"],"standby":"n2","unreplicated":["t2"]}`},
		{standbyAnswer{Node: "n1", Standby: "n2", Replicated: []string{}, Unreplicated: []string{}, Failed: []replicaFailure{}},
			`{"failed":[],"node":"n1","replicated":[],"standby":"n2","unreplicated":[]}`},
		{replicasAnswer{Replicated: []string{"t1"}, Failed: failed},
			`{"failed":[{"tenant":"t2","why":"node n2: <down> & out"}],"replicated":["t1"]}`},
		{replicasAnswer{Replicated: []string{}, Failed: []replicaFailure{}}, `{"failed":[],"replicated":[]}`},
	} {
		got, err := jsonerr.Marshal(tc.v)
		if err != nil || string(got) != tc.want {
			t.Errorf("%T answered as %s (%v), want %s", tc.v, got, err, tc.want)
		}
	}
}
