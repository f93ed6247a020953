package tests

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fenec-go/fenec/tests/cluster"
)

func TestMain(m *testing.M) { cluster.Main(m) }

// wait bounds every wait of these tests: a bound on a hang, never an
// assertion about speed.
const wait = 60 * time.Second

// oneNode starts a router and one node recorded with it.
func oneNode(t *testing.T, routerArgs ...string) (*cluster.Router, *cluster.Node) {
	t.Helper()
	c := cluster.New(t)
	r := c.StartRouter("router", cluster.RouterOptions{Args: routerArgs})
	n := c.StartNode("n1", cluster.NodeOptions{})
	r.Register(n)
	return r, n
}

// wantStatus fails t unless r answered status.
func wantStatus(t *testing.T, r *cluster.Resp, status int, what string) {
	t.Helper()
	if r.Err != nil || r.Status != status {
		t.Fatalf("%s: %s, want %d", what, r, status)
	}
}

// wantError fails t unless r is status with a JSON {"error": ...} body.
func wantError(t *testing.T, r *cluster.Resp, status int, what string) map[string]any {
	t.Helper()
	wantStatus(t, r, status, what)
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("%s: Content-Type %q", what, ct)
	}
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil || m["error"] == nil || m["error"] == "" {
		t.Fatalf("%s: body %q is no JSON error", what, r.Body)
	}
	return m
}

// ids returns the "id" of each row, in order.
func ids(t *testing.T, r *cluster.Resp) string {
	t.Helper()
	var out []string
	for _, row := range r.Rows(t) {
		out = append(out, fmt.Sprint(row["id"]))
	}
	return strings.Join(out, ",")
}

// NewDirect is a data client of n that bypasses its proxy and the router.
func NewDirect(t *testing.T, n *cluster.Node) *cluster.Client {
	t.Helper()
	return cluster.NewClient(t, "http://"+n.Direct(), "")
}

// startSecondNode starts node n2 in r's cluster directory and records it.
func startSecondNode(t *testing.T, r *cluster.Router) *cluster.Node {
	t.Helper()
	n := cluster.New(t).StartNode("n2", cluster.NodeOptions{})
	r.Register(n)
	return n
}
