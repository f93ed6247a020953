package tests

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/fenec-go/fenec/tests/cluster"
)

// TestTenantsApart puts the same collection in two tenants on two nodes
// and in two tenants on one node: each answers only its own rows, ids and
// seq, whichever way the request came.
func TestTenantsApart(t *testing.T) {
	r, n1 := oneNode(t)
	c := r.Client()
	n2 := startSecondNode(t, r)
	r.Place("a", n1)
	r.Place("b", n2)
	r.Place("c", n1)
	for i, tn := range []string{"a", "b", "c"} {
		c.MustQuery(tn, "create collection docs (owner text)")
		for range i + 1 {
			c.MustQuery(tn, "put docs {owner: $1}", tn)
		}
	}
	for i, tn := range []string{"a", "b", "c"} {
		rows := c.MustQuery(tn, "get docs").Rows(t)
		if len(rows) != i+1 {
			t.Fatalf("%s holds %d rows, want %d", tn, len(rows), i+1)
		}
		for _, row := range rows {
			if row["owner"] != tn {
				t.Fatalf("%s answered a row of %v", tn, row["owner"])
			}
		}
		// Ids and seq are the tenant's own: each started at 1.
		if got := ids(t, c.MustQuery(tn, "get docs order id limit 1")); got != "1" {
			t.Fatalf("%s's first id is %s", tn, got)
		}
	}
	// A tenant is picked by the path alone: a query naming another
	// tenant's data finds nothing of it.
	if got := c.MustQuery("a", "get docs where owner = 'b' count"); strings.TrimSpace(string(got.Body)) != `{"count":0}` {
		t.Fatalf("a sees b's rows: %s", got.Body)
	}
	wantError(t, NewDirect(t, n2).Query("a", "get docs"), 404, "a asked of the node not holding it")
}

// TestSubscriptionEndsWithItsNode kills the node under a subscription
// through the router: the client's stream ends rather than hangs.
func TestSubscriptionEndsWithItsNode(t *testing.T) {
	r, n := oneNode(t)
	c := r.Client()
	r.Place("s", n)
	c.MustQuery("s", "create collection c (n int)")
	s, res := c.Subscribe("/t/s/c/changes")
	if s == nil {
		t.Fatalf("subscribe: %s", res)
	}
	if ev, err := s.Next(); err != nil || ev.Name != "seed" {
		t.Fatalf("seed: %+v %v", ev, err)
	}
	n.Kill()
	for {
		ev, err := s.Next()
		if err != nil {
			break // the stream ended: what the client needed to hear
		}
		if ev.Name != "error" && ev.Name != "change" {
			t.Fatalf("unexpected event %+v", ev)
		}
	}
}

// TestBackupRestoreThroughCLI backs a node's tenants up with the fenec
// binary, loses the node's data, restores it, and reads it back through
// the router.
func TestBackupRestoreThroughCLI(t *testing.T) {
	r, n := oneNode(t)
	c := r.Client()
	for _, tn := range []string{"x", "y"} {
		r.Place(tn, n)
		c.MustQuery(tn, "create collection c (who text @text)")
		c.MustQuery(tn, "put c [{who: $1}, {who: 'both'}]", tn)
	}
	dir := filepath.Join(t.TempDir(), "backup")
	fenec(t, "backup", "http://"+n.Direct(), "--tenants", dir, "--token", cluster.AdminToken)

	n.Kill()
	if err := os.RemoveAll(n.DataDir); err != nil {
		t.Fatal(err)
	}
	n.Restart()
	wantError(t, c.Query("x", "get c"), 404, "x on a node that lost its data")

	out := fenec(t, "restore", "http://"+n.Direct(), "--tenants", dir, "--token", cluster.AdminToken)
	if !strings.Contains(out, "restored 2 tenants") {
		t.Fatalf("restore said %q", out)
	}
	for _, tn := range []string{"x", "y"} {
		if got := ids(t, c.MustQuery(tn, "get c select id match who $1", tn)); got != "1" {
			t.Fatalf("%s after restore: %s", tn, got)
		}
		if got := c.MustQuery(tn, "get c count"); strings.TrimSpace(string(got.Body)) != `{"count":2}` {
			t.Fatalf("%s count after restore: %s", tn, got.Body)
		}
	}
}

// fenec runs the fenec binary and returns its output, failing t unless it
// exits 0.
func fenec(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	cmd := exec.CommandContext(ctx, cluster.Bins().Fenec, args...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("fenec %v: %v\n%s%s", args, err, out.String(), errb.String())
	}
	return out.String()
}

// TestFenecDev runs `fenec dev` as an operator would: it serves a router
// with its node already recorded, a tenant can be placed and used at
// once, and SIGTERM stops it cleanly (exit 0) keeping the data for the
// next start.
func TestFenecDev(t *testing.T) {
	c := cluster.New(t)
	addr := "127.0.0.1:" + strconv.Itoa(cluster.FreePorts(t, 1)[0])
	p := cluster.StartProc(t, c.Dir(), "dev", cluster.Bins().Fenec, "dev", "--data", filepath.Join(c.Dir(), "data"), "--listen", addr)
	cluster.WaitHealthy(t, p, "http://"+addr+"/_health")
	cl := cluster.NewClient(t, "http://"+addr, "")
	cluster.Eventually(t, wait, func() error {
		if r := cl.Do("GET", "/_shard/nodes", nil); !strings.Contains(string(r.Body), `"name":"local"`) {
			return fmt.Errorf("node not recorded yet: %s", r)
		}
		return nil
	})
	wantStatus(t, cl.Do("PUT", "/_shard/tenants/demo", nil), 201, "place")
	cl.MustQuery("demo", "create collection notes (body text @text)")
	// It says where the node, the directory and the tokens are, and they
	// are there: the node answers its admin token from the file, the etcd
	// member its health.
	where := map[string]string{}
	for _, line := range strings.Split(p.Log(), "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ": ")
		if ok {
			where[k] = strings.Fields(v)[0]
		}
	}
	tok, err := os.ReadFile(where["node admin token"])
	if err != nil || where["node"] == "" || where["etcd"] == "" {
		t.Fatalf("fenec dev did not say where its parts are (%v):\n%s", err, p.Log())
	}
	wantStatus(t, cluster.NewClient(t, where["node"], strings.TrimSpace(string(tok))).Do("GET", "/_admin/stats", nil), 200, "the dev node's stats with the token from its file")
	wantStatus(t, cluster.NewClient(t, where["etcd"], "").Do("GET", "/health", nil), 200, "the dev directory's etcd health")
	wantStatus(t, cl.Do("POST", "/t/demo/notes", `{"body": "hello from fenec"}`), 201, "insert")
	p.Stop()
	if !strings.Contains(p.Log(), "curl ") {
		t.Fatalf("fenec dev printed no example:\n%s", p.Log())
	}
	p.Restart()
	cluster.WaitHealthy(t, p, "http://"+addr+"/_health")
	cluster.Eventually(t, wait, func() error {
		r := cl.Query("demo", "get notes select id match body 'hello'")
		if r.Status != 200 || !strings.Contains(string(r.Body), `"id":1`) {
			return fmt.Errorf("after a restart: %s", r)
		}
		return nil
	})
	p.Stop()
}
