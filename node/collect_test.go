package node

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/fenec-go/fenec/wire"
)

// DELETE /_admin/tenants/<t>?if=frozen deletes only a file open and
// frozen: one not frozen (thawed, or never frozen) is kept with 412, an
// unknown one is 404, another condition 400, and without the admin token
// nothing is deleted. The replication status says whether a file is
// frozen.
func TestDeleteOnlyFrozen(t *testing.T) {
	n := startNode(t, nil)
	people(t, n)
	frozen := func() bool {
		t.Helper()
		var st wire.Replication
		r := n.admin("GET", "tenants/a/replication", "")
		if r.Status != 200 {
			t.Fatalf("replication: %d %s", r.Status, r.Body)
		}
		if err := json.Unmarshal(r.Body, &st); err != nil {
			t.Fatal(err)
		}
		return st.Frozen
	}
	if frozen() {
		t.Fatal("a file never frozen says it is")
	}
	wantJSONError(t, n.admin("DELETE", "tenants/a?if=frozen", ""), 412)
	wantJSONError(t, n.admin("DELETE", "tenants/a?if=thawed", ""), 400)
	if r := n.admin("POST", "tenants/a/freeze", ""); r.Status != 200 {
		t.Fatalf("freeze: %d %s", r.Status, r.Body)
	}
	if !frozen() {
		t.Fatal("a frozen file says it is not")
	}
	wantJSONError(t, n.do("DELETE", "/_admin/tenants/a?if=frozen", ""), 401)
	wantJSONError(t, n.do("DELETE", "/_admin/tenants/a?if=frozen", "", "Authorization", "Bearer wrong"), 401)
	if r := n.admin("POST", "tenants/a/thaw", ""); r.Status != 200 {
		t.Fatalf("thaw: %d %s", r.Status, r.Body)
	}
	wantJSONError(t, n.admin("DELETE", "tenants/a?if=frozen", ""), 412)
	if r := n.do("GET", "/t/a/c?count", ""); r.Status != 200 {
		t.Fatalf("a thawed file refused for deletion still serves: %d %s", r.Status, r.Body)
	}
	if r := n.admin("POST", "tenants/a/freeze", ""); r.Status != 200 {
		t.Fatalf("freeze: %d %s", r.Status, r.Body)
	}
	if r := n.admin("DELETE", "tenants/a?if=frozen", ""); r.Status != 204 {
		t.Fatalf("delete a frozen file: %d %s", r.Status, r.Body)
	}
	if _, err := os.Stat(filepath.Join(n.cfg.Dir, "a.fenec")); !os.IsNotExist(err) {
		t.Fatalf("the frozen file deleted is still there: %v", err)
	}
	wantJSONError(t, n.admin("DELETE", "tenants/a?if=frozen", ""), 404)
	if r := n.admin("DELETE", "tenants/Bad?if=frozen", ""); r.Status != 400 {
		t.Fatalf("a bad name: %d %s", r.Status, r.Body)
	}
}

// A damaged file's refusal says "damaged": true, which is how a router
// tells a copy to replace from one that is only unreachable or behind.
func TestDamagedFileSaysSo(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, func(c *Config) { c.Dir = dir })
	people(t, n)
	for i := range 5 {
		n.q("a", "put c {name: $1, n: 10}", string(rune('k'+i)))
	}
	if err := n.s.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "a.fenec")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x10
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	n = startNode(t, func(c *Config) { c.Dir = dir })
	r := n.admin("GET", "tenants/a/replication", "")
	var body struct {
		Damaged bool `json:"damaged"`
	}
	if r.Status < 500 || json.Unmarshal(r.Body, &body) != nil || !body.Damaged {
		t.Fatalf("a damaged file's replication: %d %s", r.Status, r.Body)
	}
	n.mkTenant("whole")
	body.Damaged = false
	if r := n.admin("GET", "tenants/nobody/replication", ""); r.Status != 404 || json.Unmarshal(r.Body, &body) != nil || body.Damaged {
		t.Fatalf("an unknown tenant: %d %s", r.Status, r.Body)
	}
	// The damaged file can be deleted, and a new one made in its place.
	if r := n.admin("DELETE", "tenants/a", ""); r.Status != 204 {
		t.Fatalf("delete a damaged file: %d %s", r.Status, r.Body)
	}
	n.mkTenant("a")
}
