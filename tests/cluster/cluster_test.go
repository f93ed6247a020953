package cluster_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fenec-go/fenec/tests/cluster"
)

func TestMain(m *testing.M) { cluster.Main(m) }

const wait = 60 * time.Second

// short is a deadline for a request the test expects to go unanswered:
// a paused or cut-off node answers nothing however long one waits.
const short = 300 * time.Millisecond

func unanswered(t *testing.T, c *cluster.Client, what string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), short)
	defer cancel()
	r := c.DoCtx(ctx, "GET", "/_health", nil)
	if r.Err == nil || !errors.Is(r.Err, context.DeadlineExceeded) {
		t.Fatalf("%s: answered %s", what, r)
	}
}

func healthy(t *testing.T, c *cluster.Client, what string) {
	t.Helper()
	cluster.Eventually(t, wait, func() error {
		r := c.Do("GET", "/_health", nil)
		if r.Err != nil || r.Status != 200 {
			return errors.New(what + ": " + r.String())
		}
		return nil
	})
}

// TestNodeControls drives one node through every control the harness
// gives: cut and heal, pause and continue, kill and restart, stop.
func TestNodeControls(t *testing.T) {
	c := cluster.New(t)
	n := c.StartNode("n1", cluster.NodeOptions{})
	viaProxy := cluster.NewClient(t, n.URL(), "")
	direct := cluster.NewClient(t, "http://"+n.Direct(), "")
	healthy(t, viaProxy, "through the proxy")

	n.Cut()
	unanswered(t, viaProxy, "cut")
	healthy(t, direct, "direct while cut")
	n.Heal()
	healthy(t, viaProxy, "healed")

	n.Pause()
	unanswered(t, direct, "paused")
	n.Continue()
	healthy(t, direct, "continued")

	if r := n.Admin().Do("PUT", "/_admin/tenants/kept", nil); r.Status != 201 {
		t.Fatalf("create: %s", r)
	}
	n.Kill()
	if n.Running() {
		t.Fatal("running after Kill")
	}
	n.Restart()
	if r := n.Admin().Do("GET", "/_admin/tenants", nil); !strings.Contains(string(r.Body), `"kept"`) {
		t.Fatalf("tenants after a restart: %s", r)
	}
	n.Stop()
	if n.Running() {
		t.Fatal("running after Stop")
	}
	if !strings.Contains(n.Log(), "node stopped") {
		t.Fatalf("no clean stop in the log:\n%s", n.Log())
	}
}

// TestRouterControls restarts a router on its own directory.
func TestRouterControls(t *testing.T) {
	c := cluster.New(t)
	r := c.StartRouter("r1", cluster.RouterOptions{})
	n := c.StartNode("n1", cluster.NodeOptions{})
	r.Register(n)
	r.Kill()
	r.Restart()
	if got := r.Client().Do("GET", "/_shard/nodes", nil); !strings.Contains(string(got.Body), `"n1"`) {
		t.Fatalf("nodes after a killed router restarted: %s", got)
	}
	r.Stop()
}
