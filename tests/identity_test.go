package tests

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/fenec-go/fenec/tests/cluster"
	"github.com/fenec-go/fenec/tests/proxy"
)

// threeRows places tenant on n and writes three rows to it.
func threeRows(t *testing.T, r *cluster.Router, tenant string, n *cluster.Node) {
	t.Helper()
	c := r.Client()
	r.Place(tenant, n)
	c.MustQuery(tenant, "create collection c (v int)")
	c.MustQuery(tenant, "put c [{v: 1}, {v: 2}, {v: 3}]")
}

// stillThree fails t unless tenant answers its three rows, through the
// router and on n's own disk.
func stillThree(t *testing.T, r *cluster.Router, tenant string, n *cluster.Node) {
	t.Helper()
	res := r.Client().Query(tenant, "get c count")
	if res.Status != http.StatusOK || strings.TrimSpace(string(res.Body)) != `{"count":3}` {
		t.Fatalf("%s after the refusals: %s", tenant, res)
	}
	res = n.Admin().Do("GET", "/_admin/tenants", nil)
	if !strings.Contains(string(res.Body), `"`+tenant+`"`) {
		t.Fatalf("%s's file is gone from %s: %s", tenant, n.Name, res)
	}
}

// TestOneNodeUnderTwoNames records a node, then tries to record it again
// under other names by other spellings of its address: without a scheme,
// as localhost, through a second proxy. Each is refused, so no move and no
// repair can take the node for another one and delete the tenant's only
// file; the tenant's rows are all still there.
func TestOneNodeUnderTwoNames(t *testing.T) {
	r, n := oneNode(t)
	c := r.Client()
	threeRows(t, r, "t", n)
	port := n.Direct()[strings.LastIndex(n.Direct(), ":")+1:]
	other := proxy.New(t, n.Direct())
	for i, addr := range []string{
		n.Direct(),                        // 127.0.0.1:P, no scheme
		"http://" + n.Direct(),            // the node itself, not its proxy
		"http://localhost:" + port,        // another name for the same host
		"HTTP://LOCALHOST:" + port + "/",  // upper case, a trailing slash
		"http://" + other.Addr(),          // a second proxy in front of it
		"http://" + other.Addr() + "/./.", // a path of dots
	} {
		name := "alias" + strconv.Itoa(i)
		res := c.Do("PUT", "/_shard/nodes/"+name, map[string]any{
			"addr": addr, "token": cluster.AdminToken, "region": "local",
		})
		if res.Status == http.StatusCreated {
			// What the refusal prevents: the node taken for another
			// one, its tenant moved or copied "to it", deleted.
			c.Do("POST", "/_shard/tenants/t/move", map[string]any{"to": name})
			c.Do("POST", "/_shard/replicas", nil)
			stillThree(t, r, "t", n)
			t.Fatalf("%s recorded as %s beside n1: %s", addr, name, res)
		}
		if res.Status != http.StatusConflict && res.Status != http.StatusBadRequest {
			t.Fatalf("%s as %s: %s, want 409 (or 400 for the path)", addr, name, res)
		}
		if res.Status == http.StatusConflict && !strings.Contains(string(res.Body), "n1") {
			t.Fatalf("%s as %s: the refusal does not name n1: %s", addr, name, res)
		}
	}
	stillThree(t, r, "t", n)

	// Recording n1 again under its own name, by another spelling, is an
	// operator's correction and is taken.
	res := c.Do("PUT", "/_shard/nodes/n1", map[string]any{
		"addr": "127.0.0.1:" + port, "token": cluster.AdminToken, "region": "local",
	})
	wantStatus(t, res, http.StatusCreated, "n1 recorded again by its direct address")
	res = c.Do("GET", "/_shard/nodes", nil)
	if !strings.Contains(string(res.Body), `"addr":"http://127.0.0.1:`+port+`"`) {
		t.Fatalf("the address is not kept with its scheme: %s", res.Body)
	}
	stillThree(t, r, "t", n)
}

// TestRepointedAddressDeletesNothing records two nodes, then points the
// second one's address at the first (an operator's DNS or proxy mistake):
// a move, a replica and a repair onto the second ask each node who it is
// at that moment, find the tenant's own node, and delete nothing.
func TestRepointedAddressDeletesNothing(t *testing.T) {
	c0 := cluster.New(t)
	r := c0.StartRouter("router", cluster.RouterOptions{})
	args := cluster.NodeOptions{Args: []string{"--replication-token", replToken}}
	n1 := c0.StartNode("n1", args)
	n2 := c0.StartNode("n2", args)
	r.Register(n1)
	// n2 is recorded through a proxy of the test's own, to re-point.
	p2 := proxy.New(t, n2.Direct())
	res := r.Client().Do("PUT", "/_shard/nodes/n2", map[string]any{
		"addr": "http://" + p2.Addr(), "token": cluster.AdminToken, "region": "local",
	})
	wantStatus(t, res, http.StatusCreated, "record n2")
	threeRows(t, r, "t", n1)

	p2.Retarget(n1.Direct())
	p2.Reset() // kept connections to n2 end too
	c := r.Client()
	res = c.Do("POST", "/_shard/tenants/t/move", map[string]any{"to": "n2"})
	if res.Status == http.StatusOK {
		t.Fatalf("moved onto a node that is the source: %s", res)
	}
	stillThree(t, r, "t", n1)
	res = c.Do("POST", "/_shard/replicas", nil)
	if res.Status == http.StatusOK {
		t.Fatalf("a copy made on the source itself: %s", res)
	}
	if !strings.Contains(string(res.Body), "another node") {
		t.Fatalf("the repair's failure does not say the address names another node: %s", res)
	}
	stillThree(t, r, "t", n1)

	// Pointed back, the same calls work.
	p2.Retarget(n2.Direct())
	p2.Reset()
	res = c.Do("POST", "/_shard/replicas", nil)
	wantStatus(t, res, http.StatusOK, "replicas once n2's address is n2 again")
	res = c.Do("POST", "/_shard/tenants/t/move", map[string]any{"to": "n2"})
	wantStatus(t, res, http.StatusOK, "move once n2's address is n2 again")
	stillThree(t, r, "t", n2)
}
