package tests

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fenec-go/fenec/tests/cluster"
	"github.com/fenec-go/fenec/wire"
)

// TestRegionLostWholeSurvived: a tenant of eu set to survive its region
// keeps its voting copy on us1; under --sync always every write it
// acknowledged is on us1 too. eu lost whole — both its nodes killed — the
// global tier fails it over to us1 once eu1's lease has lapsed, and every
// acknowledged write is there; a tenant of eu left to survive its zone is
// not (its copy went with eu). The region cannot be handed to its own
// leasing while it holds such a tenant.
func TestRegionLostWholeSurvived(t *testing.T) {
	d := startReadCopies(t)
	d.g.Place("t1", d.eu1)
	d.g.Place("z1", d.eu1)
	res := d.admin.Do("PUT", "/_shard/tenants/t1/survive", map[string]any{"survive": "region"})
	wantStatus(t, res, 200, "t1 to survive its region")
	var ans struct{ Survive, Node, Replica string }
	if err := json.Unmarshal(res.Body, &ans); err != nil || ans.Survive != "region" || ans.Replica != "us1" {
		t.Fatalf("survive answered %s", res)
	}
	wantStatus(t, d.admin.Do("PUT", "/_shard/tenants/z1/survive", map[string]any{"survive": "zone", "copy": "us1"}), 400, "a copy named for a zone tenant")

	// A region holding it cannot lease itself: nobody could fail it over.
	res = d.admin.Do("POST", "/_shard/regions/eu/handoff", map[string]any{"to": "region"})
	if res.Status != 409 || !strings.Contains(string(res.Body), "t1") || !strings.Contains(string(res.Body), "zone") {
		t.Fatalf("a handoff of eu to its own leasing while t1 must survive it: %s", res)
	}

	w := cluster.NewClient(t, d.g.URL(), dataToken)
	w.MustQuery("t1", "create collection kv (k text @unique, v int)")
	var acked []string
	for i := range 40 {
		k := fmt.Sprintf("k%02d", i)
		if res := w.Query("t1", "insert kv {k: $1, v: $2}", k, i); res.Status == 200 {
			acked = append(acked, k)
		}
	}
	if len(acked) != 40 {
		t.Fatalf("only %d of 40 writes acknowledged before the loss", len(acked))
	}

	// eu lost whole.
	d.eu1.Kill()
	d.eu2.Kill()
	cluster.Eventually(t, wait, func() error {
		res := w.Query("t1", "get kv count")
		if res.Status != 200 {
			return fmt.Errorf("t1 after eu was lost: %s", res)
		}
		if !strings.Contains(string(res.Body), fmt.Sprint(len(acked))) {
			return fmt.Errorf("t1 after eu was lost holds %s, want %d rows", res.Body, len(acked))
		}
		return nil
	})
	res = d.admin.Do("GET", "/_shard/tenants", nil)
	wantStatus(t, res, 200, "list tenants")
	var ts []struct{ Name, Node, Survive string }
	if err := json.Unmarshal(res.Body, &ts); err != nil {
		t.Fatal(err)
	}
	for _, x := range ts {
		switch {
		case x.Name == "t1" && (x.Node != "us1" || x.Survive != "region"):
			t.Fatalf("t1 after eu was lost: %+v", x)
		case x.Name == "z1" && x.Node != "eu1":
			t.Fatalf("z1, of eu with no copy outside it, moved: %+v", x)
		}
	}
	// Writes go on at its new home.
	w.MustQuery("t1", "insert kv {k: 'after', v: 1}")
}

// TestSurviveHostile: the survive route refuses what it cannot do, saying
// what to send instead, and changes nothing when it refuses.
func TestSurviveHostile(t *testing.T) {
	d := startReadCopies(t)
	d.g.Place("t1", d.eu1)
	path := "/_shard/tenants/t1/survive"
	wantRefusals(t, path, []refusal{
		{"no token", cluster.NewClient(t, d.g.URL(), ""), "PUT", map[string]any{"survive": "region"}, 401, "token"},
		{"a GET", d.admin, "GET", nil, 405, ""},
		{"no body", d.admin, "PUT", nil, 400, "zone"},
		{"an unknown goal", d.admin, "PUT", map[string]any{"survive": "galaxy"}, 400, "outlive"},
		{"a goal of the wrong type", d.admin, "PUT", map[string]any{"survive": 1}, 400, "survive"},
		{"a copy in its own region", d.admin, "PUT", map[string]any{"survive": "region", "copy": "eu2"}, 409, "another region"},
		{"a copy on its primary", d.admin, "PUT", map[string]any{"survive": "region", "copy": "eu1"}, 409, "primary"},
		{"an unknown copy node", d.admin, "PUT", map[string]any{"survive": "region", "copy": "ap1"}, 404, "ap1"},
		{"on a standby", d.near.Client(), "PUT", map[string]any{"survive": "region"}, 409, "lead"},
	})
	wantStatus(t, d.admin.Do("PUT", "/_shard/tenants/nope/survive", map[string]any{"survive": "region"}), 404, "an unknown tenant")
	res := d.admin.Do("GET", "/_shard/tenants", nil)
	wantStatus(t, res, 200, "list tenants")
	if !strings.Contains(string(res.Body), `"survive":"zone"`) || strings.Contains(string(res.Body), `"replica"`) {
		t.Fatalf("a refused change left a mark: %s", res)
	}
}

