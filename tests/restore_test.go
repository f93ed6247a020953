package tests

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fenec-go/fenec/tests/cluster"
)

// fenecFails runs the fenec binary, fails t unless it exits non-zero, and
// returns what it printed.
func fenecFails(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	out, err := exec.CommandContext(ctx, cluster.Bins().Fenec, args...).CombinedOutput()
	if err == nil {
		t.Fatalf("fenec %v succeeded:\n%s", args, out)
	}
	return string(out)
}

// TestRestoreDamagedBackupKeepsTenant restores a damaged backup over a
// live tenant: the node refuses the image and the tenant is exactly as it
// was, every row and the tenant next to it too; a good backup then
// restores, ending the subscription open on the old file.
func TestRestoreDamagedBackupKeepsTenant(t *testing.T) {
	r, n := oneNode(t)
	c := r.Client()
	for _, tn := range []string{"x", "y"} {
		r.Place(tn, n)
		c.MustQuery(tn, "create collection c (who text @text)")
		c.MustQuery(tn, "put c [{who: 'one'}, {who: 'two'}]")
	}
	dir := filepath.Join(t.TempDir(), "backup")
	fenec(t, "backup", "http://"+n.Direct(), "--tenants", dir, "--token", cluster.AdminToken)
	for _, tn := range []string{"x", "y"} {
		c.MustQuery(tn, "put c {who: 'after the backup'}")
	}
	good, err := os.ReadFile(filepath.Join(dir, "x.fenec"))
	if err != nil {
		t.Fatal(err)
	}
	damaged := []struct {
		what string
		img  []byte
	}{
		{"cut short", good[:len(good)/2]},
		{"a byte flipped", flip(good, len(good)-40)},
		{"empty", nil},
	}
	for _, d := range damaged {
		if err := os.WriteFile(filepath.Join(dir, "x.fenec"), d.img, 0o644); err != nil {
			t.Fatal(err)
		}
		out := fenecFails(t, "restore", "http://"+n.Direct(), "--tenants", dir, "--token", cluster.AdminToken)
		res := c.Query("x", "get c select who order id")
		if res.Status != 200 {
			t.Fatalf("x after restoring a backup %s: %s", d.what, res)
		}
		if rows := res.Rows(t); len(rows) != 3 || rows[2]["who"] != "after the backup" {
			t.Fatalf("x after restoring a backup %s: %v", d.what, rows)
		}
		if !strings.Contains(out, "tenant x refused") {
			t.Fatalf("a backup %s: the failure does not name the tenant refused:\n%s", d.what, out)
		}
		if got := ids(t, c.MustQuery("x", "get c select id match who $1", "two")); got != "2" {
			t.Fatalf("x's text index after restoring a backup %s: %s", d.what, got)
		}
		// The good image beside it was restored all the same.
		if got := strings.TrimSpace(string(c.MustQuery("y", "get c count").Body)); got != `{"count":2}` {
			t.Fatalf("y beside a backup %s: %s", d.what, got)
		}
		c.MustQuery("y", "put c {who: 'after the backup'}")
	}
	ents, err := os.ReadDir(n.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.Contains(e.Name(), "restore") || strings.HasSuffix(e.Name(), ".install") {
			t.Fatalf("a refused restore left %s in the node's directory", e.Name())
		}
	}

	if err := os.WriteFile(filepath.Join(dir, "x.fenec"), good, 0o644); err != nil {
		t.Fatal(err)
	}
	s, res := c.Subscribe("/t/x/c/changes")
	if s == nil {
		t.Fatalf("subscribe: %s", res)
	}
	defer s.Close()
	if ev, err := s.Next(); err != nil || ev.Name != "seed" {
		t.Fatalf("seed: %+v %v", ev, err)
	}
	out := fenec(t, "restore", "http://"+n.Direct(), "--tenants", dir, "--token", cluster.AdminToken)
	if !strings.Contains(out, "restored 2 tenants") {
		t.Fatalf("restore said %q", out)
	}
	for {
		ev, err := s.Next()
		if err != nil {
			break // the old file's stream ended
		}
		if ev.Name == "change" {
			t.Fatalf("a change on the old file after the restore: %+v", ev)
		}
	}
	for _, tn := range []string{"x", "y"} {
		if got := strings.TrimSpace(string(c.MustQuery(tn, "get c count").Body)); got != `{"count":2}` {
			t.Fatalf("%s after a good restore: %s", tn, got)
		}
		if got := ids(t, c.MustQuery(tn, "get c select id match who $1", "two")); got != "2" {
			t.Fatalf("%s's text index after a good restore: %s", tn, got)
		}
		c.MustQuery(tn, "put c {who: 'after the restore'}")
	}
}

// flip returns b with the byte at i inverted.
func flip(b []byte, i int) []byte {
	out := append([]byte(nil), b...)
	out[i] ^= 0xff
	return out
}
