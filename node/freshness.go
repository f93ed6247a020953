package node

// How a copy proves its own freshness, on its own clock alone.
//
// The copy sends probes in its feed's ack stream (probe frames, each
// numbered), noting on its boot clock the moment t0 it sent each. The
// primary answers each with a position frame: its latest landed seq, its
// history, and whether at the moment it wrote the answer it held an
// unlapsed lease naming the tenant (and took writes: not frozen, not a
// copy). Only the leased primary takes the tenant's writes, and it read
// its seq after the probe left the copy: every write acknowledged before
// t0 — by it or by any primary before it — has a seq at most that one, on
// that history. So once the copy's file holds that position, its data
// misses no write acknowledged before t0: its staleness is at most now −
// t0 (now on the same clock). A primary without --lease answers leased
// false (nothing says it is the only one taking writes), so copies of its
// tenants prove nothing. A primary that lost its lease answers false at
// once; a copy cut off, or whose primary is gone, gets no answer: either
// way no newer proof comes and the bound grows with the clock, never
// understated.
//
// Cost: a probe is 13 bytes up and its answer 30 down, per tenant
// followed, every --freshness-interval (25 ms) while the copy is warm (a
// read asked it for a bound in the last warmFor), else every coldProbe: a
// node following ten thousand tenants, none of them read with a bound,
// sends ten thousand probes a second (about 130 kB/s up, 300 kB/s down),
// and forty a second more for each tenant being read so.

import (
	"context"
	"encoding/binary"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fenec-go/fenec/wire"
)

const (
	// warmFor is how long a read asking a copy for a bound keeps it
	// probing every --freshness-interval.
	warmFor = 30 * time.Second
	// coldProbe is how often a copy no read asked for a bound probes.
	coldProbe = time.Second
	// minProbeGap bounds how often a read may have a probe sent at once
	// (kick), beside the cadence.
	minProbeGap = 5 * time.Millisecond
	// probeRing is how many probes sent a copy remembers t0 of.
	probeRing = 64
	// maxProofs bounds the proofs a copy keeps.
	maxProofs = 64
	// keepBehind is how long a proof older than the newest the file
	// holds is kept, for the reads in flight that saw less.
	keepBehind = time.Second
)

// positionLen is a position frame's payload: probe number, seq, history
// (big-endian uint64s), then a flags byte (positionLeased). Longer ones
// are read for these and the rest left: a later primary may say more.
const positionLen = 25

// positionLeased: the primary held the tenant's lease as it answered.
const positionLeased = 1

// probeAsk is one probe sent: its number and the boot-clock moment.
type probeAsk struct {
	n  uint64
	t0 time.Duration
}

// proof is a leased answer: at t0 every write acknowledged had a seq at
// most seq, on history.
type proof struct {
	t0      time.Duration
	seq     uint64
	history uint64
}

// freshness is a tenant's proofs of freshness while its file is a copy
// (guarded by mu unless atomic).
type freshness struct {
	mu     sync.Mutex
	next   uint64              // the number of the last probe sent
	asked  [probeRing]probeAsk // the last probes sent, by n % probeRing
	proofs []proof             // leased answers, seq and t0 rising
	sentAt time.Duration       // when the last probe was sent
	// refusedAt is t0 of the newest probe answered not leased (0: none
	// since the last leased one).
	refusedAt time.Duration

	kick    chan struct{} // cap 1: a read wants a probe now
	newer   chan struct{} // closed and replaced as a probe is answered
	probing atomic.Bool   // the feed open answers probes
	asked0  atomic.Int64  // boot-clock ns a read last asked for a bound (0: never)
}

func newFreshness() *freshness {
	return &freshness{kick: make(chan struct{}, 1), newer: make(chan struct{})}
}

// warm notes that a read asked the copy for a bound at now; a copy that
// was not warm probes at once, and at its warm cadence from then.
func (f *freshness) warm(now time.Duration) {
	cold := !f.isWarm(now)
	f.asked0.Store(int64(max(now, 1)))
	if cold {
		f.wantProbe()
	}
}

