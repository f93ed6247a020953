package region

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fenec-go/fenec/global"
)

// A node's record written again while a tenant's file is made on it (its
// id learned, the leasing router marking it) does not refuse the place;
// the name given to another node meanwhile does, and the file made on the
// first goes again.
func TestPlaceWhileNodeRecordChangesCP(t *testing.T) {
	n1, n2 := startCPNode(t), startCPNode(t)
	r := startCPRouter(t, nil)
	r.addNode(t, "n1", n1)

	placeHeld := func(tenant string, during func()) (int, []byte) {
		t.Helper()
		hold := make(chan struct{})
		n1.holdCreate.Store(&hold)
		defer n1.holdCreate.Store(nil)
		type answer struct {
			st int
			b  []byte
		}
		done := make(chan answer, 1)
		go func() {
			st, b := r.shard(t, http.MethodPut, "tenants/"+tenant, map[string]any{"node": "n1"}, nil)
			done <- answer{st, b}
		}()
		select {
		case <-n1.creating:
		case <-time.After(10 * time.Second):
			t.Fatal("the router never asked n1 for the file")
		}
		during()
		close(hold)
		a := <-done
		return a.st, a.b
	}

	st, b := placeHeld("acme", func() {
		rev, err := updateNode(cpCtx(t), r.rt.store, "n1", func(*global.Node) bool { return true })
		if err != nil || rev == 0 {
			t.Fatalf("write n1's record again: %d %v", rev, err)
		}
	})
	if st != http.StatusCreated {
		t.Fatalf("place while n1's record was written again: %d %s", st, b)
	}
	if at, err := r.rt.store.GetTenant(cpCtx(t), "acme"); err != nil || at.Value.Node != "n1" {
		t.Fatalf("acme's record: %+v %v", at.Value, err)
	}

	st, b = placeHeld("beta", func() {
		r.addNode(t, "n1", n2) // the name now names another node
	})
	if st == http.StatusCreated {
		t.Fatalf("place recorded on a name that moved to another node: %s", b)
	}
	if _, err := r.rt.store.GetTenant(cpCtx(t), "beta"); err == nil {
		t.Fatal("beta recorded")
	}
	if st, b := n1.admin(t, http.MethodGet, "/_admin/tenants", nil); st != http.StatusOK || strings.Contains(string(b), `"beta"`) || !strings.Contains(string(b), `"acme"`) {
		t.Fatalf("n1's tenants after the refused place: %d %s", st, b)
	}
}
