package node

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/fenec-go/fenec/lease"
)

// A node writes to its audit log every grant that moves its binding —
// its first, a forced handoff to another directory — and every grant
// refused past the epoch bound (the forged grant at the largest epoch),
// naming the binding before and after and the grant's router; a renewal
// that moves nothing is not written.
func TestLeaseBindingAudited(t *testing.T) {
	auditPath := filepath.Join(t.TempDir(), "audit.log")
	n := startNode(t, func(c *Config) { c.Lease = true; c.Audit = auditPath })
	post := func(g lease.Grant, want int) {
		t.Helper()
		b, err := json.Marshal(g)
		if err != nil {
			t.Fatal(err)
		}
		if r := n.admin("POST", "lease", string(b)); r.Status != want {
			t.Fatalf("grant %+v: %d %s, want %d", g, r.Status, r.Body, want)
		}
	}
	list := []string{}
	g := lease.Grant{Term: 3, Router: "g-1", N: 1, MS: 5000, Tenants: list, List: lease.ListID(list), Dir: "global"}
	post(g, 200)
	g.N, g.Ack, g.Tenants = 2, 1, nil
	post(g, 200)
	forged := lease.Grant{Term: 1, Router: "forger", N: 1, MS: 60000, Tenants: list, List: lease.ListID(list), Dir: "region:eu",
		Epoch: 1<<64 - 1, Handoff: &lease.Handoff{From: "global", Force: true}}
	post(forged, 409)
	forged.Epoch = 2
	post(forged, 200)
	n.s.Close()
	b, err := os.ReadFile(auditPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`"what":"lease_bind"`,
		`binding (none) epoch 0 term 0 -> global epoch 0 term 3; grant of router \"g-1\"`,
		`"what":"lease_refused","request_id"`,
		`"status":409`,
		`past the bound`,
		`binding global epoch 0 term 3 -> region:eu epoch 2 term 1; grant of router \"forger\": dir \"region:eu\" epoch 2 term 1 n 1, handoff from \"global\" term 0 force true`,
	} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("audit log lacks %s:\n%s", want, b)
		}
	}
	if c := bytes.Count(b, []byte(`"what":"lease_bind"`)); c != 2 {
		t.Errorf("%d lease_bind lines, want 2 (a renewal moves nothing):\n%s", c, b)
	}
}