// isWarm says whether a read asked for a bound within warmFor of now.
func (f *freshness) isWarm(now time.Duration) bool {
	at := time.Duration(f.asked0.Load())
	return at > 0 && now-at < warmFor
}

// wantProbe has the prober send a probe soon.
func (f *freshness) wantProbe() {
	select {
	case f.kick <- struct{}{}:
	default:
	}
}

// sending numbers a probe about to be sent at now and remembers it.
func (f *freshness) sending(now time.Duration) uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.next++
	f.asked[f.next%probeRing] = probeAsk{n: f.next, t0: now}
	f.sentAt = now
	return f.next
}

// lastSent is when the last probe was sent.
func (f *freshness) lastSent() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sentAt
}

// answered takes a position frame. A leased answer to a probe still
// remembered is kept as a proof, dropping those it makes useless (any
// with a seq no lower: it is newer and asks no more of the file), then
// thinned (prune).
func (f *freshness) answered(payload []byte, holds func(history, seq uint64) bool) {
	if len(payload) < positionLen {
		return
	}
	n := binary.BigEndian.Uint64(payload[0:8])
	p := proof{seq: binary.BigEndian.Uint64(payload[8:16]), history: binary.BigEndian.Uint64(payload[16:24])}
	f.mu.Lock()
	defer f.mu.Unlock()
	ask := f.asked[n%probeRing]
	if ask.n != n || n == 0 {
		return // not a probe of ours, or one long forgotten
	}
	p.t0 = ask.t0
	defer func() {
		close(f.newer)
		f.newer = make(chan struct{})
	}()
	if payload[24]&positionLeased == 0 {
		f.refusedAt = max(f.refusedAt, p.t0)
		return
	}
	if k := len(f.proofs); k > 0 && f.proofs[k-1].t0 >= p.t0 {
		return // an answer overtaken by a newer one's
	}
	if p.t0 > f.refusedAt {
		f.refusedAt = 0
	}
	f.proofs = slices.DeleteFunc(f.proofs, func(q proof) bool { return q.seq >= p.seq })
	f.proofs = append(f.proofs, p)
	f.pruneLocked(holds)
}

// refusedSince says whether a probe sent at since or later was answered
// by a primary not holding the lease (and none since with it).
func (f *freshness) refusedSince(since time.Duration) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.refusedAt > 0 && f.refusedAt >= since
}

// pruneLocked thins the proofs to at most maxProofs. Of those the file
// holds, one older than the newest held by more than keepBehind serves
// no read (a read in flight saw a seq at least its own); of those it does
// not hold yet (a copy behind), every other goes, the newest kept, so a
// copy far behind still finds one as it catches up; past that, the
// oldest go.
func (f *freshness) pruneLocked(holds func(history, seq uint64) bool) {
	h := -1
	for i := len(f.proofs) - 1; i >= 0; i-- {
		if q := f.proofs[i]; holds(q.history, q.seq) {
			h = i
			break
		}
	}
	if h > 0 {
		cut := 0
		for cut < h && f.proofs[h].t0-f.proofs[cut].t0 > keepBehind {
			cut++
		}
		f.proofs, h = f.proofs[cut:], h-cut
	}
	if len(f.proofs) > maxProofs {
		kept, tail := f.proofs[:h+1], f.proofs[h+1:]
		for i, q := range tail {
			if (len(tail)-1-i)%2 == 0 {
				kept = append(kept, q) // writes never pass the reads
			}
		}
		f.proofs = kept
	}
	if n := len(f.proofs); n > maxProofs {
		f.proofs = f.proofs[n-maxProofs:]
	}
}

// best is the newest proof whose position the file holds at seq or
// below: what an answer that saw seq may claim (ok false: none).
func (f *freshness) best(seq uint64, holds func(history, seq uint64) bool) (proof, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := len(f.proofs) - 1; i >= 0; i-- {
		if q := f.proofs[i]; q.seq <= seq && holds(q.history, q.seq) {
			return q, true
		}
	}
	return proof{}, false
}

