package node

// Serving reads with a bound on their staleness: the request headers
// (Fenec-Max-Staleness, and from a router Fenec-Copy-Wait), the bound on
// every read answered (Fenec-Staleness-Ms), and a copy's declines.
//
//   - Every read answered on a data route carries Fenec-Staleness-Ms: a
//     primary's from its lease (primaryBound), a copy's from its proofs
//     (freshness.go), for the seq the read saw, taken as the answer goes.
//   - Fenec-Max-Staleness: a copy answers only if that bound is within
//     it, waiting a little for a proof (a read makes it probe at once);
//     a primary holding the lease always answers; one whose lease lapsed
//     too long ago refuses 503 (Fenec-Refused: lease), as a write.
//   - Fenec-Copy-Wait, beside a router's proof: the router sent a read to
//     a copy. The copy waits for Fenec-After and for a proof no longer
//     than it says, then declines at once (421 and Fenec-Refused), and
//     declines a write unrun, so the router asks the primary.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fenec-go/fenec/wire"
)

// directFreshWait bounds how long a copy read directly (no router's
// Fenec-Copy-Wait) waits for a proof of Fenec-Max-Staleness.
const directFreshWait = time.Second

// readAsk is what a data request asks of its answer's freshness.
type readAsk struct {
	hasMax bool
	maxMS  int64 // Fenec-Max-Staleness
	// routed: a router sent it to a copy (Fenec-Copy-Wait beside a proof
	// that matches), which answers or declines by until.
	routed bool
	until  time.Time
}

// readAsked reads the request's freshness headers: false when it answered
// a bad one (400). A router's Fenec-Copy-Wait counts only beside its
// proof; without one it is not looked at. A copy asked for a bound, or
// sent a read by a router, probes at its warm cadence from now.
func (c *call) readAsked() bool {
	h := c.r.Header
	ms, has, err := wire.ParseMillis(h, wire.HeaderMaxStaleness, wire.MaxStalenessMS)
	if err != nil {
		c.fail(fmt.Errorf("%w: %v", ErrBadRequest, err))
		return false
	}
	c.ask = readAsk{hasMax: has, maxMS: ms}
	if len(h.Values(wire.HeaderCopyWait)) > 0 && c.s.guard.hasProof(c.r) {
		wait, _, err := wire.ParseMillis(h, wire.HeaderCopyWait, wire.MaxCopyWaitMS)
		if err != nil {
			c.fail(fmt.Errorf("%w: %v", ErrBadRequest, err))
			return false
		}
		c.ask.routed, c.ask.until = true, time.Now().Add(time.Duration(wait)*time.Millisecond)
	}
	if (c.ask.hasMax || c.ask.routed) && c.isCopy() {
		c.t.fresh.warm(c.s.lease.clock.Now())
	}
	return true
}

// isCopy says whether the request's tenant file is a copy here.
func (c *call) isCopy() bool {
	return c.t != nil && Role(c.t.role.Load()) == RoleReplica
}

// routedToCopy: a router sent this request to the tenant's copy here.
func (c *call) routedToCopy() bool { return c.ask.routed && c.isCopy() }

// afterWait is how long Fenec-After may wait: what is left of a router's
// Fenec-Copy-Wait on a copy, else asked (Fenec-Wait or the default).
func (c *call) afterWait(asked time.Duration) time.Duration {
	if c.routedToCopy() {
		return max(0, time.Until(c.ask.until))
	}
	return asked
}

