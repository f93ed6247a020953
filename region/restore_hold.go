package region

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/fenec-go/fenec/global"
)

// A restore holds its tenant (held_by: restore) for as long as its image
// takes to arrive, which may be minutes, and a restore streaming to a
// node that has gone may wait out --move-timeout. A failover does not
// wait for it: the node the image goes to is the one being failed over,
// so the restore has nowhere to land. The failover ends the restore's
// hold in the directory, cancels the restore if it runs on this router,
// and fails the tenant over at once; the restore is answered saying so
// (ErrRestoreBroken), and the tenant is on its copy as it was before the
// restore began.

// restoreRuns are the restores running on this router, by tenant.
type restoreRuns struct {
	mu   sync.Mutex
	runs map[string]context.CancelCauseFunc // guarded by mu
}

// add records a restore of tenant, which cancel ends; the func returned
// forgets it.
func (rr *restoreRuns) add(tenant string, cancel context.CancelCauseFunc) func() {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	if rr.runs == nil {
		rr.runs = map[string]context.CancelCauseFunc{}
	}
	rr.runs[tenant] = cancel
	return func() {
		rr.mu.Lock()
		defer rr.mu.Unlock()
		delete(rr.runs, tenant)
	}
}

// cancel ends tenant's restore, if one runs here, with cause.
func (rr *restoreRuns) cancel(tenant string, cause error) bool {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	fn, ok := rr.runs[tenant]
	if ok {
		fn(cause)
	}
	return ok
}

// restoreBroken is a restore a failover ended.
type restoreBroken struct {
	tenant, node string
}

func (e *restoreBroken) Error() string {
	return fmt.Sprintf("%s: node %s, which it was restoring tenant %s on, was failed over, and %s is now served by its copy as it was "+
		"before this restore began (the image may or may not have reached %s, which no longer serves it): restore it again",
		ErrRestoreBroken.Error(), e.node, e.tenant, e.tenant, e.node)
}

func (e *restoreBroken) Unwrap() error { return ErrRestoreBroken }

// breakRestore ends the hold of a restore of tenant name, read at at, on
// node, which is being failed over, cancelling the restore if it runs
// here, and returns the record released. One it could not release (the
// record changed: read again) is returned as it is now, and waited for as
// any hold is.
func (rt *Router) breakRestore(ctx context.Context, s *global.Store, name, node string, at global.Versioned[global.Tenant]) global.Versioned[global.Tenant] {
	if at.Value.HeldBy != holdRestore {
		return at
	}
	ran := rt.restores.cancel(name, &restoreBroken{tenant: name, node: node})
	rt.log.Warn("failover ends a restore's hold: the restore is cancelled, the tenant failed over at once",
		"tenant", name, "node", node, "restore_on_this_router", ran)
	for range 3 {
		free, err := s.Release(ctx, name, at, holdRestore)
		if err == nil {
			return free
		}
		cur, gerr := s.GetTenant(ctx, name)
		if gerr != nil || !errors.Is(err, global.ErrConflict) {
			rt.log.Warn("failover did not end a restore's hold: it waits for the restore", "tenant", name, "node", node, "err", err)
			return at
		}
		if at = cur; at.Value.HeldBy != holdRestore {
			return at // the restore let go of it itself
		}
	}
	rt.log.Warn("failover did not end a restore's hold after three tries: it waits for the restore", "tenant", name, "node", node)
	return at
}

// heldEnded tells the leasing that the failover waiting on tenant name's
// hold gave up (or finished): the tenant, kept off its node's lease list
// meanwhile, goes back on it at once if it is still there.
func (rt *Router) heldEnded(name string) {
	if rt.leasing != nil {
		rt.leasing.HeldEnded(name)
	}
}
