package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/fenec-go/fenec/tests/cluster"
)

const replToken = "e2e-replication-token"

// replPair starts a router and nodes n1 and n2 under --sync always with a
// replication token, both recorded, n2 named n1's standby.
func replPair(t *testing.T) (*cluster.Router, *cluster.Node, *cluster.Node) {
	t.Helper()
	c := cluster.New(t)
	r := c.StartRouter("router", cluster.RouterOptions{})
	args := []string{"--sync", "always", "--replication-token", replToken}
	n1 := c.StartNode("n1", cluster.NodeOptions{Args: args})
	n2 := c.StartNode("n2", cluster.NodeOptions{Args: args})
	r.Register(n1)
	r.Register(n2)
	wantStatus(t, r.Client().Do("PUT", "/_shard/nodes/n1", map[string]any{"standby": "n2"}), 201, "name n2 n1's standby")
	return r, n1, n2
}

// placement is a tenant's row in GET /_shard/tenants.
func placement(t *testing.T, c *cluster.Client, tenant string) map[string]any {
	t.Helper()
	for _, row := range c.Do("GET", "/_shard/tenants", nil).Rows(t) {
		if row["name"] == tenant {
			return row
		}
	}
	t.Fatalf("tenant %s not listed", tenant)
	return nil
}

// replState reads a tenant's role and seq on a node.
func replState(t *testing.T, n *cluster.Node, tenant string) (role string, seq, history string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cluster.RequestWait)
	defer cancel()
	st, err := n.AdminAPI().Replication(ctx, tenant)
	if err != nil {
		return "", "", ""
	}
	return st.Role, strconv.FormatUint(st.Seq, 10), strconv.FormatUint(st.History, 10)
}

// caughtUp waits until the copy on n holds what the primary p holds.
func caughtUp(t *testing.T, tenant string, p, n *cluster.Node) {
	t.Helper()
	cluster.Eventually(t, wait, func() error {
		_, pseq, ph := replState(t, p, tenant)
		role, seq, h := replState(t, n, tenant)
		if role != "replica" || seq != pseq || h != ph {
			return fmt.Errorf("copy of %s on %s: %s at %s/%s, primary at %s/%s", tenant, n.Name, role, seq, h, pseq, ph)
		}
		return nil
	})
}

// TestFailoverByHandUnderWriter kills a --sync always primary under a
// writer, fails it over by hand through the router, and finds every
// acknowledged write on the promoted copy; writes go on there. The old
// node, back, follows the new primary and refuses writes.
func TestFailoverByHandUnderWriter(t *testing.T) {
	r, n1, n2 := replPair(t)
	c := r.Client()
	r.Place("w", n1)
	if p := placement(t, c, "w"); p["replica"] != "n2" {
		t.Fatalf("placed %v", p)
	}
	c.MustQuery("w", "create collection c (k int @unique)")
	w := startWriter(t, c, "w")
	cluster.Eventually(t, wait, func() error {
		if n := w.count(); n < 50 {
			return fmt.Errorf("%d writes acknowledged before the kill", n)
		}
		return nil
	})
	n1.Kill()
	atKill := w.count()
	fo := c.Do("POST", "/_shard/nodes/n1/failover", nil)
	wantStatus(t, fo, 200, "failover")
	var res struct {
		Node     string
		Promoted []string
		Failed   []map[string]any
	}
	if err := json.Unmarshal(fo.Body, &res); err != nil || !slices.Equal(res.Promoted, []string{"w"}) || len(res.Failed) != 0 {
		t.Fatalf("failover answer %s (%v)", fo.Body, err)
	}
	cluster.Eventually(t, wait, func() error {
		if n := w.count(); n < atKill+50 {
			return fmt.Errorf("%d writes acknowledged after the failover, want 50", n-atKill)
		}
		return nil
	})
	w.stop()
	w.mu.Lock()
	acked, refusals := w.acked, w.status
	w.mu.Unlock()
	t.Logf("%d writes acknowledged, %d before the kill; refusals by status %v", len(acked), atKill, refusals)
	for _, cl := range []*cluster.Client{c, NewDirect(t, n2)} {
		have := map[int]int{}
		for _, row := range cl.MustQuery("w", "get c select k").Rows(t) {
			k, _ := strconv.Atoi(fmt.Sprint(row["k"]))
			have[k]++
		}
		for _, k := range acked {
			if have[k] != 1 {
				t.Fatalf("%s: acknowledged write k=%d (Fenec-Seq %s) is there %d times", cl.Base(), k, w.seqs[k], have[k])
			}
		}
	}
	if p := placement(t, c, "w"); p["node"] != "n2" {
		t.Fatalf("after the failover %v", p)
	}

	// The old node comes back: the repair has its stale file follow n2.
	n1.Restart()
	cluster.Eventually(t, wait, func() error {
		if p := placement(t, c, "w"); p["replica"] != "n1" {
			return fmt.Errorf("not copied back onto n1: %v", p)
		}
		return nil
	})
	caughtUp(t, "w", n2, n1)
	refused := NewDirect(t, n1).Do("POST", "/t/w/c", `{"k": -1}`)
	m := wantError(t, refused, 503, "write on the old primary")
	if refused.Header.Get("Fenec-Refused") != "replica" || !strings.Contains(fmt.Sprint(m["error"]), "copy of tenant w") {
		t.Fatalf("old primary's refusal: %s %v", refused, refused.Header)
	}
	wantStatus(t, c.Do("POST", "/t/w/c", `{"k": -2}`), 201, "write through the router after the repair")
}

