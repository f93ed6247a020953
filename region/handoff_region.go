package region

import (
	"context"
	"fmt"
	"time"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/lease"
)

// The region's side of a handoff (handoff.go says the whole): its
// leading router's link (mirror.go) keeps the region's own record in line
// with the global one and takes the region's steps — ready, give, wait
// for the taking, take — each a compare-and-swap in the global directory.

// linkRecords are the region record in the region's directory (de) and in
// the global one (dg), as the link last read or wrote them.
type linkRecords struct {
	de, dg global.Versioned[global.Region]
	snap   globalSnap // the global directory as this step found it
}

// reconcile reads the region record in both directories, brings them in
// line — the newer state wins (by epoch, then by the handoff's progress),
// and of two alike the owner's: the region's while it leases, else the
// global tier's — and takes the region's step of a handoff in flight.
func (m *mirror) reconcile(ctx context.Context, s, dgs *global.Store, snap globalSnap) (linkRecords, error) {
	rec := linkRecords{dg: snap.region, snap: snap}
	var err error
	if rec.de, err = s.ReadRegion(ctx, m.region); err != nil {
		return rec, err
	}
	m.mu.Lock()
	m.dgRec = rec.dg
	m.mu.Unlock()
	if rec, err = m.align(ctx, s, dgs, rec); err != nil {
		return rec, err
	}
	m.settleForce(rec)
	h := rec.de.Value.Handoff
	if h == nil {
		return rec, nil
	}
	switch {
	case h.To == global.LeaserGlobal && unanswered(h, m.rt.now()):
		why := fmt.Sprintf("the global tier's leading router did not take the offer within %v: start or promote one (fenec-shard --auto-failover S, POST /_shard/promote), then ask again", offerWait)
		rec.dg, err = m.rt.writeRegion(ctx, dgs, global.DirGlobal, m.region, rec.dg, func(r *global.Region) error { return r.RollBack(why, m.rt.now()) })
		return rec, err
	case h.State == global.HandoffOffered && h.To == global.LeaserRegion:
		return m.ready(ctx, s, dgs, rec)
	case h.State == global.HandoffReady && h.To == global.LeaserGlobal:
		return m.give(ctx, s, dgs, rec)
	case h.State == global.HandoffGiven && h.To == global.LeaserRegion:
		return m.take(ctx, s, dgs, rec)
	case h.State == global.HandoffGiven && h.To == global.LeaserGlobal:
		return m.awaitTaken(ctx, s, dgs, rec)
	}
	m.mu.Lock()
	m.gaveAt = 0
	m.mu.Unlock()
	return rec, nil
}

// align makes the two records one: adopted into the region's directory
// (decorated with the global tier's leader, term and record while it
// leases), or pushed up into the global one (decorated with this router,
// its term and its record while the region leases).
func (m *mirror) align(ctx context.Context, s, dgs *global.Store, rec linkRecords) (linkRecords, error) {
	de, dg := rec.de.Value, rec.dg.Value
	if err := epochGap(de, dg); err != nil {
		m.refuseGap(de, dg, err)
		return rec, err
	}
	push := de.Newer(dg) || (!dg.Newer(de) && de.LeasedBy() == global.LeaserRegion)
	if push {
		want, err := m.decorate(ctx, s, de, true)
		if err != nil {
			return rec, err
		}
		if !sameRegion(want, de) {
			if rec.de, err = m.rt.writeRegion(ctx, s, global.DirOfRegion(m.region), m.region, rec.de, func(r *global.Region) error { *r = want; return nil }); err != nil {
				return rec, err
			}
		}
		if !sameRegion(want, dg) {
			if rec.dg, err = m.rt.writeRegion(ctx, dgs, global.DirGlobal, m.region, rec.dg, func(r *global.Region) error { *r = want; return nil }); err != nil {
				return rec, err
			}
			m.rt.log.Info("link: region record written into the global directory", "region", m.region,
				"leaser", want.LeasedBy(), "epoch", want.Epoch, "state", stateOf(want))
		}
		return rec, nil
	}
	want := m.decorateGlobal(dg, rec.snap.view)
	if sameRegion(want, de) {
		return rec, nil
	}
	raise := int64(0)
	if h := want.Handoff; h != nil && h.State == global.HandoffDone && h.To == global.LeaserRegion {
		raise = h.LeaseRecordMS // the region takes: count by the giver's record
	}
	var err error
	was := rec.de.Value
	if rec.de, err = s.AdoptRegion(ctx, m.region, rec.de, want, raise); err != nil {
		return rec, err
	}
	m.rt.auditRegion(global.DirOfRegion(m.region), was, want)
	m.rt.settleTo(ctx, rec.de.Rev) // the leasing's scope reads the view
	m.rt.leasing.Poke()
	m.rt.log.Info("link: region record taken from the global directory", "region", m.region,
		"leaser", want.LeasedBy(), "epoch", want.Epoch, "state", stateOf(want))
	return rec, nil
}

