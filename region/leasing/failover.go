package leasing

import (
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/lease"
)

// Outcomes of a failover, the label of fenec_router_auto_failovers_total
// (and of fenec_router_failovers_by_hand_total).
const (
	AutoFailoverDone    = "done"    // every tenant of the node was promoted
	AutoFailoverPartial = "partial" // some were, some were left on the node
	AutoFailoverFailed  = "failed"  // none of its tenants could be promoted
)

// FailoverResult is what a failover of one node did: the tenants promoted
// on their copies and those that were not, with why.
type FailoverResult struct {
	Node     string            `json:"node"`
	Promoted []string          `json:"promoted"`
	Failed   []FailoverFailure `json:"failed"`
}

// FailoverFailure is a tenant a failover left on its node.
type FailoverFailure struct {
	Tenant string `json:"tenant"`
	Why    string `json:"why"`
}

// Outcome is the failover's outcome label: done, partial or failed (an
// automatic failover's and one asked by hand alike).
func (res FailoverResult) Outcome() string {
	switch {
	case len(res.Failed) > 0 && len(res.Promoted) == 0:
		return AutoFailoverFailed
	case len(res.Failed) > 0:
		return AutoFailoverPartial
	}
	return AutoFailoverDone
}

// HeldWaitLimit bounds how long a failover waits, in the background, for
// the operation holding a tenant to end; the leasing keeps such a tenant
// off its node's list as long.
const HeldWaitLimit = 10 * time.Minute

// heldWait is a tenant held by another operation when its node was failed
// over: its node's grants name it no more until it has been failed over
// (or moved, or deleted), or the failover's wait for it ended (until, on
// the leasing's clock).
type heldWait struct {
	node  string
	until time.Duration
}

// failover is lsr's Failover callback: node lapsed and its list is
// empty. Tenants another operation holds wait off the node's list for
// that operation to end; the rest are promoted on their copies, and the
// node is recorded lapsed (lapsed.go). Then the nodes that received
// tenants are granted their lists at once, and what the failover left on
// the node goes back on its list.
func (l *Leasing) failover(ctx context.Context, lsr *lease.Leaser, node string) {
	l.mu.Lock()
	l.failing[node] = true
	delete(l.settled, node)
	if v := l.deps.View(); v != nil {
		until := l.deps.Clock.Now() + HeldWaitLimit
		for _, name := range v.TenantsOn(node) {
			if rec, ok := v.Tenant(name); ok && rec.HeldBy != "" && rec.HeldBy != global.HoldFailover {
				l.held[name] = heldWait{node: node, until: until}
			}
		}
	}
	l.mu.Unlock()

	res := l.deps.Failover(ctx, node, false)
	l.markLapsed(ctx, lsr, node)
	outcome := res.Outcome()
	l.failovers.WithLabelValues(outcome).Inc()
	l.log.Warn("node failed over on its lapsed lease", "node", node, "promoted", len(res.Promoted), "failed", len(res.Failed), "outcome", outcome)

	l.mu.Lock()
	delete(l.failing, node)
	l.settled[node] = true
	delete(l.lists, node) // set again, whatever it held
	l.mu.Unlock()
	cur := l.resync()
	if cur == nil {
		return
	}
	if v := l.deps.View(); v != nil {
		for _, name := range res.Promoted {
			if rec, ok := v.Tenant(name); ok {
				cur.GrantNow(rec.Node)
			}
		}
	}
}

// HeldEnded puts tenant name back on its node's list at once, if a
// failover kept it off it waiting for another operation's hold: that
// wait ended — the tenant was failed over, or the failover gave up on it
// (logged where it did), and a tenant it gave up on is its node's again.
func (l *Leasing) HeldEnded(name string) {
	l.mu.Lock()
	_, waited := l.held[name]
	delete(l.held, name)
	l.dirty = l.dirty || waited
	l.mu.Unlock()
	if waited {
		l.Poke()
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
func (l *Leasing) reports(ctx context.Context, node string, behind map[string]uint64, caught []string) {
	ctx, cancel := context.WithTimeout(ctx, reportWait)
	defer cancel()
	s, err := l.deps.Lead.Changes(ctx)
	if err == nil && l.deps.OwnNode != nil {
		s, err = l.deps.OwnNode(ctx, s, node)
	}
	if err != nil {
		return // not leading, or no longer the region's: the node asks the next leader
	}
	var rev int64
	change := func(name string, fn func(t *global.Tenant) bool) {
		at, err := s.GetTenant(ctx, name)
		if err != nil || at.Value.Node != node || !fn(&at.Value) {
			if err != nil && !errors.Is(err, global.ErrNotFound) {
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
		l.deps.Settle(ctx, rev)
	}
	if lsr := l.resync(); lsr != nil {
		lsr.GrantNow(node)
	}
}
