package forward

import (
	"context"
	"time"
)

// LeaseRetry lets the forwarder ask again for a write a new primary refused
// unrun (503 with Fenec-Refused: lease: it holds no lease for the tenant
// yet). The control plane implements it.
type LeaseRetry interface {
	// Leading reports whether this router leads (and so grants).
	Leading() bool
	// GrantNow sends node its grant with the current list at once. Only a
	// leading router is asked.
	GrantNow(ctx context.Context, node string) error
	// Lease is the lease the directory's nodes run (0 when not leasing).
	Lease() time.Duration
}

type leaseRetryBox struct{ h LeaseRetry }

// SetLeaseRetry installs the hook; nil passes refusals back to the client.
func (f *Forwarder) SetLeaseRetry(h LeaseRetry) {
	if h == nil {
		f.lease.Store(nil)
		return
	}
	f.lease.Store(&leaseRetryBox{h: h})
}

// leadingGrants is how often a leading router grants and asks again.
const leadingGrants = 2

// Backoff between a non-leading router's tries.
const (
	refusalBackoffMin = 5 * time.Millisecond
	refusalBackoffMax = 20 * time.Millisecond
)

// leaseState is one request's record of refusals.
type leaseState struct {
	refusals int
	until    time.Time // non-leading: ask again until then
	backoff  time.Duration
}

// interceptRefusal decides, before an attempt, whether a lease refusal it
// meets is asked again (true) or passed back to the client as it is.
func (f *Forwarder) interceptRefusal(x *exchange, ls *leaseState) bool {
	box := f.lease.Load()
	if box == nil {
		return false
	}
	if ls.refusals == 0 {
		return true
	}
	if box.h.Leading() {
		return ls.refusals < leadingGrants
	}
	return f.now().Before(ls.until)
}

// afterRefusal readies the next try after a lease refusal: a leading router
// grants the node its list at once; another waits a few ms. false: the
// client went away meanwhile.
func (f *Forwarder) afterRefusal(x *exchange, tgt Target, ls *leaseState) bool {
	box := f.lease.Load()
	if box == nil {
		return x.r.Context().Err() == nil
	}
	ls.refusals++
	ctx := x.r.Context()
	if box.h.Leading() {
		gctx, cancel := context.WithDeadline(ctx, x.deadline)
		defer cancel()
		if err := box.h.GrantNow(gctx, tgt.Node); err != nil {
			f.log.Warn("grant after a lease refusal", "node", tgt.Node, "err", err)
		}
		return ctx.Err() == nil
	}
	if ls.refusals == 1 {
		bound := f.cfg.UpstreamTimeout
		if l := box.h.Lease(); l > 0 {
			bound = min(bound, l*2/3)
		}
		ls.until = minTime(f.now().Add(bound), x.deadline)
		ls.backoff = refusalBackoffMin
	}
	t := time.NewTimer(ls.backoff)
	defer t.Stop()
	ls.backoff = min(ls.backoff*2, refusalBackoffMax)
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
