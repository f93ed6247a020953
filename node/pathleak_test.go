package node

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestErrorsShowNoPath damages a tenant's file in the middle: every
// answer about it, to a data client and to the admin token alike, says
// the file is damaged without showing where the node keeps it.
func TestErrorsShowNoPath(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, func(c *Config) { c.Dir = dir })
	people(t, n)
	for i := range 5 {
		n.q("a", "put c {name: $1, n: 10}", strings.Repeat("x", 100+i))
	}
	if err := n.s.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "a.fenec")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/3] ^= 0xff
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	n = startNode(t, func(c *Config) { c.Dir = dir })
	for _, r := range []*resp{
		n.query("a", "get c"),
		n.do("GET", "/t/a/c", ""),
		n.do("POST", "/t/a/c", `{"name": "z"}`),
		n.do("GET", "/t/a/_changes?since=0", ""),
		n.admin("GET", "tenants/a/file", ""),
		n.admin("GET", "tenants/a/replication", ""),
		n.admin("POST", "tenants/a/freeze", ""),
	} {
		if r.Status < 500 {
			t.Fatalf("a damaged file answered %d %s", r.Status, r.Body)
		}
		if strings.Contains(string(r.Body), dir) || strings.Contains(string(r.Body), "a.fenec") {
			t.Fatalf("an answer shows the node's path: %s", r.Body)
		}
		if !strings.Contains(string(r.Body), "damaged") {
			t.Fatalf("an answer does not say the file is damaged: %s", r.Body)
		}
	}
}
