package region

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/wire"
)

// Repair: a node failed over that answers again has its stale copies
// follow the tenants' new primaries, and a tenant that could not be given
// a copy is tried again a few times, backing off. The copies owed are
// read again from the directory at each term this router leads, so none
// is lost with a router that stopped. Every repairLookEvery it also asks
// the nodes about their files: a copy a node reports damaged is replaced,
// and a moved tenant's source its move left frozen is deleted
// (collect.go).
const (
	repairEvery     = 2 * time.Second  // how often the repair looks
	repairLookEvery = 10 * time.Second // how often it asks the nodes about their files
	repairParallel  = 8                // copies' nodes asked at once
	repairFirst     = 5 * time.Second  // first wait before a copy is asked again
	repairMaxWait   = 80 * time.Second // the longest wait between two tries
	repairMaxTries  = 6                // tries before a tenant waits for POST /_shard/replicas
)

// repairer is the router's repair loop's state. Its zero value is ready;
// its methods are safe for concurrent use.
type repairer struct {
	mu     sync.Mutex              // guards nodes, tries, term, looked
	nodes  map[string]bool         // nodes tenants were failed off
	tries  map[string]*repairRetry // tenants owed a copy
	term   uint64                  // the term whose copies owed were read from the directory
	looked time.Time               // when the nodes were last asked about their files
	kick   chan struct{}           // cap 1: look now
	once   sync.Once
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

// owe owes tenant a copy, asked at the repair's next pass.
func (p *repairer) owe(tenant string) {
	p.init()
	p.mu.Lock()
	if _, ok := p.tries[tenant]; !ok {
		p.tries[tenant] = &repairRetry{next: time.Now(), wait: repairFirst}
	}
	p.mu.Unlock()
}

// lookDue reports whether the nodes are to be asked about their files
// now, and if so notes that they were.
func (p *repairer) lookDue(now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.looked.IsZero() && now.Sub(p.looked) < repairLookEvery {
		return false
	}
	p.looked = now
	return true
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
			s, err := rt.lead.Changes(rt.ctx)
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
		if rt.nodes.CheckToken(ctx, node.Value) != nil {
			continue // not back yet
		}
		if rt.rejoin(ctx, s, n, node.Value) {
			rt.repair.mu.Lock()
			delete(rt.repair.nodes, n)
			rt.repair.mu.Unlock()
		}
	}
	rt.oweFromDirectory(ctx, s, tenants)
	rt.retryCopies(ctx, s)
	rt.copies.Point(ctx, tenants, nodes)
	if rt.repair.lookDue(time.Now()) {
		rt.replaceDamaged(ctx, s, tenants, nodes)
		rt.collectSources(ctx, s, tenants, nodes)
	}
}

// oweFromDirectory, once a term, owes a copy to every tenant the
// directory shows without one where one is wanted (its node has a
// standby, or the router runs --replicas): the copies a router owed when
// it stopped (a move's, a placement's) are not lost with it.
func (rt *Router) oweFromDirectory(ctx context.Context, s *global.Store, tenants map[string]global.Versioned[global.Tenant]) {
	leading, term := rt.lead.Status()
	rt.repair.mu.Lock()
	done := rt.repair.term == term
	rt.repair.mu.Unlock()
	if !leading || done {
		return
	}
	standbys := map[string]string{}
	var owed []string
	for name, at := range tenants {
		if at.Value.Replica != "" {
			continue
		}
		sb, ok := standbys[at.Value.Node]
		if !ok {
			var err error
			if sb, err = rt.standbyOf(ctx, at.Value.Node); err != nil {
				return // read again at the next pass
			}
			standbys[at.Value.Node] = sb
		}
		if sb != "" || rt.cfg.Replicas {
			owed = append(owed, name)
		}
	}
	for _, name := range owed {
		rt.repair.owe(name)
	}
	rt.repair.mu.Lock()
	rt.repair.term = term
	rt.repair.mu.Unlock()
	if len(owed) > 0 {
		rt.log.Info("copies owed, as the directory shows them", "tenants", len(owed), "term", term)
	}
}

// replaceDamaged asks each copy's node for its copy; one the node reports
// damaged (its file fails its checks and does not open: it follows
// nothing and no failover can promote it) is dropped and a new copy made.
func (rt *Router) replaceDamaged(ctx context.Context, s *global.Store, tenants map[string]global.Versioned[global.Tenant], nodes map[string]global.Versioned[global.Node]) {
	var (
		mu      sync.Mutex // guards damaged
		damaged = map[string]string{}
	)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(repairParallel)
	for name, at := range tenants {
		n, ok := nodes[at.Value.Replica]
		if at.Value.Replica == "" || !ok || at.Value.HeldBy != "" {
			continue
		}
		g.Go(func() error {
			if _, err := rt.nodes.Replication(gctx, n.Value, name); wire.IsDamaged(err) {
				mu.Lock()
				damaged[name] = at.Value.Replica
				mu.Unlock()
			}
			return nil
		})
	}
	_ = g.Wait()
	for _, name := range slices.Sorted(maps.Keys(damaged)) {
		if err := rt.dropDamaged(ctx, s, name, damaged[name]); err != nil {
			rt.log.Warn("damaged copy not replaced: looked at again later", "tenant", name, "node", damaged[name], "err", err)
		}
	}
}

// dropDamaged forgets tenant t's copy on node replica, which its node
// reports damaged, makes a new one (the repair tries again if it cannot
// now), and deletes the damaged file unless the new copy took its place.
func (rt *Router) dropDamaged(ctx context.Context, s *global.Store, t, replica string) error {
	s, err := rt.ownTenant(ctx, s, t)
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
	rt.auditRepair("drop damaged copy", t, replica, err, "its node reports the copy's file damaged: a new copy is made")
	if err != nil {
		return err
	}
	rt.settleTo(ctx, done.Rev)
	rt.log.Warn("damaged copy dropped: a new one is made", "tenant", t, "node", replica, "primary", at.Value.Node)
	if err := rt.copyOwed(ctx, s, t); err != nil {
		rt.log.Warn("no new copy for a damaged one yet: the repair tries again", "tenant", t, "err", err)
		rt.repair.later(t)
	}
	if cur, err := s.GetTenant(ctx, t); err == nil && !placesOn(cur.Value, replica) {
		if err := rt.removeStale(ctx, s, t, replica, cur.Value.Node, cur.Value.Replica); err != nil {
			rt.log.Warn("damaged copy's file not deleted", "tenant", t, "node", replica, "err", err)
		}
	}
	return nil
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
		if err := rt.nodes.Follow(ctx, node, n, name, primary.Value); err != nil {
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
