package failover

import (
	"context"
	"errors"
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
// (RestoreBroken), and the tenant is on its copy as it was before the
// restore began.

// HoldRestore is the HeldBy of a tenant being restored through the router.
const HoldRestore = "restore"

// restores are the restores running on this router, by tenant.
type restores struct {
	mu   sync.Mutex
	runs map[string]context.CancelCauseFunc // guarded by mu
}

// Restoring records a restore of tenant running on this router, which
// cancel ends (with a *RestoreBroken) if its node is failed over; the func
// returned forgets it, once the restore ends.
func (f *Failover) Restoring(tenant string, cancel context.CancelCauseFunc) func() {
	rr := &f.restores
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
func (rr *restores) cancel(tenant string, cause error) bool {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	fn, ok := rr.runs[tenant]
	if ok {
		fn(cause)
	}
	return ok
}

// breakRestore ends the hold of a restore of tenant name, read at at, on
// node, which is being failed over, cancelling the restore if it runs
// here, and returns the record released. One it could not release (the
// record changed: read again) is returned as it is now, and waited for as
// any hold is.
func (f *Failover) breakRestore(ctx context.Context, s *global.Store, name, node string, at global.Versioned[global.Tenant]) global.Versioned[global.Tenant] {
	if at.Value.HeldBy != HoldRestore {
		return at
	}
	ran := f.restores.cancel(name, &RestoreBroken{Tenant: name, Node: node})
	f.log.Warn("failover ends a restore's hold: the restore is cancelled, the tenant failed over at once",
		"tenant", name, "node", node, "restore_on_this_router", ran)
	for range 3 {
		free, err := s.Release(ctx, name, at, HoldRestore)
		if err == nil {
			return free
		}
		cur, gerr := s.GetTenant(ctx, name)
		if gerr != nil || !errors.Is(err, global.ErrConflict) {
			f.log.Warn("failover did not end a restore's hold: it waits for the restore", "tenant", name, "node", node, "err", err)
			return at
		}
		if at = cur; at.Value.HeldBy != HoldRestore {
			return at // the restore let go of it itself
		}
	}
	f.log.Warn("failover did not end a restore's hold after three tries: it waits for the restore", "tenant", name, "node", node)
	return at
}
