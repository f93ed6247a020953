package leasing

import (
	"context"
	"sync"
	"time"
)

// confirmEvery is how often, in parts of the lease, a leading router reads
// its directory's term to confirm its lead: a grant's lease is cut by how
// long before the answer it acknowledges the last read began, so a read
// every eighth of a lease costs a lease at most an eighth and the read's
// own time.
const confirmEvery = 8

// confirmation is the last moment a read of the directory, begun then,
// showed this router leading at its term: the Leaser cuts every grant's
// lease to end one lease after it (lease.LeaserConfig.Confirmed). A
// router cut off from its directory's quorum — a region partitioned from
// the rest with the global tier's leader in it — thus stops renewing its
// nodes' leases within one lease of the last read that could have shown
// its term, before a router promoted on the quorum's side fails any of
// them over: that one counts every node by the longest lease and a tenth
// from its first round, which follows its promotion, which no read begun
// after it could miss.
type confirmation struct {
	mu sync.Mutex
	at time.Duration // guarded by mu
	ok bool          // guarded by mu: some read confirmed
}

func (c *confirmation) get() (time.Duration, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.at, c.ok
}

func (c *confirmation) set(at time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.ok || at > c.at {
		c.at, c.ok = at, true
	}
}

// confirm reads the directory's term (a linearizable read: a quorum
// answers it) and says whether it is still term, this router's.
func (l *Leasing) confirm(ctx context.Context, term uint64) bool {
	ctx, cancel := context.WithTimeout(ctx, max(l.deps.Own, 100*time.Millisecond))
	defer cancel()
	s, err := l.deps.Lead.Changes(ctx)
	if err != nil {
		return false
	}
	cur, err := s.Term(ctx)
	return err == nil && cur.Value == term
}

// confirmLoop confirms the lead at term every confirmEvery-th of the
// lease until ctx ends, recording each read that did in c.
func (l *Leasing) confirmLoop(ctx context.Context, term uint64, c *confirmation) {
	every := max(l.deps.Own/confirmEvery, time.Millisecond)
	failing := false
	for ctx.Err() == nil {
		began := l.deps.Clock.Now()
		switch ok := l.confirm(ctx, term); {
		case ok:
			c.set(began)
			if failing {
				l.log.Info("the directory confirms this router's lead again: grants renew leases again", "term", term)
			}
			failing = false
		case !failing && ctx.Err() == nil:
			failing = true
			l.log.Warn("the directory does not confirm this router's lead: grants no longer renew leases past a lease from the last read that did",
				"term", term)
		}
		wait := every - (l.deps.Clock.Now() - began)
		if wait <= 0 {
			continue
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}
