package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fenec-go/fenec/tests/cluster"
	"github.com/fenec-go/fenec/wire"
)

// farDelay is the delay of every byte to and from the tenant's home node
// in the tests below, each way: a reader in us is a round trip of tens of
// milliseconds from eu, as across an ocean.
const farDelay = 40 * time.Millisecond

// readCopies is a deployment of two regions leased by the global tier:
// eu1 and eu2 in eu, us1 in us, a leading router g, and a router near
// us's readers (--near us) on g's directory.
type readCopies struct {
	c             *cluster.Cluster
	g, near       *cluster.Router
	eu1, eu2, us1 *cluster.Node
	admin, reader *cluster.Client   // g's /_shard/, and the data path through near
	ids           map[string]string // each node's name by its id (Fenec-Node)
}

func startReadCopies(t *testing.T) *readCopies {
	c := cluster.New(t)
	d := &readCopies{c: c}
	d.g = c.StartRouter("g", cluster.RouterOptions{Args: []string{"--auto-failover", "2"}})
	args := []string{"--lease", "--sync", "always", "--replication-token", replToken, "--http-token", dataToken}
	d.eu1 = c.StartNode("eu1", cluster.NodeOptions{Args: args})
	d.eu2 = c.StartNode("eu2", cluster.NodeOptions{Args: args})
	d.us1 = c.StartNode("us1", cluster.NodeOptions{Args: args})
	d.admin = d.g.Client()
	d.ids = map[string]string{}
	for _, n := range []*cluster.Node{d.eu1, d.eu2, d.us1} {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		id, err := n.AdminAPI().ID(ctx)
		cancel()
		if err != nil {
			t.Fatalf("id of %s: %v", n.Name, err)
		}
		d.ids[id] = n.Name
	}
	for n, region := range map[*cluster.Node]string{d.eu1: "eu", d.eu2: "eu", d.us1: "us"} {
		wantStatus(t, d.admin.Do("PUT", "/_shard/nodes/"+n.Name, map[string]any{
			"addr": n.URL(), "token": cluster.AdminToken, "region": region}), 201, "register "+n.Name)
	}
	waitLeased(t, d.g, "eu1", "eu2", "us1")
	d.near = c.StartRouter("near", cluster.RouterOptions{Directory: d.g.EtcdURL(),
		Args: []string{"--standby", "--near", "us", "--copy-wait", "400"}})
	d.reader = cluster.NewClient(t, d.near.URL(), dataToken)
	return d
}

