package node

import (
	"context"
	"errors"
	"time"

	"github.com/fenec-go/fenec/engine"
	"github.com/fenec-go/fenec/wire"
)

// maxWait bounds Fenec-Wait and the wait of Fenec-After.
const maxWait = 30 * time.Second

// waitHeader reads Fenec-Wait in milliseconds (0 if absent), at most
// maxWait; false (answered 400) if it is not a number.
func (c *call) waitHeader() (time.Duration, bool) {
	v := c.r.Header.Get(wire.HeaderWait)
	if v == "" {
		return 0, true
	}
	d, err := parseWait(v)
	if err != nil {
		c.fail(err)
		return 0, false
	}
	return d, true
}

// claimWaiter is one request held by Fenec-Wait. The tenant's claim
// runner runs it, oldest first, whenever a write lands or a time it
// waits for comes.
type claimWaiter struct {
	job     *job
	key     *keyed
	ran     bool // run at least once (guarded by tenant.mu)
	running bool // the runner is running it now (guarded by tenant.mu)
	gaveUp  bool // its request stopped waiting while it ran (guarded by tenant.mu)
	done    bool // answered or gone (guarded by tenant.mu)
	result  chan outcome
	last    outcome // the last outcome, what a timed-out waiter answers (guarded by tenant.mu)
}

// hold runs a /query or /batch under Fenec-Wait: in turn with the
// tenant's other held requests, until it takes something, the wait ends
// (answered with what it took: nothing), the node shuts down (the same),
// or the tenant closes under it (503).
func (c *call) hold(j *job, k *keyed, wait time.Duration) {
	t := c.t
	w := &claimWaiter{job: j, key: k, result: make(chan outcome, 1)}
	t.mu.Lock()
	t.claims = append(t.claims, w)
	t.mu.Unlock()
	t.poke()
	c.s.metrics.held.Inc()
	defer c.s.metrics.held.Dec()

	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case o := <-w.result:
		c.answer(j, o)
		return
	case <-timer.C:
	case <-c.s.stopping:
	case <-t.ctx.Done():
	case <-c.r.Context().Done():
	}
	o, final, ran := t.abandon(w)
	shutdown := isClosed(c.s.stopping) || errors.Is(context.Cause(t.ctx), ErrShuttingDown)
	switch {
	case final:
		c.answer(j, o)
	case c.r.Context().Err() != nil:
	case t.ctx.Err() != nil && !shutdown:
		c.fail(context.Cause(t.ctx))
	case ran:
		c.answer(j, o)
	case shutdown:
		c.fail(ErrShuttingDown)
	default:
		c.fail(ErrHoldNotRun)
	}
}

// abandon takes w out of the queue. If the runner has answered it or is
// running it, it returns that run's outcome with final. Otherwise it
// returns w's last outcome, with ran saying whether there was one (a
// claim that took nothing, which is the answer at the end of a wait).
func (t *tenant) abandon(w *claimWaiter) (o outcome, final, ran bool) {
	t.mu.Lock()
	if w.done {
		t.mu.Unlock()
		return <-w.result, true, true
	}
	if w.running {
		w.gaveUp = true
		t.mu.Unlock()
		return <-w.result, true, true
	}
	w.done = true
	t.dropClaimLocked(w)
	last, ran := w.last, w.ran
	t.mu.Unlock()
	return last, false, ran
}

func (t *tenant) dropClaimLocked(w *claimWaiter) {
	for i, x := range t.claims {
		if x == w {
			t.claims = append(t.claims[:i], t.claims[i+1:]...)
			return
		}
	}
}

// poke wakes the claim runner.
func (t *tenant) poke() {
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// runClaims is the tenant's claim runner: on each landed write (and at
// each time a held claim waits for) it runs the held requests in arrival
// order. It ends with the tenant.
func (t *tenant) runClaims() {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		select {
		case <-t.ctx.Done():
			return
		case <-t.wake:
		case <-timer.C:
		}
		next := t.serveClaims()
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		if next.IsZero() {
			timer.Reset(time.Hour)
		} else {
			timer.Reset(max(time.Until(next), time.Millisecond))
		}
	}
}

// serveClaims runs every held request once, oldest first, and returns
// the earliest time one of those still held waits for.
func (t *tenant) serveClaims() time.Time {
	t.mu.Lock()
	queue := append([]*claimWaiter(nil), t.claims...)
	t.mu.Unlock()
	var next time.Time
	for _, w := range queue {
		if t.ctx.Err() != nil {
			return time.Time{}
		}
		t.mu.Lock()
		if w.done {
			t.mu.Unlock()
			continue
		}
		w.running = true
		t.mu.Unlock()

		o := t.runJob(t.ctx, w.job, w.key, true)
		held := o.err == nil && !o.res.Wrote && claimedNothing(o.res.Results)

		t.mu.Lock()
		w.running, w.ran, w.last = false, true, o
		if !held || w.gaveUp {
			w.done = true
			t.dropClaimLocked(w)
			w.result <- o
		} else {
			// A wake time already past would only spin the runner: the
			// run just now saw nothing to take at it.
			if at := wakeAt(o.res.Results); at.After(time.Now()) && (next.IsZero() || at.Before(next)) {
				next = at
			}
		}
		t.mu.Unlock()
	}
	return next
}

// wakeAt is the earliest time a claim of rs could take something.
func wakeAt(rs []*engine.Result) time.Time {
	var at time.Time
	for _, r := range rs {
		if r.Claim && !r.WakeAt.IsZero() && (at.IsZero() || r.WakeAt.Before(at)) {
			at = r.WakeAt
		}
	}
	return at
}