// newerCh is closed as the next proof comes.
func (f *freshness) newerCh() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.newer
}

// probeEvery is the cadence at now: every (--freshness-interval) while
// warm, else coldProbe (or every, if that is longer).
func (f *freshness) probeEvery(now, every time.Duration) time.Duration {
	if f.isWarm(now) {
		return every
	}
	return max(every, coldProbe)
}

// copyBound is how stale an answer of this copy that saw seq may be at
// now (ok false: nothing bounds it).
func (t *tenant) copyBound(now time.Duration, seq uint64) (time.Duration, proof, bool) {
	p, ok := t.fresh.best(seq, t.db.Holds)
	if !ok {
		return 0, proof{}, false
	}
	return max(0, now-p.t0), p, true
}

// runProber sends probes on ack, the body of the feed open, until ctx
// ends: at once, then at the cadence, and at once when a read wants one
// (no more often than minProbeGap). It is the feed's, which stops it.
func (t *tenant) runProber(ctx context.Context, ack *acker) {
	f, clock, every := t.fresh, t.reg.clock, t.reg.freshEvery
	f.probing.Store(true)
	defer f.probing.Store(false)
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-f.kick:
			if wait := minProbeGap - (clock.Now() - f.lastSent()); wait > 0 {
				timer.Reset(wait) // one went a moment ago: the next soon
				continue
			}
		}
		now := clock.Now()
		ack.probe(f.sending(now))
		timer.Reset(f.probeEvery(now, every))
	}
}

// position is a primary's answer to probe n: where its file stands, and
// whether, as it answers, it holds the tenant's lease (leasedNow).
func (c *call) position(n uint64) []byte {
	var b [positionLen]byte
	db := c.t.db
	binary.BigEndian.PutUint64(b[0:8], n)
	binary.BigEndian.PutUint64(b[8:16], db.Seq())
	binary.BigEndian.PutUint64(b[16:24], db.History())
	if c.leasedNow() {
		b[24] |= positionLeased
	}
	return b[:]
}

// leasedNow says whether this node takes the tenant's writes now under a
// lease: the file is a primary's, not frozen, and the node's lease runs
// and names the tenant. Without --lease it is false: nothing then says
// this is the only node taking the tenant's writes.
func (c *call) leasedNow() bool {
	t := c.t
	gate := c.s.lease.gate(t.name)
	return gate != nil && Role(t.role.Load()) == RolePrimary && !t.isFrozen() && gate() == nil
}

// primaryBound is how stale an answer of this primary's file may be at
// now: 0 while it holds the lease (or the node takes none); once the
// lease lapsed, or a list left the tenant out, the time since (no other
// node may take its writes before); nothing bounds it (ok false) when no
// lease let it write since the node started, or while it is frozen under
// a lease (a move may be handing it over).
func (s *Server) primaryBound(t *tenant) (time.Duration, bool) {
	nl := s.lease
	if nl == nil || nl.lease == nil {
		return 0, true
	}
	if t.isFrozen() {
		return 0, false
	}
	now := nl.clock.Now()
	until, writable, known := nl.lease.WritableUntil(now, t.name)
	switch {
	case writable:
		return 0, true
	case !known:
		return 0, false
	}
	return max(0, now-until), true
}

// freshnessStatus is what a copy can prove of its freshness now, as its
// replication status shows it.
func (t *tenant) freshnessStatus() *wire.Freshness {
	f, now := t.fresh, t.reg.clock.Now()
	out := &wire.Freshness{Probing: f.probing.Load(), Warm: f.isWarm(now)}
	if d, p, ok := t.copyBound(now, t.db.Seq()); ok {
		ms := wire.CeilMillis(d)
		out.StalenessMS, out.ProofSeq, out.ProofHistory = &ms, p.seq, p.history
	}
	return out
}
