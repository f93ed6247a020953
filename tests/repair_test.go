package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fenec-go/fenec/tests/cluster"
)

// TestDamagedCopyReplaced damages a copy's file on disk (a bit flipped
// while its node is killed) under a router run with --replicas and
// --audit: started again, the node refuses the file as damaged, and the
// router's repair drops that copy and makes a new one, which holds every
// write; the tenant keeps its copy, and the audit log says what the
// repair did.
func TestDamagedCopyReplaced(t *testing.T) {
	c := cluster.New(t)
	auditPath := filepath.Join(t.TempDir(), "audit.log")
	r := c.StartRouter("router", cluster.RouterOptions{Args: []string{"--replicas", "--audit", auditPath}})
	args := []string{"--sync", "always", "--replication-token", replToken}
	n1 := c.StartNode("n1", cluster.NodeOptions{Args: args})
	n2 := c.StartNode("n2", cluster.NodeOptions{Args: args})
	r.Register(n1)
	r.Register(n2)
	cl := r.Client()
	r.Place("d", n1)
	cl.MustQuery("d", "create collection c (k int, s text)")
	for k := range 30 {
		cl.MustQuery("d", "put c {k: $1, s: $2}", k, strings.Repeat("x", 40))
	}
	if p := placement(t, cl, "d"); p["replica"] != "n2" {
		t.Fatalf("placed %v", p)
	}
	caughtUp(t, "d", n1, n2)

	n2.Proc.Kill()
	path := filepath.Join(n2.DataDir, "d.fenec")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x04
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	n2.Restart()
	cl.MustQuery("d", "put c {k: 30, s: 'after the damage'}")

	cluster.Eventually(t, wait, func() error {
		if p := placement(t, cl, "d"); p["node"] != "n1" || p["replica"] != "n2" {
			return fmt.Errorf("placement %v", p)
		}
		_, pseq, ph := replState(t, n1, "d")
		role, seq, h := replState(t, n2, "d")
		if role != "replica" || seq != pseq || h != ph {
			return fmt.Errorf("copy on n2: %q at %s/%s, primary at %s/%s", role, seq, h, pseq, ph)
		}
		return nil
	})
	rows := NewDirect(t, n2).Do("GET", "/t/d/c?count", nil)
	if rows.Status != 200 || strings.TrimSpace(string(rows.Body)) != `{"count":31}` {
		t.Fatalf("the new copy holds %s", rows)
	}
	cluster.Eventually(t, wait, func() error {
		a, err := os.ReadFile(auditPath)
		if err != nil {
			return err
		}
		if !strings.Contains(string(a), `"what":"drop damaged copy","tenant":"d","node":"n2"`) {
			return fmt.Errorf("the audit log has no dropped copy:\n%s", a)
		}
		return nil
	})
	if log := r.Proc.Log(); !strings.Contains(log, "damaged copy dropped: a new one is made") {
		t.Fatalf("the router's log does not say it dropped the copy:\n%s", log)
	}
}
