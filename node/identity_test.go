package node

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fenec-go/fenec/wire"
)

// TestNodeIdentity: a node makes its id at its first start and keeps it
// across restarts; GET /_admin/node answers it to the admin token only; an
// admin request naming another node's id changes nothing and says which
// node it reached; a damaged id file stops the node from starting.
func TestNodeIdentity(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, func(c *Config) { c.Dir = dir })
	id := n.s.ID()
	if !validID(id) {
		t.Fatalf("id %q", id)
	}
	got := n.admin("GET", "node", "").Obj(t)
	if got["id"] != id {
		t.Fatalf("GET /_admin/node: %v, want %s", got, id)
	}
	wantJSONError(t, n.do("GET", "/_admin/node", ""), 401)
	wantJSONError(t, n.do("GET", "/_admin/node", "", "Authorization", "Bearer wrong"), 401)
	wantJSONError(t, n.admin("POST", "node", ""), 405)
	if r := n.do("GET", "/_health", ""); strings.Contains(string(r.Body), id) {
		t.Fatalf("/_health tells the id to anyone: %s", r.Body)
	}

	people(t, n)
	other := strings.Repeat("ab", idLen/2)
	for _, req := range [][2]string{
		{"DELETE", "/_admin/tenants/a"},
		{"PUT", "/_admin/tenants/b"},
		{"POST", "/_admin/tenants/a/freeze"},
		{"POST", "/_admin/tenants/a/follow"},
		{"PUT", "/_admin/tenants/a/file"},
		{"POST", "/_admin/lease"},
	} {
		r := n.do(req[0], req[1], "", "Authorization", "Bearer "+adminToken, wire.HeaderNode, other)
		e := wantJSONError(t, r, 409)
		if e["node"] != id || !strings.Contains(e["error"].(string), other) {
			t.Fatalf("%s %s meant for another node: %v", req[0], req[1], e)
		}
	}
	if r := n.do("GET", "/t/a/c?count", ""); strings.TrimSpace(string(r.Body)) != `{"count":3}` {
		t.Fatalf("a after refused admin calls: %d %s", r.Status, r.Body)
	}
	if r := n.do("GET", "/_admin/tenants", "", "Authorization", "Bearer "+adminToken, wire.HeaderNode, id); r.Status != 200 {
		t.Fatalf("a request naming this node: %d %s", r.Status, r.Body)
	}
	// The id is asked by a router that may hold an old one: never refused.
	if r := n.do("GET", "/_admin/node", "", "Authorization", "Bearer "+adminToken, wire.HeaderNode, other); r.Status != 200 {
		t.Fatalf("GET /_admin/node naming another id: %d %s", r.Status, r.Body)
	}

	if err := n.s.Close(); err != nil {
		t.Fatal(err)
	}
	again := startNode(t, func(c *Config) { c.Dir = dir })
	if again.s.ID() != id {
		t.Fatalf("id after a restart %s, was %s", again.s.ID(), id)
	}
	if err := again.s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, IDFileName), []byte("not an id\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Dir, cfg.HTTP = dir, "127.0.0.1:0"
	if s, err := New(cfg); err == nil {
		s.Close()
		t.Fatal("a node started with a damaged id file")
	} else if !strings.Contains(err.Error(), IDFileName) {
		t.Fatalf("the refusal does not name the id file: %v", err)
	}
	// Two nodes never make the same id.
	if startNode(t, nil).s.ID() == id {
		t.Fatal("two directories, one id")
	}
}