// TestReadCopyAnswersNearTheReader: a tenant of eu with a read copy in
// us: a read through the router near us that states a bound is answered
// by the copy (Fenec-Served-By: copy, Fenec-Node us1) with a staleness it
// states and keeps to; one that states nothing, a write, and a read the
// copy cannot prove (a bound of 0) go to the primary in eu; a client's
// own write is read back from the copy with Fenec-After; a copy cut off
// is passed over; after a move of the primary the copy follows the new
// one; dropped, its file goes.
func TestReadCopyAnswersNearTheReader(t *testing.T) {
	d := startReadCopies(t)
	d.g.Place("t1", d.eu1)
	writer := cluster.NewClient(t, d.g.URL(), dataToken)
	writer.MustQuery("t1", "create collection kv (k text @unique, v int)")
	writer.MustQuery("t1", "insert kv {k: 'a', v: 1}")

	res := d.admin.Do("PUT", "/_shard/tenants/t1/read-copies", map[string]any{"nodes": []string{"us1"}})
	wantStatus(t, res, 200, "a read copy of t1 on us1")
	var ans struct {
		ReadCopies []string `json:"read_copies"`
		Added      []string `json:"added"`
	}
	if err := json.Unmarshal(res.Body, &ans); err != nil || len(ans.ReadCopies) != 1 || ans.ReadCopies[0] != "us1" || len(ans.Added) != 1 {
		t.Fatalf("read copies answered %s", res)
	}
	d.eu1.SetDelay(farDelay)

	// A bounded read near us: the copy answers once it can prove the bound.
	cluster.Eventually(t, wait, func() error {
		res := d.reader.QueryH("t1", "get kv where k = 'a'", wire.HeaderMaxStaleness, "5000")
		return d.servedBy(res, wire.ServedByCopy, "us1", 5000)
	})
	// A read stating nothing, and a write, go to the primary.
	res = d.reader.QueryH("t1", "get kv where k = 'a'")
	wantStatus(t, res, 200, "an unbounded read")
	if got := d.ids[res.Header.Get(wire.HeaderNode)]; got != "eu1" || res.Header.Get(wire.HeaderServedBy) != "" {
		t.Fatalf("a read stating no bound answered by %q (served by %q)", got, res.Header.Get(wire.HeaderServedBy))
	}
	res = d.reader.QueryH("t1", "insert kv {k: 'b', v: 2}", wire.HeaderMaxStaleness, "5000")
	wantStatus(t, res, 200, "a write stating a bound")
	if err := d.servedBy(res, wire.ServedByPrimary, "eu1", -1); err != nil {
		t.Fatalf("a write: %v", err)
	}
	seq, history := res.Header.Get(wire.HeaderSeq), res.Header.Get(wire.HeaderHistory)
	if seq == "" || history == "" {
		t.Fatalf("a write's answer names no seq or history: %v", res.Header)
	}
	// Read your write near us: the copy waits for the seq.
	res = d.reader.QueryH("t1", "get kv where k = 'b'", wire.HeaderAfter, seq, wire.HeaderHistory, history)
	if err := d.servedBy(res, wire.ServedByCopy, "us1", -1); err != nil {
		t.Fatalf("a read after the client's own write: %v", err)
	}
	if rows := res.Rows(t); len(rows) != 1 {
		t.Fatalf("the copy answered a read after the write without it: %s", res)
	}
	// No copy proves a bound of 0: the primary answers it.
	res = d.reader.QueryH("t1", "get kv where k = 'a'", wire.HeaderMaxStaleness, "0")
	if err := d.servedBy(res, wire.ServedByPrimary, "eu1", 0); err != nil {
		t.Fatalf("a read asking a bound of 0: %v", err)
	}
	// A client's own Fenec-Copy-Wait is the router's to send: dropped.
	res = d.reader.QueryH("t1", "get kv where k = 'a'", wire.HeaderMaxStaleness, "5000", wire.HeaderCopyWait, "30000")
	if err := d.servedBy(res, wire.ServedByCopy, "us1", 5000); err != nil {
		t.Fatalf("a read with the client's own Fenec-Copy-Wait: %v", err)
	}
	// Bad bounds are the client's: 400 from whichever node, never a hang.
	for _, v := range []string{"-1", "soon", "99999999999"} {
		res = d.reader.QueryH("t1", "get kv", wire.HeaderMaxStaleness, v)
		if res.Status != 400 {
			t.Fatalf("Fenec-Max-Staleness %q answered %s", v, res)
		}
	}

	// The copy cut off: passed over for the primary.
	d.us1.Cut()
	res = d.reader.QueryH("t1", "get kv where k = 'a'", wire.HeaderMaxStaleness, "5000")
	if err := d.servedBy(res, wire.ServedByPrimary, "eu1", -1); err != nil {
		t.Fatalf("a read while the copy is cut off: %v", err)
	}
	d.us1.Heal()

	// The primary moved: the repair has the copy follow eu2, and a write
	// after the move is read from the copy.
	wantStatus(t, d.admin.Do("POST", "/_shard/tenants/t1/move", map[string]any{"to": "eu2"}), 200, "move t1 to eu2")
	res = writer.MustQuery("t1", "insert kv {k: 'c', v: 3}")
	seq, history = res.Header.Get(wire.HeaderSeq), res.Header.Get(wire.HeaderHistory)
	cluster.Eventually(t, wait, func() error {
		res := d.reader.QueryH("t1", "get kv where k = 'c'", wire.HeaderAfter, seq, wire.HeaderHistory, history,
			wire.HeaderMaxStaleness, "5000")
		if err := d.servedBy(res, wire.ServedByCopy, "us1", 5000); err != nil {
			return err
		}
		if len(res.Rows(t)) != 1 {
			return fmt.Errorf("the copy answered without the write after the move: %s", res)
		}
		return nil
	})
	res = d.near.Client().Do("GET", "/_shard/tenants", nil)
	wantStatus(t, res, 200, "list tenants")
	if !strings.Contains(string(res.Body), `"node":"eu2"`) || !strings.Contains(string(res.Body), `"read_copies":["us1"]`) {
		t.Fatalf("the placements after the move: %s", res)
	}

	// Refused changes while it holds the copy.
	wantStatus(t, d.admin.Do("POST", "/_shard/tenants/t1/move", map[string]any{"to": "us1"}), 409, "a move onto the read copy's node")
	wantStatus(t, d.admin.Do("DELETE", "/_shard/nodes/us1", nil), 409, "forget the read copy's node")

	// Dropped: the record forgets it, then its file goes.
	res = d.admin.Do("PUT", "/_shard/tenants/t1/read-copies", map[string]any{"nodes": []string{}})
	wantStatus(t, res, 200, "drop t1's read copies")
	if !strings.Contains(string(res.Body), `"dropped":["us1"]`) {
		t.Fatalf("drop answered %s", res)
	}
	res = d.reader.QueryH("t1", "get kv where k = 'a'", wire.HeaderMaxStaleness, "5000")
	if err := d.servedBy(res, wire.ServedByPrimary, "eu2", -1); err != nil {
		t.Fatalf("a bounded read once the copy is dropped: %v", err)
	}
	if res := d.us1.Admin().Do("GET", "/_admin/tenants/t1/replication", nil); res.Status != 404 {
		t.Fatalf("the dropped copy's file is still on us1: %s", res)
	}
}

