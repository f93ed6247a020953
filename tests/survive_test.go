package tests

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/fenec-go/fenec/tests/cluster"
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
