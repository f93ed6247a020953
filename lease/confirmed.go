package lease

import (
	"context"
	"time"
)

// A leading router renews leases only while its directory confirms its
// lead (LeaserConfig.Confirmed): these are the Leaser's two sides of it.

// confirmedLeft is the lease a grant may carry: all of grant without
// Confirmed; else grant less however long after the lead was last
// confirmed the answer the grant acknowledges came back (at answered, the
// router's moment: the node answered before it, and runs its lease from
// then), so that the lease ends no later than a lease after the
// confirming read began. False when nothing is left (none confirmed yet,
// or a whole lease between the read and the answer).
func (l *Leaser) confirmedLeft(answered, grant time.Duration) (time.Duration, bool) {
	if l.cfg.Confirmed == nil {
		return grant, true
	}
	at, ok := l.cfg.Confirmed()
	if !ok {
		return 0, false
	}
	left := min(grant, at+grant-answered)
	return left, left >= time.Millisecond
}

// waitConfirmed waits a twentieth of the lease (or GrantNow) before a
// node whose grant waits for the router's lead to be confirmed is looked
// at again (grant judges its lapse then). False when ctx ended.
func (l *Leaser) waitConfirmed(ctx context.Context, nr *nodeRun) bool {
	l.mu.Lock()
	wait := max(nr.tracker.Leases().Grant/20, time.Millisecond)
	l.mu.Unlock()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-nr.wake:
	case <-timer.C:
	}
	return true
}