// TestReadCopiesHostile: the read-copies route refuses what it cannot do,
// each refusal saying what to do instead.
func TestReadCopiesHostile(t *testing.T) {
	d := startReadCopies(t)
	d.g.Place("t1", d.eu1)
	path := "/_shard/tenants/t1/read-copies"
	wantRefusals(t, path, []refusal{
		{"no token", cluster.NewClient(t, d.g.URL(), ""), "PUT", map[string]any{"nodes": []string{"us1"}}, 401, "token"},
		{"a wrong token", cluster.NewClient(t, d.g.URL(), "wrong"), "PUT", map[string]any{"nodes": []string{"us1"}}, 401, "token"},
		{"a GET", d.admin, "GET", nil, 405, ""},
		{"no body", d.admin, "PUT", nil, 400, `drops them all`},
		{"an unknown key", d.admin, "PUT", map[string]any{"node": "us1"}, 400, "node"},
		{"a node twice", d.admin, "PUT", map[string]any{"nodes": []string{"us1", "us1"}}, 400, "twice"},
		{"not a name", d.admin, "PUT", map[string]any{"nodes": []string{"../us1"}}, 400, "not a name"},
		{"an unknown node", d.admin, "PUT", map[string]any{"nodes": []string{"ap1"}}, 404, "ap1"},
		{"the home region", d.admin, "PUT", map[string]any{"nodes": []string{"eu2"}}, 409, "another region"},
		{"the primary", d.admin, "PUT", map[string]any{"nodes": []string{"eu1"}}, 409, "choose another node"},
		{"too many", d.admin, "PUT", map[string]any{"nodes": manyNames(9)}, 400, "at most 8"},
		{"on a standby", d.near.Client(), "PUT", map[string]any{"nodes": []string{"us1"}}, 409, "lead"},
	})
	wantStatus(t, d.admin.Do("PUT", "/_shard/tenants/nope/read-copies", map[string]any{"nodes": []string{"us1"}}), 404, "an unknown tenant")
	// Nothing was recorded by any of them.
	res := d.admin.Do("GET", "/_shard/tenants", nil)
	wantStatus(t, res, 200, "list tenants")
	if strings.Contains(string(res.Body), "read_copies") {
		t.Fatalf("a refused change left read copies: %s", res)
	}
}

// refusal is one request a route must refuse: who sends what, and the
// status and words of the refusal.
type refusal struct {
	what   string
	client *cluster.Client
	method string
	body   any
	status int
	says   string
}

// wantRefusals sends each of rs to path and checks its refusal.
func wantRefusals(t *testing.T, path string, rs []refusal) {
	t.Helper()
	for _, tc := range rs {
		res := tc.client.Do(tc.method, path, tc.body)
		if res.Status != tc.status || !strings.Contains(string(res.Body), tc.says) {
			t.Errorf("%s: want %d naming %q, got %s", tc.what, tc.status, tc.says, res)
		}
	}
}

func manyNames(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = "x" + strconv.Itoa(i)
	}
	return out
}

// servedBy checks who answered res: by (Fenec-Served-By), node
// (Fenec-Node), and, for bound >= 0, a stated staleness within it.
func (d *readCopies) servedBy(res *cluster.Resp, by, node string, bound int64) error {
	if res.Status != http.StatusOK {
		return fmt.Errorf("answered %s", res)
	}
	if got := res.Header.Get(wire.HeaderServedBy); got != by {
		return fmt.Errorf("served by %q, want %q (node %q): %s", got, by, d.ids[res.Header.Get(wire.HeaderNode)], res)
	}
	if got := d.ids[res.Header.Get(wire.HeaderNode)]; got != node {
		return fmt.Errorf("answered by node %q, want %q", got, node)
	}
	if bound < 0 {
		return nil
	}
	st := res.Header.Get(wire.HeaderStaleness)
	ms, err := strconv.ParseInt(st, 10, 64)
	if err != nil || ms > bound {
		return fmt.Errorf("stated staleness %q, want at most %d ms", st, bound)
	}
	return nil
}

