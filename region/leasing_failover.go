package region

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/fenec-go/fenec/global"
)

// heldWait is a tenant held by another operation when its node was failed
// over: its node's grants name it no more until it has been failed over
// (or moved, or deleted), or the failover's wait for it ended (until, on
// the leasing's clock).
type heldWait struct {
	node  string
	until time.Duration
}

// failover is the Leaser's Failover callback: node lapsed and its list is
// empty. Tenants another operation holds wait off the node's list for
// that operation to end; the rest are promoted on their copies. Then the
// nodes that received tenants are granted their lists at once, and what
// the failover left on the node goes back on its list.
func (l *leasing) failover(ctx context.Context, node string) {
	l.mu.Lock()
	l.failing[node] = true
	delete(l.settled, node)
	if v := l.deps.view(); v != nil {
		until := l.deps.clock.Now() + heldWaitLimit
		for _, name := range v.TenantsOn(node) {
			if rec, ok := v.Tenant(name); ok && rec.HeldBy != "" && rec.HeldBy != holdFailover {
				l.held[name] = heldWait{node: node, until: until}
			}
		}
	}
	l.mu.Unlock()

	res := l.deps.failover(ctx, node, false)
	outcome := AutoFailoverDone
	switch {
	case len(res.Failed) > 0 && len(res.Promoted) == 0:
		outcome = AutoFailoverFailed
	case len(res.Failed) > 0:
		outcome = AutoFailoverPartial
	}
	l.failovers.WithLabelValues(outcome).Inc()
	l.log.Warn("node failed over on its lapsed lease", "node", node, "promoted", len(res.Promoted), "failed", len(res.Failed), "outcome", outcome)

	l.mu.Lock()
	delete(l.failing, node)
	l.settled[node] = true
	delete(l.lists, node) // set again, whatever it held
	l.mu.Unlock()
	lsr := l.resync()
	if lsr == nil {
		return
	}
	if v := l.deps.view(); v != nil {
		for _, name := range res.Promoted {
			if rec, ok := v.Tenant(name); ok {
				lsr.GrantNow(rec.Node)
			}
		}
	}
}

// heldEnded puts tenant name back on its node's list at once, if a
// failover kept it off it waiting for another operation's hold: that
// wait ended — the tenant was failed over, or the failover gave up on it
// (logged where it did), and a tenant it gave up on is its node's again.
func (l *leasing) heldEnded(name string) {
	l.mu.Lock()
	_, waited := l.held[name]
	delete(l.held, name)
	l.dirty = l.dirty || waited
	l.mu.Unlock()
	if waited {
		l.poke()
	}
}

// reportWait bounds recording one answer's reports; the node asks again
// in its next answer.
const reportWait = 10 * time.Second

// reports is the Leaser's Reports callback: node asked for the copies of
// tenants it holds to be recorded behind (at the seq given) or no longer
// behind. Each record changes only while the tenant is still on node; the
// lists then change with the directory, and node is granted its list at
// once: the writes it holds wait on it.
func (l *leasing) reports(ctx context.Context, node string, behind map[string]uint64, caught []string) {
	ctx, cancel := context.WithTimeout(ctx, reportWait)
	defer cancel()
	s, err := l.deps.lead.changes(ctx)
	if err == nil && l.deps.ownNode != nil {
		s, err = l.deps.ownNode(ctx, s, node)
	}
	if err != nil {
		return // not leading, or no longer the region's: the node asks the next leader
	}
	var rev int64
	change := func(name string, fn func(t *global.Tenant) bool) {
		at, err := s.GetTenant(ctx, name)
		if err != nil || at.Value.Node != node || !fn(&at.Value) {
			if err != nil && !isNotFound(err) {
				l.log.Warn("copy's step not recorded", "tenant", name, "node", node, "err", err)
			}
			return
		}
		done, err := s.UpdateTenant(ctx, name, at, func(t *global.Tenant) error {
			fn(t)
			return nil
		})
		if err != nil {
			l.log.Warn("copy's step not recorded: the node asks again", "tenant", name, "node", node, "err", err)
			return
		}
		rev = max(rev, done.Rev)
	}
	for _, name := range slices.Sorted(maps.Keys(behind)) {
		seq := behind[name]
		change(name, func(t *global.Tenant) bool {
			if t.ReplicaBehind >= seq {
				return false
			}
			l.log.Warn("replica recorded behind: no failover promotes it unforced until it caught up",
				"tenant", name, "node", node, "replica", t.Replica, "seq", seq)
			t.ReplicaBehind = seq
			return true
		})
	}
	for _, name := range caught {
		change(name, func(t *global.Tenant) bool {
			if t.ReplicaBehind == 0 {
				return false
			}
			l.log.Info("replica caught up: in step again", "tenant", name, "node", node, "replica", t.Replica)
			t.ReplicaBehind = 0
			return true
		})
	}
	if rev > 0 {
		l.deps.settle(ctx, rev)
	}
	if lsr := l.resync(); lsr != nil {
		lsr.GrantNow(node)
	}
}