// awaitFresh, on a copy asked for Fenec-Max-Staleness, waits until it
// can prove the bound for what it holds, having a probe sent at once: for
// what is left of a router's Fenec-Copy-Wait, or directFreshWait. It
// stops early once a probe sent after the request came has been answered
// and applied and the bound is still too long (a closer one needs a
// nearer primary, not more waiting), once one was answered by a primary
// without the lease, or when its primary answers no probes. It returns
// true when the copy may go on; otherwise it declined (421,
// Fenec-Refused: stale).
func (c *call) awaitFresh() bool {
	if !c.ask.hasMax || !c.isCopy() {
		return true
	}
	t, clock := c.t, c.s.lease.clock
	started := clock.Now()
	until := time.Now().Add(directFreshWait)
	if c.ask.routed {
		until = c.ask.until
	}
	timer := time.NewTimer(max(0, time.Until(until)))
	defer timer.Stop()
	for {
		newer := t.fresh.newerCh()
		_, applied := t.seqNow()
		now := clock.Now()
		d, p, ok := t.copyBound(now, t.db.Seq())
		if ok && wire.CeilMillis(d) <= c.ask.maxMS {
			return true
		}
		if !t.fresh.probing.Load() || (ok && p.t0 >= started) || t.fresh.refusedSince(started) {
			c.declineStale(d, ok)
			return false
		}
		t.fresh.wantProbe()
		select {
		case <-newer:
		case <-applied:
		case <-timer.C:
			c.declineStale(d, ok)
			return false
		case <-c.r.Context().Done():
			c.fail(context.Cause(c.r.Context()))
			return false
		case <-t.ctx.Done():
			c.fail(context.Cause(t.ctx))
			return false
		case <-c.s.stopping:
			c.fail(ErrShuttingDown)
			return false
		}
	}
}

// settledRead holds a read's answer as settledFor does, then bounds its
// staleness for seq, the seq the read saw, and sets Fenec-Staleness-Ms —
// or, when Fenec-Max-Staleness asks for less, refuses: a copy declines
// (421, stale), a primary whose lease lapsed longer ago than asked
// answers 503 as a write without the lease is. It returns false when it
// answered so.
func (c *call) settledRead(seq uint64) bool {
	c.settledFor(seq)
	d, ok := c.answerBound(seq)
	if c.ask.hasMax && (!ok || wire.CeilMillis(d) > c.ask.maxMS) {
		if c.isCopy() {
			c.declineStale(d, ok)
			return false
		}
		c.failWith(&leaseRefusal{retry: time.Second}, map[string]any{"staleness_ms": staleMS(d, ok)})
		return false
	}
	c.w.Header().Set(wire.HeaderStaleness, wire.FormatStaleness(d, ok))
	return true
}

// answerBound is how stale an answer of the tenant's file that saw seq
// may be, now.
func (c *call) answerBound(seq uint64) (time.Duration, bool) {
	if c.isCopy() {
		d, _, ok := c.t.copyBound(c.s.lease.clock.Now(), seq)
		return d, ok
	}
	return c.s.primaryBound(c.t)
}

// staleMS is a bound as a JSON body gives it: whole milliseconds, or nil.
func staleMS(d time.Duration, ok bool) *int64 {
	if !ok {
		return nil
	}
	ms := wire.CeilMillis(d)
	return &ms
}

// declineStale answers that this copy cannot prove the asked bound: 421
// with Fenec-Refused: stale, its position and the bound it can prove.
func (c *call) declineStale(d time.Duration, ok bool) {
	what := "it proves none"
	if ok {
		what = fmt.Sprintf("it can prove %d ms", wire.CeilMillis(d))
	}
	c.decline(fmt.Errorf("%w (Fenec-Max-Staleness: %d; %s): read from the tenant's primary", ErrStale, c.ask.maxMS, what), d, ok)
}

// decline answers a request this copy ran nothing of, for the primary to
// answer (wire.StatusDeclined, a wire.Declined body).
func (c *call) decline(err error, d time.Duration, ok bool) {
	c.failWith(err, map[string]any{"seq": c.t.db.Seq(), "history": c.t.db.History(), "staleness_ms": staleMS(d, ok)})
}

// declined is err as a copy answers a router's request: a write refused
// for the file being a copy is declined (421, replica) rather than 503,
// so the router sends it to the primary at once. Anything else is err.
func (c *call) declined(err error) (error, bool) {
	if !c.routedToCopy() || !errors.Is(err, ErrReplica) {
		return err, false
	}
	return fmt.Errorf("%w: this node holds a copy of tenant %s; send the write to its primary", ErrWriteToCopy, c.t.name), true
}