// TestRestoreInPlaceThenFailover backs up the primary's node with the
// fenec binary, writes on, restores the backup in place: the copy takes
// the restored file, and a failover then promotes it with the restored
// rows only.
func TestRestoreInPlaceThenFailover(t *testing.T) {
	r, n1, n2 := replPair(t)
	c := r.Client()
	for _, tn := range []string{"x", "y"} {
		r.Place(tn, n1)
		c.MustQuery(tn, "create collection c (who text)")
		c.MustQuery(tn, "put c [{who: $1}, {who: 'both'}]", tn)
	}
	dir := filepath.Join(t.TempDir(), "backup")
	fenec(t, "backup", "http://"+n1.Direct(), "--tenants", dir, "--token", cluster.AdminToken)
	for _, tn := range []string{"x", "y"} {
		c.MustQuery(tn, "put c {who: 'after the backup'}")
		caughtUp(t, tn, n1, n2)
	}
	out := fenec(t, "restore", "http://"+n1.Direct(), "--tenants", dir, "--token", cluster.AdminToken)
	if !strings.Contains(out, "restored 2 tenants") {
		t.Fatalf("restore said %q", out)
	}
	for _, tn := range []string{"x", "y"} {
		if got := strings.TrimSpace(string(c.MustQuery(tn, "get c count").Body)); got != `{"count":2}` {
			t.Fatalf("%s after restore: %s", tn, got)
		}
		cluster.Eventually(t, wait, func() error {
			got := strings.TrimSpace(string(NewDirect(t, n2).MustQuery(tn, "get c count").Body))
			if got != `{"count":2}` {
				return fmt.Errorf("copy of %s holds %s", tn, got)
			}
			return nil
		})
		caughtUp(t, tn, n1, n2)
	}
	n1.Kill()
	wantStatus(t, c.Do("POST", "/_shard/nodes/n1/failover", nil), 200, "failover after a restore")
	for _, tn := range []string{"x", "y"} {
		rows := c.MustQuery(tn, "get c select who order id").Rows(t)
		if len(rows) != 2 || rows[0]["who"] != tn || rows[1]["who"] != "both" {
			t.Fatalf("%s after the failover: %v", tn, rows)
		}
		c.MustQuery(tn, "put c {who: 'on n2'}")
	}
}

