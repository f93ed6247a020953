package region

import (
	"context"
	"sync"
	"time"

	"github.com/fenec-go/fenec/global"
)

// Repair: a node failed over that answers again has its stale copies
// follow the tenants' new primaries, and a tenant that could not be given
// a copy is tried again a few times, backing off.
const (
	repairEvery    = 2 * time.Second  // how often the repair looks
	repairFirst    = 5 * time.Second  // first wait before a copy is asked again
	repairMaxWait  = 80 * time.Second // the longest wait between two tries
	repairMaxTries = 6                // tries before a tenant waits for POST /_shard/replicas
)

// repairer is the router's repair loop's state. Its zero value is ready;
// its methods are safe for concurrent use.
type repairer struct {
	mu    sync.Mutex
	nodes map[string]bool         // nodes tenants were failed off
	tries map[string]*repairRetry // tenants owed a copy
	kick  chan struct{}           // cap 1: look now
	once  sync.Once
}

// repairRetry is when a tenant's copy is asked next and how often it was.
type repairRetry struct {
	next  time.Time
	wait  time.Duration
	tries int
}

func (p *repairer) init() {
	p.once.Do(func() {
		p.nodes = map[string]bool{}
		p.tries = map[string]*repairRetry{}
		p.kick = make(chan struct{}, 1)
	})
}

// failedOff notes that tenants were failed off node: its return is
// watched for.
func (p *repairer) failedOff(node string) {
	p.init()
	p.mu.Lock()
	p.nodes[node] = true
	p.mu.Unlock()
}

// later owes tenant a copy: it is asked again after a back-off.
func (p *repairer) later(tenant string) {
	p.init()
	p.mu.Lock()
	if _, ok := p.tries[tenant]; !ok {
		p.tries[tenant] = &repairRetry{next: time.Now().Add(repairFirst), wait: repairFirst}
	}
	p.mu.Unlock()
}

// startRepair runs the repair loop on a goroutine the router owns; it
// acts only while this router leads.
func (rt *Router) startRepair() {
	rt.repair.init()
	rt.wg.Go(func() {
		tick := time.NewTicker(repairEvery)
		defer tick.Stop()
		for {
			select {
			case <-rt.ctx.Done():
				return
			case <-tick.C:
			case <-rt.repair.kick:
			}
			s, err := rt.lead.changes(rt.ctx)
			if err != nil {
				continue
			}
			rt.repairOnce(rt.ctx, s)
		}
	})
}

// repairOnce makes the stale copies on every failed-over node that
// answers follow their tenants' new primaries, and retries the copies owed.
func (rt *Router) repairOnce(ctx context.Context, s *global.Store) {
	tenants, _, err := s.ListTenants(ctx)
	if err != nil {
		return
	}
	nodes, _, err := s.ListNodes(ctx)
	if err != nil {
		return
	}
	// A router that restarted learns the failed-over nodes from the
	// directory: tenants failed off a node and not copied back onto it.
	for _, rec := range tenants {
		if rec.Value.FailedFrom != "" && rec.Value.Replica == "" && rec.Value.Node != rec.Value.FailedFrom {
			rt.repair.failedOff(rec.Value.FailedFrom)
		}
	}
	rt.repair.mu.Lock()
	watch := make([]string, 0, len(rt.repair.nodes))
	for n := range rt.repair.nodes {
		watch = append(watch, n)
	}
	rt.repair.mu.Unlock()
	for _, n := range watch {
		node, ok := nodes[n]
		if !ok {
			rt.repair.mu.Lock()
			delete(rt.repair.nodes, n)
			rt.repair.mu.Unlock()
			continue
		}
		if rt.nodes.checkToken(ctx, node.Value) != nil {
			continue // not back yet
		}
		if rt.rejoin(ctx, s, n, node.Value) {
			rt.repair.mu.Lock()
			delete(rt.repair.nodes, n)
			rt.repair.mu.Unlock()
		}
	}
	rt.retryCopies(ctx, s)
	rt.pointReadCopies(ctx, tenants, nodes)
}

// rejoin has node n's stale copies of tenants failed off it follow their
// new primaries (recorded as their copies when they have none), or deletes
// them when the tenant has another copy already. It reports whether every
// one was handled.
func (rt *Router) rejoin(ctx context.Context, s *global.Store, n string, node global.Node) bool {
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
		s, err := rt.ownTenant(ctx, s, name)
		if err != nil {
			continue // the other side repairs the region it owns
		}
		if rec.HeldBy != "" {
			all = false
			continue
		}
		if rec.Replica != "" {
			if err := rt.removeStale(ctx, s, name, n, rec.Node, rec.Replica); err != nil {
				rt.log.Warn("stale copy not deleted", "tenant", name, "node", n, "err", err)
				all = false
			}
			continue
		}
		primary, err := s.GetNode(ctx, rec.Node)
		if err != nil {
			all = false
			continue
		}
		// A file made to follow itself would take no more writes.
		if node, err = rt.apart(ctx, s, rec.Node, n); err != nil {
			rt.log.Warn("stale copy not told to follow", "tenant", name, "node", n, "primary", rec.Node, "err", err)
			all = false
			continue
		}
		if err := rt.nodes.follow(ctx, node, n, name, primary.Value); err != nil {
			rt.log.Warn("stale copy not told to follow", "tenant", name, "node", n, "primary", rec.Node, "err", err)
			all = false
			continue
		}
		done, err := s.UpdateTenant(ctx, name, at, func(t *global.Tenant) error {
			t.Replica = n
			return nil
		})
		if err != nil {
			all = false
			continue
		}
		rt.settleTo(ctx, done.Rev)
		rt.log.Info("stale copy follows the new primary", "tenant", name, "node", n, "primary", rec.Node)
	}
	return all
}

// retryCopies asks again for the copies owed whose wait has passed.
func (rt *Router) retryCopies(ctx context.Context, s *global.Store) {
	now := time.Now()
	var due []string
	rt.repair.mu.Lock()
	for t, r := range rt.repair.tries {
		if !now.Before(r.next) {
			due = append(due, t)
		}
	}
	rt.repair.mu.Unlock()
	for _, t := range due {
		err := rt.copyOwed(ctx, s, t)
		rt.repair.mu.Lock()
		r := rt.repair.tries[t]
		switch {
		case r == nil:
		case err == nil:
			delete(rt.repair.tries, t)
		default:
			r.tries++
			r.wait = min(2*r.wait, repairMaxWait)
			r.next = time.Now().Add(r.wait)
			if r.tries >= repairMaxTries {
				delete(rt.repair.tries, t)
				rt.log.Warn("tenant left without a copy: POST /_shard/replicas asks again", "tenant", t, "err", err)
			}
		}
		rt.repair.mu.Unlock()
	}
}

// copyOwed gives tenant t its copy if it still has none.
func (rt *Router) copyOwed(ctx context.Context, s *global.Store, t string) error {
	at, err := s.GetTenant(ctx, t)
	if isNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if at.Value.Replica != "" {
		return nil
	}
	if s, err = rt.ownTenant(ctx, s, t); err != nil {
		return nil // the other side's now
	}
	target, err := rt.pickReplica(ctx, s, at.Value, true) // a copy was wanted
	if err != nil || target == "" {
		return err
	}
	return rt.addReplica(ctx, s, t, target)
}
