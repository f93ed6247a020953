package region

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/internal/testkit"
	"github.com/fenec-go/fenec/lease"
)

// Region eu has no router of its own linked, and one forged grant binds
// node a to eu's directory at epoch 1 (the admin token is every router's:
// stolen, or a router compromised). It costs a alone: the global tier,
// refused by a, keeps the region's record as it was and goes on leasing
// b and c — c's tenant writes throughout — and fails a over as a node that
// does not answer, so a's tenant writes again on its copy.
func TestForgedGrantWithNoRegionRouterCP(t *testing.T) {
	r := startLeasingRouter(t)
	a, b, c := startLeaseNode(t, true), startLeaseNode(t, true), startLeaseNode(t, true)
	r.addLeaseNode(t, "a", a, nil)
	r.addLeaseNode(t, "b", b, nil)
	r.addLeaseNode(t, "c", c, nil)
	for _, n := range []string{"a", "b", "c"} {
		r.waitLeased(t, n)
	}
	if st, body := r.shard(t, http.MethodPut, "nodes/a", map[string]any{"standby": "b"}, nil); st != http.StatusCreated {
		t.Fatalf("standby: %d %s", st, body)
	}
	r.place(t, "t1", "a")
	r.place(t, "t2", "c")
	for _, tn := range []string{"t1", "t2"} {
		r.mustQuery(t, tn, "create collection c (n int)")
	}
	testkit.Eventually(t, cpWait, func() error {
		if e := r.tenantsOf(t)["t1"]; e.Replica != "b" {
			return fmt.Errorf("t1's copy: %+v", e)
		}
		return nil
	})
	before := r.region(t, "eu")

	st := a.leaseStatus(t)
	forged := lease.Grant{Term: st.Term, Router: "forger", N: 1, MS: 60000, Tenants: st.Tenants, List: st.List,
		InStep: st.InStep, Behind: st.Behind, Replicas: st.Replicas,
		Dir: global.DirOfRegion("eu"), Epoch: 1, Handoff: &lease.Handoff{From: global.DirGlobal, Force: true}}
	if len(forged.InStep) == 0 {
		forged.InStep = nil
	}
	if len(forged.Behind) == 0 {
		forged.Behind = nil
	}
	if len(forged.Replicas) == 0 {
		forged.Replicas = nil
	}
	body, err := json.Marshal(forged)
	if err != nil {
		t.Fatal(err)
	}
	if code, _, b := cpDo(t, http.MethodPost, a.URL()+"/_admin/lease", cpAdminToken, body, nil); code != http.StatusOK {
		t.Fatalf("the forged grant: %d %s", code, b)
	}
	if got := a.leaseStatus(t); got.Dir != "region:eu" || got.Epoch != 1 {
		t.Fatalf("a after the forged grant: %+v", got)
	}
	for i := 0; ; i++ {
		r.mustQuery(t, "t2", fmt.Sprintf("put c {n: %d}", i)) // c's tenant writes throughout
		if e := r.tenantsOf(t)["t1"]; e.Node == "b" {
			break
		}
		if i > 100000 {
			t.Fatal("t1 never failed over")
		}
	}
	testkit.Eventually(t, cpWait, func() error {
		if st, _, b := r.query(t, "t1", "put c {n: 1}"); st != http.StatusOK {
			return fmt.Errorf("t1 on its copy: %d %s", st, b)
		}
		return nil
	})
	r.mustQuery(t, "t2", "put c {n: -1}")
	if after := r.region(t, "eu"); after.Leaser != before.Leaser || after.Epoch != before.Epoch || (after.Handoff == nil) != (before.Handoff == nil) {
		t.Fatalf("eu's record moved on one node's refusal: %+v, was %+v", after, before)
	}
	for _, n := range r.leases(t).Nodes {
		if (n.Node == "b" || n.Node == "c") && (n.FailedOver || n.LeftMS <= 0) {
			t.Fatalf("%s after a's forged grant: %+v", n.Node, n)
		}
	}
}
