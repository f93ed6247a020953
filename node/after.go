package node

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/fenec-go/fenec/engine"
	"github.com/fenec-go/fenec/wire"
)

// defaultAfterWait is how long Fenec-After waits when Fenec-Wait does not
// say.
const defaultAfterWait = 5 * time.Second

// awaitAfter honours Fenec-After (and Fenec-History), then, on a copy,
// Fenec-Max-Staleness (awaitFresh): it returns true once this copy may
// answer, or answers the refusal and returns false. A copy a router sent
// the read to (Fenec-Copy-Wait) waits no longer than the router said,
// and declines (421, Fenec-Refused: behind) where it would answer 504.
func (c *call) awaitAfter() bool {
	return c.awaitSeq() && c.awaitFresh()
}

// awaitSeq honours Fenec-After and Fenec-History.
func (c *call) awaitSeq() bool {
	v := c.r.Header.Get(wire.HeaderAfter)
	if v == "" {
		return true
	}
	want, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		c.fail(fmt.Errorf("%w: Fenec-After must be a seq", ErrBadRequest))
		return false
	}
	wait := defaultAfterWait
	if c.r.Header.Get(wire.HeaderWait) != "" {
		if wait, err = parseWait(c.r.Header.Get(wire.HeaderWait)); err != nil {
			c.fail(err)
			return false
		}
	}
	var hist uint64
	hasHist := c.r.Header.Get(wire.HeaderHistory) != ""
	if hasHist {
		if hist, err = strconv.ParseUint(c.r.Header.Get(wire.HeaderHistory), 10, 64); err != nil {
			c.fail(fmt.Errorf("%w: Fenec-History must be a history id", ErrBadRequest))
			return false
		}
		if forkedBefore(c.t.db.Lineage(), hist, want) {
			c.afterRefused(want, ErrHistoryForked)
			return false
		}
		if err := c.pastLatest(hist, want); err != nil {
			c.failWith(err, map[string]any{"seq": c.t.db.Seq(), "history": c.t.db.History()})
			return false
		}
	}
	c.s.metrics.held.Inc()
	err = c.t.waitSeq(c.r.Context(), want, c.afterWait(wait))
	c.s.metrics.held.Dec()
	if err == nil && hasHist && !c.t.db.Holds(hist, want) {
		err = ErrHistoryForked
	}
	if err != nil {
		if errors.Is(err, ErrAfterTimeout) || errors.Is(err, ErrHistoryForked) {
			c.afterRefused(want, err)
		} else {
			c.fail(err)
		}
		return false
	}
	return true
}

// afterRefused answers a Fenec-After not reached, or not held by this
// file's history: 504 with the file's seq; on a copy a router sent the
// read to, a decline (421, Fenec-Refused: behind), for the primary to
// answer at once.
func (c *call) afterRefused(want uint64, err error) {
	if c.routedToCopy() {
		d, _, ok := c.t.copyBound(c.s.lease.clock.Now(), c.t.db.Seq())
		c.decline(fmt.Errorf("%w (Fenec-After: %d): %v; read from the tenant's primary", ErrBehind, want, err), d, ok)
		return
	}
	c.failWith(err, map[string]any{"seq": c.t.db.Seq()})
}

// parseWait reads a wait in milliseconds, at most maxWait.
func parseWait(v string) (time.Duration, error) {
	ms, err := strconv.ParseInt(v, 10, 64)
	if err != nil || ms < 0 {
		return 0, fmt.Errorf("%w: Fenec-Wait must be a number of milliseconds", ErrBadRequest)
	}
	return min(time.Duration(ms)*time.Millisecond, maxWait), nil
}

// forkedBefore says whether history h is on the lineage but this file
// left it before write seq: it can never hold that write.
func forkedBefore(lineage []engine.LineageEntry, h, seq uint64) bool {
	for i, e := range lineage {
		if e.History == h && i+1 < len(lineage) {
			return seq > lineage[i+1].From
		}
	}
	return false
}

// pastLatest refuses, on the tenant's primary, a Fenec-After past its
// latest write in the history the read names, when that is the file's
// own: only this file writes in its history, so no write of that seq
// exists — the client's seq is not one its write's answer carried. A copy
// may be behind its primary and waits; a file of another history is
// judged by Holds.
func (c *call) pastLatest(hist, want uint64) error {
	if Role(c.t.role.Load()) != RolePrimary || hist != c.t.db.History() {
		return nil
	}
	if seq := c.t.db.Seq(); want > seq {
		return fmt.Errorf("%w: Fenec-After %d is past this tenant's latest write (seq %d of history %d): no write has that seq; send the Fenec-Seq and Fenec-History your write's answer carried",
			ErrBadRequest, want, seq, hist)
	}
	return nil
}