// TestReadCopiesByRegion: {"regions": [...]} puts one read copy in each
// region named, on the node the router picks there, and keeps the one a
// region holds already; the tenant's own region, a region no record
// names, a region with no node that can hold one, both nodes and
// regions, are refused saying what to send, and change nothing.
func TestReadCopiesByRegion(t *testing.T) {
	d := startReadCopies(t)
	d.g.Place("t1", d.eu1)
	ap1 := d.c.StartNode("ap1", cluster.NodeOptions{Args: []string{"--lease", "--replication-token", replToken, "--http-token", dataToken}})
	wantStatus(t, d.admin.Do("PUT", "/_shard/nodes/ap1", map[string]any{
		"addr": ap1.URL(), "token": cluster.AdminToken, "region": "ap", "standby": true}), 201, "register ap1, a standby")
	path := "/_shard/tenants/t1/read-copies"
	wantRefusals(t, path, []refusal{
		{"nodes and regions", d.admin, "PUT", map[string]any{"nodes": []string{"us1"}, "regions": []string{"us"}}, 400, "not both"},
		{"the home region", d.admin, "PUT", map[string]any{"regions": []string{"eu"}}, 400, "home region"},
		{"an unknown region", d.admin, "PUT", map[string]any{"regions": []string{"mars"}}, 404, "known regions: ap, eu, us"},
		{"a region with no node to hold one", d.admin, "PUT", map[string]any{"regions": []string{"ap"}}, 409, "record one there"},
		{"a region twice", d.admin, "PUT", map[string]any{"regions": []string{"us", "us"}}, 400, "twice"},
		{"not a name", d.admin, "PUT", map[string]any{"regions": []string{"../us"}}, 400, "not a name"},
		{"regions not a list", d.admin, "PUT", map[string]any{"regions": "us"}, 400, "regions"},
		{"too many", d.admin, "PUT", map[string]any{"regions": manyNames(9)}, 400, "at most 8"},
		{"on a standby router", d.near.Client(), "PUT", map[string]any{"regions": []string{"us"}}, 409, "lead"},
	})
	wantRefusals(t, "/_shard/tenants/t1/move", []refusal{
		{"a move to a standby node", d.admin, "POST", map[string]any{"to": "ap1"}, 409, "a node that is not one"},
	})
	res := d.admin.Do("GET", "/_shard/tenants", nil)
	wantStatus(t, res, 200, "list tenants")
	if strings.Contains(string(res.Body), "read_copies") || !strings.Contains(string(res.Body), `"node":"eu1"`) {
		t.Fatalf("a refused change left a mark: %s", res)
	}

	var ans struct {
		ReadCopies []string `json:"read_copies"`
		Added      []string `json:"added"`
		Dropped    []string `json:"dropped"`
	}
	res = d.admin.Do("PUT", path, map[string]any{"regions": []string{"us"}})
	wantStatus(t, res, 200, "a read copy of t1 in us")
	if err := json.Unmarshal(res.Body, &ans); err != nil || fmt.Sprint(ans.ReadCopies) != "[us1]" || fmt.Sprint(ans.Added) != "[us1]" {
		t.Fatalf("a read copy in us answered %s", res)
	}
	res = d.admin.Do("PUT", path, map[string]any{"regions": []string{"us"}})
	wantStatus(t, res, 200, "t1's read copy in us, asked again")
	if err := json.Unmarshal(res.Body, &ans); err != nil || fmt.Sprint(ans.ReadCopies) != "[us1]" || len(ans.Added)+len(ans.Dropped) != 0 {
		t.Fatalf("a read copy in us asked again answered %s", res)
	}
	writer := cluster.NewClient(t, d.g.URL(), dataToken)
	writer.MustQuery("t1", "create collection kv (k text @unique, v int)")
	writer.MustQuery("t1", "insert kv {k: 'a', v: 1}")
	cluster.Eventually(t, wait, func() error {
		return d.servedBy(d.reader.QueryH("t1", "get kv where k = 'a'", wire.HeaderMaxStaleness, "5000"), wire.ServedByCopy, "us1", 5000)
	})
	res = d.admin.Do("PUT", path, map[string]any{"regions": []string{}})
	wantStatus(t, res, 200, "no read copies by region")
	if err := json.Unmarshal(res.Body, &ans); err != nil || len(ans.ReadCopies) != 0 || fmt.Sprint(ans.Dropped) != "[us1]" {
		t.Fatalf("dropping by region answered %s", res)
	}
}