// TestRegionLostZoneTenantsAnswered: eu lost whole (its nodes killed and
// their network gone silent, so a request sent there would hang to the
// upstream timeout): once the global tier failed eu's nodes over, its
// zone tenants are answered 503 at once through the router near us,
// naming the tenant, the node, the region and since when, with
// Retry-After — never sent to eu; a bounded read of one with a read copy
// in us is answered by the copy; the region tenant writes again through
// the same router. eu1 back, its zone tenant serves again.
func TestRegionLostZoneTenantsAnswered(t *testing.T) {
	d := startReadCopies(t)
	us := d.c.StartRouter("us", cluster.RouterOptions{Directory: d.g.EtcdURL(),
		Args: []string{"--standby", "--near", "us", "--copy-wait", "400", "--upstream-timeout", "20"}})
	reader := cluster.NewClient(t, us.URL(), dataToken)
	d.g.Place("t1", d.eu1)
	d.g.Place("z1", d.eu1)
	d.g.Place("z2", d.eu2)
	wantStatus(t, d.admin.Do("PUT", "/_shard/tenants/t1/survive", map[string]any{"survive": "region"}), 200, "t1 to survive its region")
	w := cluster.NewClient(t, d.g.URL(), dataToken)
	for _, tn := range []string{"t1", "z1", "z2"} {
		w.MustQuery(tn, "create collection kv (k text @unique, v int)")
		w.MustQuery(tn, "insert kv {k: 'a', v: 1}")
	}
	wantStatus(t, d.admin.Do("PUT", "/_shard/tenants/z1/read-copies", map[string]any{"nodes": []string{"us1"}}), 200, "a read copy of z1 on us1")
	cluster.Eventually(t, wait, func() error {
		return d.servedBy(reader.QueryH("z1", "get kv", wire.HeaderMaxStaleness, "5000"), wire.ServedByCopy, "us1", 5000)
	})

	// eu lost whole: power and network.
	for _, n := range []*cluster.Node{d.eu1, d.eu2} {
		n.Cut()
		n.Kill()
	}
	lostAt := time.Now()
	var failedOver time.Time
	cluster.Eventually(t, wait, func() error {
		if tenantNode(t, d.admin, "t1") != "us1" {
			return fmt.Errorf("t1 not failed over yet")
		}
		failedOver = time.Now()
		return nil
	})
	// The routers' views show eu's nodes lapsed within a second of it.
	cluster.Eventually(t, wait, func() error {
		for _, r := range []*cluster.Router{d.g, us} {
			lapsed := lapsedNodes(t, r.Client())
			if lapsed["eu1"].IsZero() || lapsed["eu2"].IsZero() || !lapsed["us1"].IsZero() {
				return fmt.Errorf("%s shows lapsed %v", r.Name, lapsed)
			}
		}
		return nil
	})
	if took := time.Since(failedOver); took > time.Second {
		t.Fatalf("the routers showed eu's nodes lapsed %v after t1 was failed over, want within 1 s", took)
	}
	t.Logf("eu lost: t1 failed over after %v; the lapse shown %v after that", failedOver.Sub(lostAt), time.Since(failedOver))

	// Zone tenants: 503 at once, naming what happened and what to do.
	for _, tc := range []struct{ tenant, node, says string }{
		{"z1", "eu1", "read copies (on us1)"},
		{"z2", "eu2", "no read copy"},
	} {
		for _, q := range []string{"get kv", "insert kv {k: 'b', v: 2}"} {
			start := time.Now()
			res := reader.QueryH(tc.tenant, q)
			took := time.Since(start)
			if took > 2*time.Second {
				t.Fatalf("%s %q answered after %v: not at once", tc.tenant, q, took)
			}
			if res.Status != 503 {
				t.Fatalf("%s %q after eu was lost: %s", tc.tenant, q, res)
			}
			var parsed struct {
				Error    string    `json:"error"`
				Tenant   string    `json:"tenant"`
				Node     string    `json:"node"`
				Region   string    `json:"region"`
				LapsedAt time.Time `json:"lapsed_at"`
			}
			if err := json.Unmarshal(res.Body, &parsed); err != nil || parsed.Tenant != tc.tenant || parsed.Node != tc.node || parsed.Region != "eu" ||
				parsed.LapsedAt.IsZero() || parsed.LapsedAt.Before(lostAt.Add(-time.Second)) {
				t.Fatalf("%s's refusal does not name it, its node, its region and since when: %s", tc.tenant, res)
			}
			for _, want := range []string{"region eu has lapsed: the region is lost", `"survive": "zone"`, "comes back when " + tc.node, tc.says, `"survive": "region"`} {
				if !strings.Contains(parsed.Error, want) {
					t.Fatalf("%s's refusal does not say %q: %s", tc.tenant, want, parsed.Error)
				}
			}
			if res.Header.Get("Retry-After") == "" {
				t.Fatalf("%s's refusal has no Retry-After", tc.tenant)
			}
			t.Logf("%s %q: %d in %v", tc.tenant, q, res.Status, took)
		}
	}
	// Its read copy answers what its bound allows; a bound it cannot prove
	// is refused as the tenant is, at once.
	res := reader.QueryH("z1", "get kv", wire.HeaderMaxStaleness, "600000")
	if err := d.servedBy(res, wire.ServedByCopy, "us1", 600000); err != nil || len(res.Rows(t)) != 1 {
		t.Fatalf("a bounded read of z1 once eu was lost: %v %s", err, res)
	}
	start := time.Now()
	res = reader.QueryH("z1", "get kv", wire.HeaderMaxStaleness, "1")
	if res.Status != 503 || time.Since(start) > 2*time.Second || !strings.Contains(string(res.Body), "eu1") {
		t.Fatalf("a read of z1 stating a bound its copy cannot prove, after %v: %s", time.Since(start), res)
	}
	// The region tenant writes again through the same router.
	res = reader.Query("t1", "insert kv {k: 'after', v: 2}")
	wantStatus(t, res, 200, "t1 written through the router near us after eu was lost")

	// eu1 back: it answers its grants, its lapse is cleared and z1 serves.
	d.eu1.Heal()
	d.eu1.Restart()
	cluster.Eventually(t, wait, func() error {
		res := reader.Query("z1", "get kv")
		if res.Status != 200 || len(res.Rows(t)) != 1 {
			return fmt.Errorf("z1 once eu1 is back: %s", res)
		}
		return nil
	})
	if lapsed := lapsedNodes(t, d.admin); !lapsed["eu1"].IsZero() || lapsed["eu2"].IsZero() {
		t.Fatalf("lapsed once eu1 is back: %v", lapsed)
	}
	// z2 is still on eu2, lost: refused as before, at once.
	start = time.Now()
	if res := reader.Query("z2", "get kv"); res.Status != 503 || time.Since(start) > 2*time.Second {
		t.Fatalf("z2 while eu2 is still lost, after %v: %s", time.Since(start), res)
	}
}

