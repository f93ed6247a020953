package repair

import (
	"context"
	"maps"
	"slices"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/wire"
)

// rejoin has node n's stale copies of tenants failed off it follow their
// new primaries (recorded as their copies when they have none), or deletes
// them when the tenant has another copy already. It reports whether every
// one was handled.
func (p *Repairer) rejoin(ctx context.Context, s *global.Store, n string) bool {
	tenants, _, err := s.ListTenants(ctx)
	if err != nil {
		return false
	}
	all := true
	for name, at := range tenants {
		rec := at.Value
		if rec.FailedFrom != n || rec.Node == n || rec.Replica == n {
			continue
		}
		s, err := p.deps.OwnTenant(ctx, s, name)
		if err != nil {
			continue // the other side repairs the region it owns
		}
		if rec.HeldBy != "" {
			all = false
			continue
		}
		if rec.Replica != "" {
			if err := p.RemoveStale(ctx, s, name, n, rec.Node, rec.Replica); err != nil {
				p.log.Warn("stale copy not deleted", "tenant", name, "node", n, "err", err)
				all = false
			}
			continue
		}
		if !p.follow(ctx, s, name, n, at) {
			all = false
		}
	}
	return all
}

// follow has node n's stale copy of tenant name (at, which has no copy)
// follow its new primary, and records it as the tenant's copy.
func (p *Repairer) follow(ctx context.Context, s *global.Store, name, n string, at global.Versioned[global.Tenant]) bool {
	rec := at.Value
	primary, err := s.GetNode(ctx, rec.Node)
	if err != nil {
		return false
	}
	// A file made to follow itself would take no more writes.
	node, err := p.deps.Apart(ctx, s, rec.Node, n)
	if err == nil {
		err = p.deps.Nodes.Follow(ctx, node, n, name, primary.Value)
	}
	if err != nil {
		p.log.Warn("stale copy not told to follow", "tenant", name, "node", n, "primary", rec.Node, "err", err)
		return false
	}
	done, err := s.UpdateTenant(ctx, name, at, func(t *global.Tenant) error {
		t.Replica = n
		return nil
	})
	if err != nil {
		return false
	}
	p.deps.Settle(ctx, done.Rev)
	p.log.Info("stale copy follows the new primary", "tenant", name, "node", n, "primary", rec.Node)
	return true
}

// replaceDamaged asks each copy's node for its copy; one the node reports
// damaged (its file fails its checks and does not open: it follows
// nothing and no failover can promote it) is dropped and a new copy made.
func (p *Repairer) replaceDamaged(ctx context.Context, s *global.Store, tenants map[string]global.Versioned[global.Tenant], nodes map[string]global.Versioned[global.Node]) {
	var (
		mu      sync.Mutex // guards damaged
		damaged = map[string]string{}
	)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(parallel)
	for name, at := range tenants {
		n, ok := nodes[at.Value.Replica]
		if at.Value.Replica == "" || !ok || at.Value.HeldBy != "" {
			continue
		}
		g.Go(func() error {
			if _, err := p.deps.Nodes.Replication(gctx, n.Value, name); wire.IsDamaged(err) {
				mu.Lock()
				damaged[name] = at.Value.Replica
				mu.Unlock()
			}
			return nil
		})
	}
	_ = g.Wait()
	for _, name := range slices.Sorted(maps.Keys(damaged)) {
		if err := p.dropDamaged(ctx, s, name, damaged[name]); err != nil {
			p.log.Warn("damaged copy not replaced: looked at again later", "tenant", name, "node", damaged[name], "err", err)
		}
	}
}

// dropDamaged forgets tenant t's copy on node replica, which its node
// reports damaged, makes a new one (the repair tries again if it cannot
// now), and deletes the damaged file unless the new copy took its place.
func (p *Repairer) dropDamaged(ctx context.Context, s *global.Store, t, replica string) error {
	s, err := p.deps.OwnTenant(ctx, s, t)
	if err != nil {
		return nil // the other side repairs what it owns
	}
	at, err := s.GetTenant(ctx, t)
	if err != nil || at.Value.Replica != replica || at.Value.HeldBy != "" {
		return nil // changed since: looked at again
	}
	done, err := s.UpdateTenant(ctx, t, at, func(rec *global.Tenant) error {
		rec.Replica, rec.ReplicaBehind = "", 0
		return nil
	})
	p.audit("drop damaged copy", t, replica, err, "its node reports the copy's file damaged: a new copy is made")
	if err != nil {
		return err
	}
	p.deps.Settle(ctx, done.Rev)
	p.log.Warn("damaged copy dropped: a new one is made", "tenant", t, "node", replica, "primary", at.Value.Node)
	if err := p.copyOwed(ctx, s, t); err != nil {
		p.log.Warn("no new copy for a damaged one yet: the repair tries again", "tenant", t, "err", err)
		p.Later(t)
	}
	if cur, err := s.GetTenant(ctx, t); err == nil && !PlacesOn(cur.Value, replica) {
		if err := p.RemoveStale(ctx, s, t, replica, cur.Value.Node, cur.Value.Replica); err != nil {
			p.log.Warn("damaged copy's file not deleted", "tenant", t, "node", replica, "err", err)
		}
	}
	return nil
}
