package failover

import (
	"context"
	"errors"
	"time"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/region/leasing"
)

// heldPoll is how often a wait for a hold reads the tenant again.
const heldPoll = 200 * time.Millisecond

// whenReleased waits, on a goroutine the Failover owns, until the
// operation holding tenant name ends, then fails it over onto replica, the
// copy it had when its node was failed over, if it is still on node.
// However the wait ends, the leasing is told (HeldEnded): a tenant it gave
// up on goes back on its node's lease list at once. Every give-up is
// logged.
func (f *Failover) whenReleased(s *global.Store, name, node, replica string, force bool) {
	if replica == "" {
		f.log.Warn("held tenant not failed over: it has no copy; back on its node's lease list", "tenant", name, "node", node)
		f.deps.HeldEnded(name)
		return
	}
	if !f.goWait(func() {
		defer f.deps.HeldEnded(name)
		f.awaitRelease(s, name, node, replica, force)
	}) {
		f.log.Warn("held tenant not failed over: the router is closing; back on its node's lease list", "tenant", name, "node", node)
		f.deps.HeldEnded(name)
	}
}

// goWait runs wait on a goroutine Close waits for, unless Close began.
func (f *Failover) goWait(wait func()) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return false
	}
	f.wg.Go(wait)
	return true
}

// awaitRelease is whenReleased's wait, bounded by leasing.HeldWaitLimit
// and by Close.
func (f *Failover) awaitRelease(s *global.Store, name, node, replica string, force bool) {
	ctx, cancel := context.WithTimeout(f.ctx, leasing.HeldWaitLimit)
	defer cancel()
	tick := time.NewTicker(heldPoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			f.log.Warn("held tenant not failed over: gave up waiting for the operation holding it; back on its node's lease list",
				"tenant", name, "node", node, "waited", leasing.HeldWaitLimit, "err", context.Cause(ctx))
			return
		case <-tick.C:
		}
		at, err := s.GetTenant(ctx, name)
		if err != nil {
			if errors.Is(err, global.ErrNotFound) {
				f.log.Info("held tenant not failed over: deleted meanwhile", "tenant", name, "node", node)
				return
			}
			continue
		}
		if at.Value.HeldBy != "" && at.Value.HeldBy != global.HoldFailover {
			continue
		}
		if at.Value.Node != node || at.Value.Replica != replica {
			f.log.Info("held tenant not failed over: it changed meanwhile", "tenant", name,
				"node", at.Value.Node, "replica", at.Value.Replica)
			return
		}
		err = f.tenant(ctx, s, name, at, force)
		if err == nil {
			return
		}
		if errors.Is(err, global.ErrConflict) || errors.Is(err, global.ErrHeld) {
			continue
		}
		f.log.Error("held tenant's failover failed: back on its node's lease list", "tenant", name, "node", node, "err", err)
		return
	}
}
