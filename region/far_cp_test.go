package region

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/internal/testkit"
)

// farRegion is region eu's leading router linked to a global directory
// the test writes directly: nodes e1, e2 of eu and u1, u2 of us (records
// only: no node serves them).
type farRegion struct {
	e *cpRouter
	g *global.Store
}

func startFarRegion(t *testing.T) *farRegion {
	t.Helper()
	gd := global.NewMemory()
	t.Cleanup(func() { _ = gd.Close() })
	g := global.NewStore(gd)
	if _, err := g.Txn().PutRegion(0, global.Region{Name: "eu", Leaser: global.LeaserGlobal}).
		PutNode("e1", 0, global.Node{Addr: "http://127.0.0.1:1", Region: "eu"}).
		PutNode("e2", 0, global.Node{Addr: "http://127.0.0.1:2", Region: "eu"}).
		PutNode("u1", 0, global.Node{Addr: "http://127.0.0.1:3", Region: "us"}).
		PutNode("u2", 0, global.Node{Addr: "http://127.0.0.1:4", Region: "us"}).
		PutLeaseRecord(0, 1500).
		Commit(cpCtx(t)); err != nil {
		t.Fatal(err)
	}
	e := startCPRouter(t, func(c *Config) { c.ID, c.Region, c.Global = "eu-1", "eu", gd })
	return &farRegion{e: e, g: g}
}

func (l *farRegion) put(tb testing.TB, tx *global.Txn) {
	tb.Helper()
	if _, err := tx.Commit(cpCtx(tb)); err != nil {
		tb.Fatal(err)
	}
}

// farTarget is what the region's router forwards far tenant t to now:
// its primary's node and address, and the node of its copy a bounded
// read goes to first ("" for none).
func (l *farRegion) farTarget(t string) (primary, addr, near string, ok bool) {
	p := viewPlacements{w: l.e.rt.watcher, region: "eu"}
	tg, ok := p.Lookup(t)
	if c, cok := p.NearCopy(t); cok {
		near = c.Node
	}
	return tg.Node, tg.Addr, near, ok
}

// A tenant homed in us with a read copy on a node of eu is known to eu's
// router from its far records: it forwards it to the primary in us, sends
// its bounded reads to the copy in eu without --near, follows a failover
// of it, refuses changes of it naming the global tier, and forgets it once
// the copy is dropped. Its own tenant stays its own, its bounded reads
// sent to the primary without --near.
func TestLinkCopiesFarTenantsCP(t *testing.T) {
	l := startFarRegion(t)
	l.put(t, l.g.Txn().
		PutTenant("f1", 0, global.Tenant{Node: "u1", State: global.StateActive, Replica: "u2", ReadCopies: global.MakeNodeList("e1")}).
		PutTenant("t0", 0, global.Tenant{Node: "e1", State: global.StateActive, ReadCopies: global.MakeNodeList("e2")}).
		PutTenant("s1", 0, global.Tenant{Node: "u2", State: global.StateActive, Replica: "e2", Survive: global.SurviveRegion}))
	testkit.Eventually(t, cpWait, func() error {
		if p, addr, near, ok := l.farTarget("f1"); !ok || p != "u1" || addr != "http://127.0.0.1:3" || near != "e1" {
			return fmt.Errorf("f1 forwarded to %q at %q, bounded reads to %q (known %v)", p, addr, near, ok)
		}
		return nil
	})
	// A tenant of us surviving its region, its voting copy on e2: known
	// too (it has no read copy: every read of it goes to its primary).
	if p, _, near, ok := l.farTarget("s1"); !ok || p != "u2" || near != "" {
		t.Fatalf("s1 forwarded to %q, bounded reads to %q (known %v)", p, near, ok)
	}
	v := l.e.rt.watcher.View()
	if _, own := v.Tenant("f1"); own {
		t.Fatal("a far tenant among the region's own")
	}
	if _, own := v.Node("u1"); own {
		t.Fatal("a far node among the region's own")
	}
	if _, _, near, _ := l.farTarget("t0"); near != "" {
		t.Fatalf("an own tenant's bounded reads go to %q without --near", near)
	}

	// Changes of the far tenant are the global tier's.
	for _, c := range []struct{ method, path string }{
		{http.MethodPost, "tenants/f1/move"},
		{http.MethodDelete, "tenants/f1"},
		{http.MethodPut, "tenants/f1"},
	} {
		st, b := l.e.shard(t, c.method, c.path, map[string]any{"to": "e2"}, nil)
		if st != http.StatusConflict || !strings.Contains(string(b), "homed in region us") ||
			!strings.Contains(string(b), "global tier's leading router") {
			t.Errorf("%s %s on the region's router: %d %s", c.method, c.path, st, b)
		}
	}

	// A failover at the global tier: followed.
	at, err := l.g.GetTenant(cpCtx(t), "f1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.g.Failover(cpCtx(t), "f1", at, "u2", 3); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, cpWait, func() error {
		if p, addr, _, ok := l.farTarget("f1"); !ok || p != "u2" || addr != "http://127.0.0.1:4" {
			return fmt.Errorf("after the failover f1 forwarded to %q at %q (known %v)", p, addr, ok)
		}
		return nil
	})
	// The read copy dropped: forgotten; u2 stays, s1's node.
	at, err = l.g.GetTenant(cpCtx(t), "f1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.g.UpdateTenant(cpCtx(t), "f1", at, func(ten *global.Tenant) error { ten.ReadCopies = ""; return nil }); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, cpWait, func() error {
		v := l.e.rt.watcher.View()
		if _, _, _, ok := l.farTarget("f1"); ok || v.NumFarTenants() != 1 {
			return fmt.Errorf("f1 still known after its copy in eu was dropped")
		}
		if _, ok := v.FarNode("u1"); ok {
			return fmt.Errorf("u1, no far tenant's node, still held as a far node")
		}
		return nil
	})
	if _, own := l.e.rt.watcher.View().Tenant("t0"); !own {
		t.Fatal("the region's own tenant is not among its own")
	}
}
