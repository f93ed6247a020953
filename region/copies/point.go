package copies

import (
	"context"
	"strings"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/wire"
)

// Point has every read copy of the tenants in tenants follow its tenant's
// primary now (after a failover or a move): a copy that follows another
// node, or has lost its role, is told again. Copies that do not answer are
// left for the next round. nodes is the directory's. Only one goroutine
// calls it (the router's repair loop).
func (c *Copies) Point(ctx context.Context, tenants map[string]global.Versioned[global.Tenant], nodes map[string]global.Versioned[global.Node]) {
	for name, rec := range tenants {
		t := rec.Value
		if t.ReadCopies == "" || t.State != global.StateActive || t.HeldBy != "" {
			continue
		}
		primary, ok := nodes[t.Node]
		if !ok || global.UsableNode(primary.Value) != nil {
			continue
		}
		want := wire.BaseURL(primary.Value.Addr)
		for _, n := range t.ReadCopies.Names() {
			if c.seen[name+"/"+n] == want {
				continue
			}
			node, ok := nodes[n]
			if !ok || global.UsableNode(node.Value) != nil {
				continue
			}
			c.point(ctx, name, n, node.Value, t.Node, primary.Value, want)
		}
	}
	c.forget(tenants)
}

// point has node n's read copy of tenant name follow primary (named
// primaryName, at want), unless it does already.
func (c *Copies) point(ctx context.Context, name, n string, node global.Node, primaryName string, primary global.Node, want string) {
	st, err := c.deps.Nodes.Replication(ctx, node, name)
	if err != nil {
		return // down, or lost the file: the next round asks again
	}
	if st.Role != "primary" && st.CopyRole == wire.RoleRead && st.From == want {
		c.note(name, n, want)
		return
	}
	if st.Role == "primary" {
		c.log.Warn("a read copy answers as a primary: left alone, drop it by hand", "tenant", name, "node", n)
		return
	}
	if err := c.deps.Nodes.FollowAs(ctx, node, n, name, primary, wire.RoleRead); err != nil {
		c.log.Warn("read copy not told to follow its primary", "tenant", name, "node", n, "err", err)
		return
	}
	c.note(name, n, want)
	c.log.Info("read copy follows the tenant's primary now", "tenant", name, "node", n, "primary", primaryName)
}

// note remembers that node's read copy of tenant follows primary.
func (c *Copies) note(tenant, node, primary string) {
	c.seen[tenant+"/"+node] = primary
}

// forget drops what it remembers of copies the directory no longer names.
func (c *Copies) forget(tenants map[string]global.Versioned[global.Tenant]) {
	for k := range c.seen {
		t, n, _ := strings.Cut(k, "/")
		if rec, ok := tenants[t]; !ok || !rec.Value.ReadCopies.Has(n) {
			delete(c.seen, k)
		}
	}
}