// failover fails node over through the router (force as given) and
// answers what it promoted and what it refused, by tenant.
func failover(t *testing.T, c *cluster.Client, node string, force bool) (int, []string, map[string]string) {
	t.Helper()
	var body any
	if force {
		body = map[string]any{"force": true}
	}
	res := c.Do("POST", "/_shard/nodes/"+node+"/failover", body)
	var out struct {
		Promoted []string `json:"promoted"`
		Failed   []struct {
			Tenant string `json:"tenant"`
			Why    string `json:"why"`
		} `json:"failed"`
	}
	if err := json.Unmarshal(res.Body, &out); err != nil {
		t.Fatalf("failover of %s: %s", node, res)
	}
	failed := map[string]string{}
	for _, f := range out.Failed {
		failed[f.Tenant] = f.Why
	}
	slices.Sort(out.Promoted)
	return res.Status, out.Promoted, failed
}

// Promotion's refusals, with real processes and files on disk: a copy
// whose file was put in its place by hand (another tenant's) is refused
// until the failover is forced; a promoted copy stays its tenant's
// primary across a kill and restart of its node; an old primary's copy
// that never heard from the new primary is not promoted, since it would
// take back every write after the failover.
func TestPromotionRefusalsWithRealFiles(t *testing.T) {
	r, n1, n2 := replPair(t)
	c := r.Client()
	for _, tn := range []string{"lin", "kept"} {
		r.Place(tn, n1)
		c.MustQuery(tn, "create collection c (who text)")
		c.MustQuery(tn, "put c {who: $1}", tn)
		caughtUp(t, tn, n1, n2)
	}

	// n2's copy of lin is replaced by hand, while n2 is down, with its
	// copy of kept: the same bytes, another lineage.
	n2.Kill()
	foreign, err := os.ReadFile(filepath.Join(n2.DataDir, "kept.fenec"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(n2.DataDir, "lin.fenec"), foreign, 0o644); err != nil {
		t.Fatal(err)
	}
	n1.Kill() // the primary is gone before the copy comes back to learn better
	n2.Restart()
	st, promoted, failed := failover(t, c, "n1", false)
	if st != 502 || !slices.Equal(promoted, []string{"kept"}) || !strings.Contains(failed["lin"], "lineage") {
		t.Fatalf("failover over a file put in place by hand: %d promoted %v refused %v", st, promoted, failed)
	}
	if p := placement(t, c, "lin"); p["node"] != "n1" {
		t.Fatalf("a refused promotion moved lin: %v", p)
	}
	st, promoted, failed = failover(t, c, "n1", true)
	if st != 200 || !slices.Equal(promoted, []string{"lin"}) || len(failed) != 0 {
		t.Fatalf("forced failover: %d promoted %v refused %v", st, promoted, failed)
	}
	// Forced, the file put in place is lin now, whatever it holds.
	if got := c.MustQuery("lin", "get c select who").Rows(t); len(got) != 1 || got[0]["who"] != "kept" {
		t.Fatalf("lin after the forced failover: %v", got)
	}

	// The promotion outlives a kill of the promoted node.
	wantStatus(t, c.Do("POST", "/t/kept/c", `{"who": "after"}`), 201, "write on the promoted copy")
	n2.Kill()
	n2.Restart()
	if role, _, _ := replState(t, n2, "kept"); role != "primary" {
		t.Fatalf("kept on n2 after a restart: %q", role)
	}
	cluster.Eventually(t, wait, func() error {
		if res := c.Do("POST", "/t/kept/c", `{"who": "after restart"}`); res.Status != 201 {
			return fmt.Errorf("write after the restart: %s", res)
		}
		return nil
	})
	if got := c.MustQuery("kept", "get c select who").Rows(t); len(got) != 3 {
		t.Fatalf("kept after n2's restart: %v", got)
	}

	// n2 dies before n1 comes back: n1's file of kept is the old
	// primary's, which never heard from n2 and lacks the writes n2 took
	// after the failover. n2's failover does not promote it: kept waits
	// for n2, where its rows are.
	n2.Kill()
	n1.Restart()
	st, promoted, failed = failover(t, c, "n2", false)
	if st != 502 || slices.Contains(promoted, "kept") || failed["kept"] == "" {
		t.Fatalf("failover onto the old primary's file: %d promoted %v refused %v", st, promoted, failed)
	}
	if p := placement(t, c, "kept"); p["node"] != "n2" {
		t.Fatalf("kept left n2 for the old primary's file: %v", p)
	}
	t.Logf("refused: %s", failed["kept"])
}