// TestBoundedReadsHostile: a read through the router near the copy whose
// bound is negative, past a day, not a number, a list or repeated, or
// whose Fenec-After is past the tenant's latest write, is refused 400 at
// once (nothing runs), saying what to send; a good bound after them is
// served by the copy.
func TestBoundedReadsHostile(t *testing.T) {
	d := startReadCopies(t)
	d.g.Place("t1", d.eu1)
	writer := cluster.NewClient(t, d.g.URL(), dataToken)
	writer.MustQuery("t1", "create collection kv (k text @unique, v int)")
	res := writer.MustQuery("t1", "insert kv {k: 'a', v: 1}")
	seq, history := res.Header.Get(wire.HeaderSeq), res.Header.Get(wire.HeaderHistory)
	wantStatus(t, d.admin.Do("PUT", "/_shard/tenants/t1/read-copies", map[string]any{"nodes": []string{"us1"}}), 200, "a read copy of t1 on us1")
	cluster.Eventually(t, wait, func() error {
		return d.servedBy(d.reader.QueryH("t1", "get kv", wire.HeaderMaxStaleness, "5000"), wire.ServedByCopy, "us1", 5000)
	})
	n, _ := strconv.ParseUint(seq, 10, 64)
	hc := &http.Client{Transport: &http.Transport{}}
	defer hc.CloseIdleConnections()
	for _, tc := range []struct {
		what string
		hdr  [][2]string
		says string
	}{
		{"a negative bound", [][2]string{{wire.HeaderMaxStaleness, "-1"}}, wire.HeaderMaxStaleness},
		{"a bound past a day", [][2]string{{wire.HeaderMaxStaleness, "86400001"}}, wire.HeaderMaxStaleness},
		{"a huge bound", [][2]string{{wire.HeaderMaxStaleness, "99999999999999999999"}}, wire.HeaderMaxStaleness},
		{"not a number", [][2]string{{wire.HeaderMaxStaleness, "soon"}}, wire.HeaderMaxStaleness},
		{"a fraction", [][2]string{{wire.HeaderMaxStaleness, "1.5"}}, wire.HeaderMaxStaleness},
		{"a list", [][2]string{{wire.HeaderMaxStaleness, "5000, 6000"}}, wire.HeaderMaxStaleness},
		{"repeated", [][2]string{{wire.HeaderMaxStaleness, "5000"}, {wire.HeaderMaxStaleness, "5000"}}, wire.HeaderMaxStaleness},
		{"Fenec-After past the latest write", [][2]string{{wire.HeaderAfter, strconv.FormatUint(n+10, 10)}, {wire.HeaderHistory, history}},
			"past this tenant's latest write"},
	} {
		req, err := http.NewRequest("POST", d.near.URL()+"/t/t1/query", strings.NewReader(`{"query": "get kv"}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+dataToken)
		for _, h := range tc.hdr {
			req.Header.Add(h[0], h[1])
		}
		start := time.Now()
		r, err := hc.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", tc.what, err)
		}
		body, _ := io.ReadAll(r.Body)
		r.Body.Close()
		took := time.Since(start)
		var e struct{ Error string }
		if r.StatusCode != 400 || json.Unmarshal(body, &e) != nil || !strings.Contains(e.Error, tc.says) || took > 2*time.Second {
			t.Errorf("%s: want 400 naming %q at once, got %d %s after %v", tc.what, tc.says, r.StatusCode, body, took)
		}
	}
	if err := d.servedBy(d.reader.QueryH("t1", "get kv", wire.HeaderMaxStaleness, "5000"), wire.ServedByCopy, "us1", 5000); err != nil {
		t.Fatalf("a good bound after the bad ones: %v", err)
	}
	res = d.reader.QueryH("t1", "get kv", wire.HeaderAfter, seq, wire.HeaderHistory, history)
	if err := d.servedBy(res, wire.ServedByCopy, "us1", -1); err != nil {
		t.Fatalf("Fenec-After of the client's own write: %v", err)
	}
}
