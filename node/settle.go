package node

// When a landed write, or a read that saw one, is answered: every rule
// between the engine's answer and the client's is here.
//
//   - The write is durable in this file when the engine returns under
//     --sync always (it syncs before a write returns); a read waits for
//     what it saw to be (settledFor).
//   - Copies: a write waits for every copy streaming from the file to
//     hold it, for replicaWait at most; a copy that made one wait that
//     long is lagging and waited for no more until it caught up, and a
//     write answered without it is counted
//     (fenec_node_writes_unreplicated_total).
//   - Copies in step: under a lease, a write on a tenant whose copy the
//     list has in step waits for that copy however long, or for the
//     router to record it behind at the node's ask (waitInStep; the
//     list's state is instep.go's).
//   - The lease, checked again as the write is answered: landed under it
//     but answered after it lapsed, the write's fate is unknown (500 with
//     its seq and history).
//
// A read answers nothing a crash or a failover may take back: it waits as
// a write would, no longer.

import (
	"context"
	"strconv"
	"time"

	"github.com/fenec-go/fenec/wire"
)

// replicaWait bounds how long a write under --sync always waits for its
// copies to acknowledge it durable in their own files before a copy that
// has not is counted lagging (or, counted on under a lease, asked to be
// recorded behind): --replica-wait, and under a lease no more than half
// the lease the node holds. A dead copy then costs its primary's writes
// about what a dead primary costs its own tenants (a lease, give or take a
// round of grants), whatever the --replica-wait: a write held for a copy
// in step is still answered only once the copy holds it or the directory
// records it behind, so the bound decides only how soon the node asks.
func replicaWait(configured, lease time.Duration) time.Duration {
	if lease > 0 && lease/2 < configured {
		return lease / 2
	}
	return configured
}

// replicaWait is the bound now (the lease may change with every grant).
func (c *call) replicaWait() time.Duration {
	return replicaWait(c.s.cfg.ReplicaWait, c.s.lease.length())
}

// stepPoll is how often a write held for its copy looks at its lease
// (one that lapsed ends the wait: the write's outcome is then unknown).
const stepPoll = 50 * time.Millisecond

// answer writes a job's outcome: a landed write once settleWrite lets it
// go, a read once what it saw has settled (settledFor).
func (c *call) answer(j *job, o outcome) {
	if o.err != nil {
		c.failJob(j, o.err)
		return
	}
	if o.res.Wrote {
		if !c.settleWrite(o.res.Seq) {
			return
		}
		c.setWritten(o.res.Seq)
	} else if !c.settledRead(o.res.Seq) { // and bounded: staleness.go
		return
	}
	if o.rows != nil {
		c.writeRows(o.rows)
		return
	}
	writeRaw(c.w, o.status, o.body)
}

// setWritten names a write's place in the answer: its seq, and the
// history of the file that answers it (with Fenec-After, a read that must
// hold this write).
func (c *call) setWritten(seq uint64) {
	h := c.w.Header()
	h.Set(wire.HeaderSeq, strconv.FormatUint(seq, 10))
	h.Set(wire.HeaderHistory, strconv.FormatUint(c.t.db.History(), 10))
}

// settleWrite holds a landed write's answer until the rules let it go:
// under --sync always, until every copy streaming from the file holds it
// or replicaWait passed (waitAcked), and, on a tenant whose copy the lease
// list has in step, until that copy holds it or the router recorded it
// behind (waitInStep); then the lease is checked again (answeredUnderLease).
// A write answered without a lagging copy is counted. It reports false
// when the write was answered here (500, outcome unknown).
func (c *call) settleWrite(seq uint64) bool {
	if !c.s.syncAlways {
		return c.answeredUnderLease(seq)
	}
	start, bound := time.Now(), c.replicaWait()
	acked := c.t.waitAcked(c.r.Context(), seq, bound)
	c.waitInStep(seq, start, bound)
	if !c.answeredUnderLease(seq) {
		return false
	}
	if !acked {
		c.log.Warn("write answered before every replica acknowledged it durable", "tenant", c.t.name, "seq", seq)
	}
	if !c.t.everyCopyHolds(seq) { // a lagging copy's too
		c.s.metrics.unreplicated.Inc()
	}
	return true
}

// settledFor holds a read's answer, under --sync always, until what it
// saw (everything up to seq) is durable here and acknowledged by every
// copy a write would wait for. Without it a read could show a write that
// a crash then loses with the unsynced tail, or that the copy promoted
// after this node dies never got: a value seen and then unseen. A read
// waits no longer than a write would, and a lagging copy holds up no
// read, as it holds up no write.
func (c *call) settledFor(seq uint64) {
	if !c.s.syncAlways || seq == 0 {
		return
	}
	ctx := c.r.Context()
	if err := c.t.db.WaitDurable(ctx, seq); err != nil {
		return // the read answers as it would have; the write it saw fails
	}
	start, bound := time.Now(), c.replicaWait()
	if !c.t.copiesHold(seq) {
		c.t.waitAcked(ctx, seq, bound)
	}
	c.waitInStep(seq, start, bound)
}

