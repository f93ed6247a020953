package region

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/region/failover"
	"github.com/fenec-go/fenec/region/forward"
	"github.com/fenec-go/fenec/region/nodeapi"
)

// viewPlacements is the forwarder's Placements over the router's Watcher:
// one lock-free lookup in the current immutable view per request. A tenant
// being moved is served by its source (the record's Node) until the move
// flips it. On a region's router, a tenant that is not the region's own
// is looked up among its far records (global.Far): a tenant homed in
// another region with a copy in this one, forwarded to its primary there.
//
// near is the router's readers' region (--near): NearCopy names a
// tenant's read copy on a node there. region is the region a region's
// router serves: its far tenants' bounded reads go to their copy there
// even without --near, since that copy is why the region knows them.
type viewPlacements struct {
	w      *global.Watcher
	near   string
	region string
}

// placed is tenant's record and its primary's node as v holds them: the
// region's own, or a far tenant's and its far node.
func placed(v *global.View, tenant string) (global.Tenant, global.Node, bool) {
	if t, ok := v.Tenant(tenant); ok {
		n, ok := v.Node(t.Node)
		return t, n, ok
	}
	t, ok := v.FarTenant(tenant)
	if !ok {
		return t, global.Node{}, false
	}
	n, ok := v.FarNode(t.Node)
	return t, n, ok
}

// NearCopy implements forward.CopyPlacements: the first of tenant's read
// copies on a node of the router's readers' region (of a far tenant, of
// the router's own region unless --near names another).
func (p viewPlacements) NearCopy(tenant string) (forward.Target, bool) {
	v := p.w.View()
	if v == nil {
		return forward.Target{}, false
	}
	t, ok := v.Tenant(tenant)
	near := p.near
	if !ok {
		if t, ok = v.FarTenant(tenant); ok && near == "" {
			near = p.region
		}
	}
	if !ok || near == "" || t.ReadCopies == "" {
		return forward.Target{}, false
	}
	for _, name := range t.ReadCopies.Names() {
		n, ok := v.Node(name)
		if !ok || n.Region != near || !n.Lapsed.IsZero() {
			continue
		}
		if err := global.UsableNode(n); err != nil {
			return forward.Target{Node: name, Refused: err}, true
		}
		return forward.Target{Node: name, Addr: n.Addr, Token: n.Token}, true
	}
	return forward.Target{}, false
}

// Lookup implements Placements. A tenant left on a node recorded lapsed
// carries its unavailability (failover.Unavailable).
func (p viewPlacements) Lookup(tenant string) (forward.Target, bool) {
	v := p.w.View()
	if v == nil {
		return forward.Target{}, false
	}
	t, n, ok := placed(v, tenant)
	if !ok {
		return forward.Target{}, false
	}
	if err := global.UsableNode(n); err != nil {
		return forward.Target{Node: t.Node, Refused: err}, true
	}
	return forward.Target{Node: t.Node, Addr: n.Addr, Token: n.Token, Unavailable: failover.Unavailable(v, tenant, t, n)}, true
}

// Ready implements Placements: the directory's first list has arrived.
func (p viewPlacements) Ready() bool {
	select {
	case <-p.w.Ready():
		return true
	default:
		return false
	}
}

// cutOnFailover returns the Watcher callback that ends what the forwarder
// has out to a node as soon as the directory shows a tenant failed over off
// it (a far tenant too, on a region's router). Every router runs it,
// leading or not; a move or a placement cuts nothing.
func cutOnFailover(w *global.Watcher, f *forward.Forwarder, log *slog.Logger) func(global.TenantChange) {
	return func(c global.TenantChange) {
		from, ok := c.FailedOver()
		if !ok || c.New == nil {
			return
		}
		tg := forward.Target{Node: c.New.Node}
		if v := w.View(); v != nil {
			n, ok := v.Node(c.New.Node)
			if c.Far { // a far tenant: its primary's node is a far node
				n, ok = v.FarNode(c.New.Node)
			}
			if ok {
				tg.Addr, tg.Token, tg.Refused = n.Addr, n.Token, global.UsableNode(n)
			}
		}
		log.Info("cut requests to a failed-over node", "node", from, "tenant", c.Name, "to", tg.Node)
		f.Cut(from, map[string]forward.Target{c.Name: tg})
	}
}

// nodeBytes is one node's bytes on disk per tenant and in all, or why they
// could not be read.
type nodeBytes struct {
	name  string
	sizes map[string]int64
	bytes int64
	err   error
}

// measureEach asks every node its tenants' sizes, at most limit at once,
// and returns each node's sizes and total (or error), in name order.
func measureEach(ctx context.Context, nc *nodeapi.Client, nodes map[string]global.Node, limit int) []nodeBytes {
	names := make([]string, 0, len(nodes))
	for n := range nodes {
		names = append(names, n)
	}
	slices.Sort(names)
	out := make([]nodeBytes, len(names))
	var mu sync.Mutex // guards out's elements as they are filled
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(limit)
	for i, name := range names {
		g.Go(func() error {
			sizes, err := nc.Sizes(gctx, nodes[name])
			var sum int64
			for _, b := range sizes {
				sum += b
			}
			mu.Lock()
			out[i] = nodeBytes{name: name, sizes: sizes, bytes: sum, err: err}
			mu.Unlock()
			return nil // one node's failure leaves the others to be measured
		})
	}
	_ = g.Wait()
	return out
}

// leastBytes picks the node with the fewest bytes on disk among those that
// answered (ties by name); ErrNoCandidate when none did.
func leastBytes(measured []nodeBytes) (string, error) {
	var ok []nodeBytes
	var lastErr error
	for _, m := range measured {
		if m.err != nil {
			lastErr = m.err
			continue
		}
		ok = append(ok, m)
	}
	if len(ok) == 0 {
		if lastErr != nil {
			return "", fmt.Errorf("no node answered its sizes: %w", lastErr)
		}
		return "", ErrNoCandidate
	}
	best := slices.MinFunc(ok, func(a, b nodeBytes) int {
		return cmp.Or(cmp.Compare(a.bytes, b.bytes), cmp.Compare(a.name, b.name))
	})
	return best.name, nil
}