// epochGap refuses two region records whose epochs are more than
// lease.EpochMargin apart: no handoff moves an epoch so far while one
// directory looked away, so the larger number is not to be adopted into
// the other directory — it came from a record written by hand, or by a
// router that believed a forged grant. The operator looks at both
// records (GET /_shard/regions on each tier) and corrects the wrong one.
func epochGap(de, dg global.Region) error {
	lo, hi := min(de.Epoch, dg.Epoch), max(de.Epoch, dg.Epoch)
	if lease.EpochWithin(lo, hi) {
		return nil
	}
	return fmt.Errorf("%w: region %s's record is at epoch %d in its own directory and %d in the global one, more than %d apart: neither is adopted; correct the wrong record",
		global.ErrEpochBound, de.Name, de.Epoch, dg.Epoch, lease.EpochMargin)
}

// refuseGap logs and audits, once for each pair of epochs, the link
// refusing to bring two records epochs apart in line.
func (m *mirror) refuseGap(de, dg global.Region, err error) {
	m.mu.Lock()
	seen := m.gapSeen == [2]uint64{de.Epoch, dg.Epoch}
	m.gapSeen = [2]uint64{de.Epoch, dg.Epoch}
	m.mu.Unlock()
	if seen {
		return
	}
	m.rt.log.Error("link: region records not brought in line", "region", m.region, "err", err)
	m.rt.auditControl("region_record_refused", "", err.Error())
}

// decorate sets this router, its directory's term and longest-lease
// record (read from s, the region's directory) on r: the leasing side's,
// while the region leases.
func (m *mirror) decorate(ctx context.Context, s *global.Store, r global.Region, _ bool) (global.Region, error) {
	r = copyRegion(r, m.region)
	term, err := s.Term(ctx)
	if err != nil {
		return r, err
	}
	rec, err := s.LeaseRecord(ctx)
	if err != nil {
		return r, err
	}
	r.Term, r.LeaseRecordMS, r.Router = term.Value, rec.Value, m.rt.id
	return r, nil
}

// decorateGlobal sets the global tier's leading router, term and
// longest-lease record, as v (the global directory) has them, on r: the
// leasing side's while the global tier leases.
func (m *mirror) decorateGlobal(r global.Region, v *global.View) global.Region {
	r = copyRegion(r, m.region)
	r.Term, r.LeaseRecordMS, r.Router = v.Term, v.LeaseRecordMS, v.Leader.Router
	return r
}

// copyRegion is r named name, its handoff its own copy.
func copyRegion(r global.Region, name string) global.Region {
	r.Name = name
	if r.Handoff != nil {
		h := *r.Handoff
		r.Handoff = &h
	}
	return r
}

// sameRegion compares two region records as stored.
func sameRegion(a, b global.Region) bool {
	if (a.Handoff == nil) != (b.Handoff == nil) || a.Handoff != nil && *a.Handoff != *b.Handoff {
		return false
	}
	a.Handoff, b.Handoff = nil, nil
	return a.Name == b.Name && a.Leaser == b.Leaser && a.Epoch == b.Epoch && a.Since.Equal(b.Since) &&
		a.Router == b.Router && a.Term == b.Term && a.LeaseRecordMS == b.LeaseRecordMS
}

func stateOf(r global.Region) string {
	if r.Handoff == nil {
		return ""
	}
	return r.Handoff.State
}

// ready is the region's answer to an offer of its leasing: with its
// records copied down, it writes ready into the global directory; a router
// that cannot lease (no --auto-failover) rolls the offer back saying so.
func (m *mirror) ready(ctx context.Context, s, dgs *global.Store, rec linkRecords) (linkRecords, error) {
	var err error
	if m.rt.cfg.AutoFailover <= 0 {
		why := fmt.Sprintf("region %s's leading router %s runs without --auto-failover: start it with --auto-failover to take its region's leasing", m.region, m.rt.id)
		rec.dg, err = m.rt.writeRegion(ctx, dgs, global.DirGlobal, m.region, rec.dg, func(r *global.Region) error { return r.RollBack(why, m.rt.now()) })
		return rec, err
	}
	if _, err := m.down(ctx, s, rec.de, rec.dg); err != nil {
		return rec, err
	}
	rec.dg, err = m.rt.writeRegion(ctx, dgs, global.DirGlobal, m.region, rec.dg, func(r *global.Region) error { return r.Ready(m.rt.id, m.rt.now()) })
	if err == nil {
		m.rt.log.Info("handoff: ready to lease the region", "region", m.region)
	}
	return rec, err
}