// answeredUnderLease checks a landed write's lease again as it is
// answered: landed under the lease but answered after it lapsed, the
// write's fate is unknown (500 with its seq and history). It returns false
// when it answered so.
func (c *call) answeredUnderLease(seq uint64) bool {
	if err := c.t.leaseCheck(); err != nil {
		c.failWith(ErrLeaseLapsed, map[string]any{
			"outcome": "unknown", "seq": seq, "history": c.t.db.History(),
		})
		return false
	}
	return true
}

// waitAcked waits until the copy behind every replication stream open
// has acknowledged seq as durable in its own file (a write under --sync
// always is answered once its copies hold it), for at most d; it says
// whether they all had.
//
// The streams are woken first (seq is durable here now, and they send
// only what is durable), and a copy that made one write wait out the
// bound is not waited for again until it has caught up (a laggard).
func (t *tenant) waitAcked(ctx context.Context, seq uint64, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	// Under a lease the wait also ends once the lease lapsed: the write's
	// outcome is then unknown whatever the copies do.
	var lapse <-chan time.Time
	if t.leaseGate.Load() != nil {
		tick := time.NewTicker(stepPoll)
		defer tick.Stop()
		lapse = tick.C
	}
	t.mu.Lock()
	close(t.seqCh) // waiters on seqCh all loop: a spare wake-up is harmless
	t.seqCh = make(chan struct{})
	t.mu.Unlock()
	for {
		t.mu.Lock()
		behind := !t.holdLocked(seq, false)
		ch := t.sentCh
		t.mu.Unlock()
		if !behind {
			return true
		}
		select {
		case <-ch:
		case <-timer.C:
			t.mu.Lock()
			for f := range t.feeds {
				if !f.read && f.acked < seq {
					f.lagging = true
				}
			}
			t.notifyAckedLocked() // the commit point moves past a laggard
			t.mu.Unlock()
			return false
		case <-lapse:
			if t.leaseCheck() != nil {
				return false
			}
		case <-ctx.Done():
			return false
		case <-t.ctx.Done():
			return false
		}
	}
}

// waitInStep holds a write at seq (or a read showing it) on a tenant whose
// copy the list has in step until a copy holds it, or a list taken after
// the node asked for the copy to be recorded behind (asked once the wait
// passed start+bound) no longer requires one. It says whether a copy
// holds seq; false also when the lease lapsed or the client went.
func (c *call) waitInStep(seq uint64, start time.Time, bound time.Duration) bool {
	nl := c.s.lease
	if nl == nil || nl.lease == nil {
		return true
	}
	t, ctx := c.t, c.r.Context()
	tick := time.NewTicker(stepPoll)
	defer tick.Stop()
	asked := false
	for {
		need, replica, changed := nl.steps.required(nl.lease, t.name)
		t.mu.Lock()
		held := t.copyHoldsLocked(seq, replica)
		acked := t.sentCh
		t.mu.Unlock()
		if held {
			return true
		}
		if !need {
			return false
		}
		if t.leaseCheck() != nil {
			return false
		}
		if !asked && time.Since(start) >= bound {
			asked = true
			nl.steps.ask(t.name, t.db.Seq())
			c.log.Warn("a copy counted on holds no copy of a write: asking the router to record it behind before answering",
				"tenant", t.name, "seq", seq)
		}
		select {
		case <-acked:
		case <-changed:
		case <-tick.C:
		case <-ctx.Done():
			return false
		case <-t.ctx.Done():
			return false
		}
	}
}

// copiesHold says whether every copy a write would wait for has
// acknowledged seq.
func (t *tenant) copiesHold(seq uint64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.holdLocked(seq, false)
}

// everyCopyHolds says whether every copy streaming from this file, lagging
// or not, has acknowledged seq.
func (t *tenant) everyCopyHolds(seq uint64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.holdLocked(seq, true)
}

// holdLocked says whether the voting copies streaming from this file
// have acknowledged seq: every one with lagging, else those a write waits
// for. A read copy is waited for by nothing.
func (t *tenant) holdLocked(seq uint64, lagging bool) bool {
	for f := range t.feeds {
		if !f.read && (lagging || !f.lagging) && f.acked < seq {
			return false
		}
	}
	return true
}

// copyHoldsLocked says whether a voting copy streaming from this file
// under the name replica (any for ""), lagging or not, has acknowledged
// seq. Called with t.mu held.
func (t *tenant) copyHoldsLocked(seq uint64, replica string) bool {
	for f := range t.feeds {
		if !f.read && (replica == "" || f.copy == replica) && f.acked >= seq {
			return true
		}
	}
	return false
}
