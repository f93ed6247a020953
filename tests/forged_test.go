package tests

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fenec-go/fenec/tests/cluster"
)

// forgedGrant is a grant to node n that copies its current list in and
// binds it to region eu's directory at epoch, by a forced handoff from the
// global tier: what anyone holding the node's admin token can send.
func forgedGrant(t *testing.T, n *cluster.Node, epoch uint64) []byte {
	t.Helper()
	res := n.Admin().Do("GET", "/_admin/lease", nil)
	var st struct {
		Term     uint64            `json:"term"`
		Tenants  []string          `json:"tenants"`
		List     string            `json:"list"`
		InStep   []string          `json:"in_step"`
		Behind   map[string]uint64 `json:"behind"`
		Replicas map[string]string `json:"replicas"`
	}
	if res.Status != 200 || json.Unmarshal(res.Body, &st) != nil {
		t.Fatalf("%s's lease: %s", n.Name, res)
	}
	g := map[string]any{
		"term": st.Term, "router": "forger", "n": 1, "ack": 0, "ms": 60000,
		"tenants": st.Tenants, "list": st.List, "dir": "region:eu", "epoch": epoch,
		"handoff": map[string]any{"from": "global", "force": true},
	}
	if len(st.InStep) > 0 {
		g["in_step"] = st.InStep
	}
	if len(st.Behind) > 0 {
		g["behind"] = st.Behind
	}
	if len(st.Replicas) > 0 {
		g["replicas"] = st.Replicas
	}
	b, err := json.Marshal(g)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// regionRecord is region eu's record as rt lists it: leaser, epoch and the
// handoff's number and state.
func regionRecord(t *testing.T, rt *cluster.Router) string {
	t.Helper()
	reg := regionOf(t, rt, "eu")
	h, _ := reg["handoff"].(map[string]any)
	return fmt.Sprintf("leaser %v epoch %v handoff %v %v", reg["leaser"], reg["epoch"], h["seq"], h["state"])
}

// One forged grant to eu1 (its admin token stolen, or a router of the
// deployment compromised) costs eu1 alone. The grant at the largest epoch
// is refused by the node. One within the margin binds eu1 to eu's
// directory, which leases nothing: the global tier, refused by eu1, counts
// it as a node that does not answer — it fails eu1's tenant over onto its
// copy, where it writes again — and goes on leasing eu2 and eu3, whose
// tenant writes throughout; the region record is the same in both
// directories; both routers audit what they met; handing eu to its router
// and back still works, at epochs 1 and 2.
func TestForgedGrantCostsOneNode(t *testing.T) {
	c := cluster.New(t)
	auditPath := filepath.Join(t.TempDir(), "routers.audit")
	rs := c.StartRegions(cluster.RegionsOptions{Lease: regionLease, Regions: map[string]int{"eu": 3}, RouterArgs: []string{"--audit", auditPath}})
	eu := rs.Region["eu"]
	waitLeased(t, rs.Global, "eu1", "eu2", "eu3")
	registerTenant(t, rs, eu, "eu-a", eu.Node("eu1"))
	registerTenant(t, rs, eu, "eu-b", eu.Node("eu2"))
	cluster.Eventually(t, wait, func() error {
		if p, ok := placementOf(t, eu.Leader.Client(), "eu-b"); !ok || p["node"] != "eu2" {
			return fmt.Errorf("eu-b not in eu's copy: %v", p)
		}
		return nil
	})
	before := regionRecord(t, rs.Global)
	if got := regionRecord(t, eu.Leader); got != before {
		t.Fatalf("eu's record at the global tier %q, at eu's router %q", before, got)
	}
	copyOf := placement(t, rs.Global.Client(), "eu-a")["replica"].(string)
	w := startWriters(t, 2, map[string][]*cluster.Router{"eu-b": {eu.Leader, rs.Global}})
	w.atLeast(20)

	n1 := eu.Node("eu1")
	res := n1.Admin().Do("POST", "/_admin/lease", string(forgedGrant(t, n1, math.MaxUint64)))
	if e := wantError(t, res, 409, "the forged grant at the largest epoch"); !strings.Contains(e["error"].(string), "past the bound") {
		t.Fatalf("the refusal does not say why: %v", e)
	}
	if dir, epoch := bindingOf(t, n1); dir != "global" || epoch != 0 {
		t.Fatalf("eu1 bound to %s at epoch %v after a refused grant", dir, epoch)
	}
	wantStatus(t, n1.Admin().Do("POST", "/_admin/lease", string(forgedGrant(t, n1, 2))), 200, "the forged grant within the margin")
	if dir, epoch := bindingOf(t, n1); dir != "region:eu" || epoch != 2 {
		t.Fatalf("eu1 bound to %s at epoch %v after the forged grant", dir, epoch)
	}

	// eu-a writes again on its copy, failed over by the global tier.
	firstWriteOn(t, rs.Global, "eu-a", copyOf)
	w.atLeast(40)
	for _, rt := range []*cluster.Router{rs.Global, eu.Leader} {
		if got := regionRecord(t, rt); got != before {
			t.Fatalf("eu's record at %s is %q after the forged grant, was %q", rt.Name, got, before)
		}
	}
	if got := leasedNodes(t, rs.Global); !slices.Contains(got, "eu2") || !slices.Contains(got, "eu3") {
		t.Fatalf("the global tier leases %v after eu1 refused it", got)
	}
	if got := leasedNodes(t, eu.Leader); len(got) != 0 {
		t.Fatalf("eu's router leases %v while the global tier leases eu", got)
	}

	// Handing eu over and back still works, at the next epochs.
	res = eu.Leader.Client().Do("POST", "/_shard/regions/eu/handoff", map[string]any{"to": "region"})
	if wantStatus(t, res, 200, "hand eu to its router"); !strings.Contains(string(res.Body), `"epoch":1`) {
		t.Fatalf("handed to eu: %s", res)
	}
	waitLeased(t, eu.Leader, "eu2", "eu3")
	w.atLeast(60)
	res = rs.Global.Client().Do("POST", "/_shard/regions/eu/handoff", map[string]any{"to": "global"})
	if wantStatus(t, res, 200, "hand eu back"); !strings.Contains(string(res.Body), `"epoch":2`) {
		t.Fatalf("handed back: %s", res)
	}
	waitLeased(t, rs.Global, "eu2", "eu3")
	w.atLeast(80)
	w.check()
	for _, rt := range []*cluster.Router{rs.Global, eu.Leader} {
		cluster.Eventually(t, wait, func() error {
			if reg := regionOf(t, rt, "eu"); reg["leaser"] != "global" || reg["epoch"] != float64(2) {
				return fmt.Errorf("eu at %s after the handoff back: %v", rt.Name, reg)
			}
			return nil
		})
	}
	raw, err := os.ReadFile(auditPath)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), `"what":"lease_refused","node":"eu1"`) || !strings.Contains(string(raw), `"what":"region_record"`) {
		t.Fatalf("the routers' audit log lacks eu1's refusal or the region records written:\n%s", raw)
	}
}