// give hands the region's leasing to the global tier, which is ready to
// take it: it records the handoff given in its own directory first (its
// own changes for the region are refused from then on), stops granting
// the region's nodes — none of its grants is in flight once the leasing
// resynced — copies the region's records up one last time, and writes
// given into the global directory with its term and record.
func (m *mirror) give(ctx context.Context, s, dgs *global.Store, rec linkRecords) (linkRecords, error) {
	_, term := m.rt.lead.status()
	lr, err := s.LeaseRecord(ctx)
	if err != nil {
		return rec, err
	}
	now := m.rt.now()
	if rec.de, err = m.rt.writeRegion(ctx, s, global.DirOfRegion(m.region), m.region, rec.de, func(r *global.Region) error {
		return r.Give(m.rt.id, term, lr.Value, now, now)
	}); err != nil {
		return rec, err
	}
	m.mu.Lock()
	m.gaveAt = m.clock.Now()
	m.mu.Unlock()
	m.rt.settleTo(ctx, rec.de.Rev)
	m.rt.leasing.Resync() // the region's nodes leave the leasing: no grant to them is out from here
	m.rt.log.Info("handoff: stopped granting the region's nodes", "region", m.region, "term", term)
	if _, err := m.up(ctx, dgs, rec.de, rec.dg); err != nil {
		return rec, err
	}
	want := rec.de.Value
	rec.dg, err = m.rt.writeRegion(ctx, dgs, global.DirGlobal, m.region, rec.dg, func(r *global.Region) error { *r = want; return nil })
	return rec, err
}

// awaitTaken waits, as the giver, for the global tier to take the region;
// past the bound it rolls the handoff back in the global directory (if
// the global tier's done won the race, it is done) and leases again.
func (m *mirror) awaitTaken(ctx context.Context, s, dgs *global.Store, rec linkRecords) (linkRecords, error) {
	now := m.clock.Now()
	m.mu.Lock()
	if m.gaveAt == 0 {
		m.gaveAt = now // given before this router led: its wait starts now
	}
	since := now - m.gaveAt
	m.mu.Unlock()
	bound := handoffBound(m.rt.cfg.AutoFailover)
	if since < bound {
		return rec, nil
	}
	why := fmt.Sprintf("the global tier did not take region %s within %v", m.region, bound)
	dg, err := m.rt.writeRegion(ctx, dgs, global.DirGlobal, m.region, rec.dg, func(r *global.Region) error { return r.RollBack(why, m.rt.now()) })
	if err != nil {
		return rec, err
	}
	rec.dg = dg
	m.rt.log.Warn("handoff rolled back: leasing the region again", "region", m.region, "why", why)
	return m.align(ctx, s, dgs, rec)
}

// take takes the region's leasing the global tier gave: its records
// copied down one last time (the global tier changes none of them once it
// gave), the decisive done written into the global directory, then the
// region record into its own directory with the giver's record; the
// leasing starts from its view.
func (m *mirror) take(ctx context.Context, s, dgs *global.Store, rec linkRecords) (linkRecords, error) {
	var err error
	if m.rt.cfg.AutoFailover <= 0 {
		return rec, nil // it said ready only with --auto-failover; a router restarted without waits for the rollback
	}
	if _, err := m.down(ctx, s, rec.de, rec.dg); err != nil {
		return rec, err
	}
	if rec.dg, err = m.rt.writeRegion(ctx, dgs, global.DirGlobal, m.region, rec.dg, func(r *global.Region) error { return r.Take(m.rt.now()) }); err != nil {
		return rec, err
	}
	h := rec.dg.Value.Handoff
	m.rt.log.Info("handoff: the region leases its nodes", "region", m.region, "epoch", rec.dg.Value.Epoch,
		"giver_term", h.Term, "giver_record_ms", h.LeaseRecordMS)
	return m.align(ctx, s, dgs, rec)
}

// settleForce tells the leasing when a forced takeover is settled: once
// the global directory shows the region leasing at its epoch, and the
// global record and a tenth have passed since.
func (m *mirror) settleForce(rec linkRecords) {
	de, dg := rec.de.Value, rec.dg.Value
	forced := de.Handoff != nil && de.Handoff.Force && de.LeasedBy() == global.LeaserRegion
	if !forced {
		m.mu.Lock()
		m.ackedAt = 0
		m.mu.Unlock()
		m.rt.leasing.SettleForce(0)
		return
	}
	if dg.LeasedBy() != global.LeaserRegion || dg.Epoch < de.Epoch {
		return
	}
	m.mu.Lock()
	if m.ackedAt == 0 {
		m.ackedAt = m.clock.Now()
	}
	rl := time.Duration(rec.snap.view.LeaseRecordMS) * time.Millisecond
	at := m.ackedAt + rl + rl/10
	m.mu.Unlock()
	m.rt.leasing.SettleForce(at)
}
