package leasing

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/internal/testkit/testnode"
	"github.com/fenec-go/fenec/lease"
	"github.com/fenec-go/fenec/node"
)

// grantNode is a fenec-node under --lease (or not) whose /_admin/lease can
// be cut off: grants then hang until the caller gives up on them.
type grantNode struct {
	*testnode.Node
	cut  atomic.Bool
	stop chan struct{} // closed at cleanup: cut calls end
}

func startGrantNode(tb testing.TB, takesLease bool) *grantNode {
	tb.Helper()
	n := &grantNode{stop: make(chan struct{})}
	n.Node = testnode.Start(tb, testnode.Options{
		Configure: func(c *node.Config) { c.Lease = takesLease },
		Wrap: func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if n.cut.Load() && r.URL.Path == "/_admin/lease" {
					// Read whole, so the server notices the caller hang up.
					_, _ = io.Copy(io.Discard, r.Body)
					select {
					case <-r.Context().Done():
					case <-n.stop:
					}
					return
				}
				next.ServeHTTP(w, r)
			})
		},
	})
	// Registered after the node's own cleanup, so run before it: the cut
	// calls end before the node is closed.
	tb.Cleanup(func() { close(n.stop) })
	return n
}

// The transport bounds a grant, name resolution included, by its ctx, and
// turns refusals back into the lease package's errors.
func TestLeaseTransport(t *testing.T) {
	a := startGrantNode(t, true)
	free := startGrantNode(t, false)
	nodes := map[string]global.Node{
		"a":    {Addr: a.Addr(), Token: testnode.AdminToken, Region: "eu"},
		"free": {Addr: free.Addr(), Token: testnode.AdminToken, Region: "eu"},
		"gone": {Addr: "unresolvable.invalid:1", Token: testnode.AdminToken, Region: "eu"},
	}
	tr := NewHTTPTransport(func(n string) (global.Node, bool) { v, ok := nodes[n]; return v, ok }, "", nil)
	t.Cleanup(tr.Close)
	ctx := testnode.Ctx(t)
	list := []string{"x"}
	ans, err := tr.Send(ctx, "a", lease.Grant{Term: 1, Router: "r", N: 1, MS: 1000, Tenants: list, List: lease.ListID(list)})
	if err != nil || !ans.Took {
		t.Fatalf("grant: %+v %v", ans, err)
	}
	if _, err := tr.Send(ctx, "free", lease.Grant{Term: 1, Router: "r", N: 1, MS: 1000, Tenants: list, List: lease.ListID(list)}); !errors.Is(err, lease.ErrTakesNoLease) {
		t.Fatalf("node without --lease: %v", err)
	}
	if takes, err := tr.Probe(ctx, nodes["free"]); takes || err != nil {
		t.Fatalf("probe of a node without --lease: %v %v", takes, err)
	}
	if takes, err := tr.Probe(ctx, nodes["a"]); !takes || err != nil {
		t.Fatalf("probe of a leased node: %v %v", takes, err)
	}
	if _, err := tr.Send(ctx, "nobody", lease.Grant{}); !errors.Is(err, ErrUnknownNode) {
		t.Fatalf("unknown node: %v", err)
	}
	a.cut.Store(true)
	sctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := tr.Send(sctx, "a", lease.Grant{Term: 1, Router: "r", N: 2, Ack: 1, MS: 1000, List: lease.ListID(list)}); err == nil {
		t.Fatal("a cut grant answered")
	}
	if _, err := tr.Send(sctx, "gone", lease.Grant{Term: 1, Router: "r", N: 1, MS: 1000, Tenants: list, List: lease.ListID(list)}); err == nil {
		t.Fatal("an unresolvable node answered")
	}
}