// tenantNode is tenant's primary as r's GET /_shard/tenants lists it.
func tenantNode(t *testing.T, r *cluster.Client, tenant string) string {
	t.Helper()
	res := r.Do("GET", "/_shard/tenants", nil)
	wantStatus(t, res, 200, "list tenants")
	var ts []struct{ Name, Node string }
	if err := json.Unmarshal(res.Body, &ts); err != nil {
		t.Fatal(err)
	}
	for _, x := range ts {
		if x.Name == tenant {
			return x.Node
		}
	}
	return ""
}

// lapsedNodes is when each node was recorded lapsed, as r's GET
// /_shard/nodes lists them (zero: not lapsed).
func lapsedNodes(t *testing.T, r *cluster.Client) map[string]time.Time {
	t.Helper()
	res := r.Do("GET", "/_shard/nodes", nil)
	wantStatus(t, res, 200, "list nodes")
	var ns []struct {
		Name     string    `json:"name"`
		LapsedAt time.Time `json:"lapsed_at"`
	}
	if err := json.Unmarshal(res.Body, &ns); err != nil {
		t.Fatal(err)
	}
	out := map[string]time.Time{}
	for _, n := range ns {
		out[n.Name] = n.LapsedAt
	}
	return out
}

// TestSurviveNoOtherRegion: a tenant cannot be set to survive its region
// where no node of another region can hold its copy: 409 saying to record
// one, and nothing changed.
func TestSurviveNoOtherRegion(t *testing.T) {
	c := cluster.New(t)
	g := c.StartRouter("g", cluster.RouterOptions{Args: []string{"--auto-failover", "2"}})
	args := []string{"--lease", "--sync", "always", "--replication-token", replToken, "--http-token", dataToken}
	admin := g.Client()
	for _, name := range []string{"eu1", "eu2"} {
		n := c.StartNode(name, cluster.NodeOptions{Args: args})
		wantStatus(t, admin.Do("PUT", "/_shard/nodes/"+name, map[string]any{
			"addr": n.URL(), "token": cluster.AdminToken, "region": "eu"}), 201, "register "+name)
	}
	res := admin.Do("PUT", "/_shard/tenants/t1", map[string]any{"node": "eu1"})
	wantStatus(t, res, 201, "place t1")
	wantRefusals(t, "/_shard/tenants/t1/survive", []refusal{
		{"no node of another region", admin, "PUT", map[string]any{"survive": "region"}, 409, "record one"},
		{"a copy named in its own region", admin, "PUT", map[string]any{"survive": "region", "copy": "eu2"}, 409, "another region"},
	})
	res = admin.Do("GET", "/_shard/tenants", nil)
	wantStatus(t, res, 200, "list tenants")
	if !strings.Contains(string(res.Body), `"survive":"zone"`) || !strings.Contains(string(res.Body), `"node":"eu1"`) {
		t.Fatalf("a refused change left a mark: %s", res)
	}
}
