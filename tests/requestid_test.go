package tests

import (
	"fmt"
	"strings"
	"testing"

	"github.com/fenec-go/fenec/tests/cluster"
)

// TestRequestIDInBothLogs follows one X-Request-Id through the router's
// and the node's logs as docs/runbook.md says it can be: at the default
// level a change through /_shard/ is in both (the router's change, the
// node's admin change), and a request the router answered itself because
// its node did not (a 502) is in the router's; at --log-level debug every
// request is in both, a successful read too.
func TestRequestIDInBothLogs(t *testing.T) {
	t.Run("default level", func(t *testing.T) {
		r, n := oneNode(t)
		c := r.Client()
		wantStatus(t, c.Do("PUT", "/_shard/tenants/shop", map[string]any{}, "X-Request-Id", "rid-place-1"), 201, "place")
		inLog(t, r.Proc, "rid-place-1", `msg="shard change"`)
		inLog(t, n.Proc, "rid-place-1", `msg="admin change"`)

		c.MustQuery("shop", "create collection c (n int)")
		wantStatus(t, c.Do("POST", "/t/shop/query", `{"query": "get c count"}`, "X-Request-Id", "rid-read-ok"), 200, "a read")
		n.Kill()
		res := c.Do("POST", "/t/shop/query", `{"query": "get c count"}`, "X-Request-Id", "rid-node-gone")
		wantStatus(t, res, 502, "a read of a node gone")
		if res.Header.Get("X-Request-Id") != "rid-node-gone" {
			t.Fatalf("the 502 carries %q", res.Header.Get("X-Request-Id"))
		}
		inLog(t, r.Proc, "rid-node-gone", `msg="request not answered by its node"`, "node=n1", "tenant=shop")
		// A read answered without an error writes no line at this level.
		if strings.Contains(r.Log()+n.Log(), "rid-read-ok") {
			t.Fatal("a read answered 200 was logged at the default level")
		}
	})
	t.Run("debug", func(t *testing.T) {
		c := cluster.New(t)
		debug := []string{"--log-level", "debug"}
		r := c.StartRouter("router", cluster.RouterOptions{Args: debug})
		n := c.StartNode("n1", cluster.NodeOptions{Args: debug})
		r.Register(n)
		cl := r.Client()
		wantStatus(t, cl.Do("PUT", "/_shard/tenants/shop", map[string]any{}), 201, "place")
		cl.MustQuery("shop", "create collection c (n int)")
		wantStatus(t, cl.Do("POST", "/t/shop/query", `{"query": "get c count"}`, "X-Request-Id", "rid-read-debug"), 200, "a read")
		inLog(t, r.Proc, "rid-read-debug", `msg=request`, "status=200", "target=/t/shop/query")
		inLog(t, n.Proc, "rid-read-debug", `msg=request`, "status=200")
	})
}

// inLog waits for a line of p's log holding request_id=id and every want.
func inLog(t *testing.T, p *cluster.Proc, id string, want ...string) {
	t.Helper()
	cluster.Eventually(t, wait, func() error {
		for _, line := range strings.Split(p.Log(), "\n") {
			if !strings.Contains(line, "request_id="+id) {
				continue
			}
			all := true
			for _, w := range want {
				all = all && strings.Contains(line, w)
			}
			if all {
				return nil
			}
		}
		return fmt.Errorf("%s's log has no line with request_id=%s and %q:\n%s", p.Name(), id, want, p.Log())
	})
}
