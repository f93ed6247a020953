package link

import (
	"context"
	"fmt"
	"time"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/lease"
)

// The region's side of a handoff (package region's handoff.go says the
// whole): its leading router's link (link.go) keeps the region's own
// record in line with the global one and takes the region's steps —
// ready, give, wait for the taking, take — each a compare-and-swap in the
// global directory.

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
func (l *Link) reconcile(ctx context.Context, s, dgs *global.Store, snap globalSnap) (linkRecords, error) {
	rec := linkRecords{dg: snap.region, snap: snap}
	var err error
	if rec.de, err = s.ReadRegion(ctx, l.region); err != nil {
		return rec, err
	}
	l.mu.Lock()
	l.dgRec = rec.dg
	l.mu.Unlock()
	if rec, err = l.align(ctx, s, dgs, rec); err != nil {
		return rec, err
	}
	l.settleForce(rec)
	h := rec.de.Value.Handoff
	if h == nil {
		return rec, nil
	}
	switch {
	case h.To == global.LeaserGlobal && h.Unanswered(l.deps.Now(), l.deps.OfferWait):
		why := fmt.Sprintf("the global tier's leading router did not take the offer within %v: start or promote one (fenec-shard --auto-failover S, POST /_shard/promote), then ask again", l.deps.OfferWait)
		rec.dg, err = l.writeRegion(ctx, dgs, global.DirGlobal, rec.dg, func(r *global.Region) error { return r.RollBack(why, l.deps.Now()) })
		return rec, err
	case h.State == global.HandoffOffered && h.To == global.LeaserRegion:
		return l.ready(ctx, s, dgs, rec)
	case h.State == global.HandoffReady && h.To == global.LeaserGlobal:
		return l.give(ctx, s, dgs, rec)
	case h.State == global.HandoffGiven && h.To == global.LeaserRegion:
		return l.take(ctx, s, dgs, rec)
	case h.State == global.HandoffGiven && h.To == global.LeaserGlobal:
		return l.awaitTaken(ctx, s, dgs, rec)
	}
	l.mu.Lock()
	l.gaveAt = 0
	l.mu.Unlock()
	return rec, nil
}

// align makes the two records one: adopted into the region's directory
// (decorated with the global tier's leader, term and record while it
// leases), or pushed up into the global one (decorated with this router,
// its term and its record while the region leases).
func (l *Link) align(ctx context.Context, s, dgs *global.Store, rec linkRecords) (linkRecords, error) {
	de, dg := rec.de.Value, rec.dg.Value
	if err := epochGap(de, dg); err != nil {
		l.refuseGap(de, dg, err)
		return rec, err
	}
	push := de.Newer(dg) || (!dg.Newer(de) && de.LeasedBy() == global.LeaserRegion)
	if push {
		want, err := l.decorate(ctx, s, de)
		if err != nil {
			return rec, err
		}
		if !want.Equal(de) {
			if rec.de, err = l.writeRegion(ctx, s, global.DirOfRegion(l.region), rec.de, func(r *global.Region) error { *r = want; return nil }); err != nil {
				return rec, err
			}
		}
		if !want.Equal(dg) {
			if rec.dg, err = l.writeRegion(ctx, dgs, global.DirGlobal, rec.dg, func(r *global.Region) error { *r = want; return nil }); err != nil {
				return rec, err
			}
			l.log.Info("link: region record written into the global directory", "region", l.region,
				"leaser", want.LeasedBy(), "epoch", want.Epoch, "state", want.HandoffState())
		}
		return rec, nil
	}
	want := l.decorateGlobal(dg, rec.snap.view)
	if want.Equal(de) {
		return rec, nil
	}
	raise := int64(0)
	if h := want.Handoff; h != nil && h.State == global.HandoffDone && h.To == global.LeaserRegion {
		raise = h.LeaseRecordMS // the region takes: count by the giver's record
	}
	var err error
	was := rec.de.Value
	if rec.de, err = s.AdoptRegion(ctx, l.region, rec.de, want, raise); err != nil {
		return rec, err
	}
	l.deps.AuditRegion(global.DirOfRegion(l.region), was, want)
	l.deps.Settle(ctx, rec.de.Rev) // the leasing's scope reads the view
	l.deps.Leasing.Poke()
	l.log.Info("link: region record taken from the global directory", "region", l.region,
		"leaser", want.LeasedBy(), "epoch", want.Epoch, "state", want.HandoffState())
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
func (l *Link) refuseGap(de, dg global.Region, err error) {
	l.mu.Lock()
	seen := l.gapSeen == [2]uint64{de.Epoch, dg.Epoch}
	l.gapSeen = [2]uint64{de.Epoch, dg.Epoch}
	l.mu.Unlock()
	if seen {
		return
	}
	l.log.Error("link: region records not brought in line", "region", l.region, "err", err)
	l.deps.AuditControl("region_record_refused", err.Error())
}

// decorate sets this router, its directory's term and longest-lease
// record (read from s, the region's directory) on r: the leasing side's,
// while the region leases.
func (l *Link) decorate(ctx context.Context, s *global.Store, r global.Region) (global.Region, error) {
	r = copyRegion(r, l.region)
	term, err := s.Term(ctx)
	if err != nil {
		return r, err
	}
	rec, err := s.LeaseRecord(ctx)
	if err != nil {
		return r, err
	}
	r.Term, r.LeaseRecordMS, r.Router = term.Value, rec.Value, l.deps.ID
	return r, nil
}

// decorateGlobal sets the global tier's leading router, term and
// longest-lease record, as v (the global directory) has them, on r: the
// leasing side's while the global tier leases.
func (l *Link) decorateGlobal(r global.Region, v *global.View) global.Region {
	r = copyRegion(r, l.region)
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

// ready is the region's answer to an offer of its leasing: with its
// records copied down, it writes ready into the global directory; a router
// that cannot lease (no --auto-failover) rolls the offer back saying so.
func (l *Link) ready(ctx context.Context, s, dgs *global.Store, rec linkRecords) (linkRecords, error) {
	var err error
	if l.deps.Own <= 0 {
		why := fmt.Sprintf("region %s's leading router %s runs without --auto-failover: start it with --auto-failover to take its region's leasing", l.region, l.deps.ID)
		rec.dg, err = l.writeRegion(ctx, dgs, global.DirGlobal, rec.dg, func(r *global.Region) error { return r.RollBack(why, l.deps.Now()) })
		return rec, err
	}
	if _, err := l.down(ctx, s, rec.de, rec.dg); err != nil {
		return rec, err
	}
	rec.dg, err = l.writeRegion(ctx, dgs, global.DirGlobal, rec.dg, func(r *global.Region) error { return r.Ready(l.deps.ID, l.deps.Now()) })
	if err == nil {
		l.log.Info("handoff: ready to lease the region", "region", l.region)
	}
	return rec, err
}

// give hands the region's leasing to the global tier, which is ready to
// take it: it records the handoff given in its own directory first (its
// own changes for the region are refused from then on), stops granting
// the region's nodes — none of its grants is in flight once the leasing
// resynced — copies the region's records up one last time, and writes
// given into the global directory with its term and record.
func (l *Link) give(ctx context.Context, s, dgs *global.Store, rec linkRecords) (linkRecords, error) {
	_, term := l.deps.Lead.Status()
	lr, err := s.LeaseRecord(ctx)
	if err != nil {
		return rec, err
	}
	now := l.deps.Now()
	if rec.de, err = l.writeRegion(ctx, s, global.DirOfRegion(l.region), rec.de, func(r *global.Region) error {
		return r.Give(l.deps.ID, term, lr.Value, now, now)
	}); err != nil {
		return rec, err
	}
	l.mu.Lock()
	l.gaveAt = l.deps.Clock.Now()
	l.mu.Unlock()
	l.deps.Settle(ctx, rec.de.Rev)
	l.deps.Leasing.Resync() // the region's nodes leave the leasing: no grant to them is out from here
	l.log.Info("handoff: stopped granting the region's nodes", "region", l.region, "term", term)
	if _, err := l.up(ctx, dgs, rec.de, rec.dg); err != nil {
		return rec, err
	}
	want := rec.de.Value
	rec.dg, err = l.writeRegion(ctx, dgs, global.DirGlobal, rec.dg, func(r *global.Region) error { *r = want; return nil })
	return rec, err
}

// awaitTaken waits, as the giver, for the global tier to take the region;
// past the bound it rolls the handoff back in the global directory (if
// the global tier's done won the race, it is done) and leases again.
func (l *Link) awaitTaken(ctx context.Context, s, dgs *global.Store, rec linkRecords) (linkRecords, error) {
	now := l.deps.Clock.Now()
	l.mu.Lock()
	if l.gaveAt == 0 {
		l.gaveAt = now // given before this router led: its wait starts now
	}
	since := now - l.gaveAt
	l.mu.Unlock()
	bound := global.GiveBound(l.deps.Own)
	if since < bound {
		return rec, nil
	}
	why := fmt.Sprintf("the global tier did not take region %s within %v", l.region, bound)
	dg, err := l.writeRegion(ctx, dgs, global.DirGlobal, rec.dg, func(r *global.Region) error { return r.RollBack(why, l.deps.Now()) })
	if err != nil {
		return rec, err
	}
	rec.dg = dg
	l.log.Warn("handoff rolled back: leasing the region again", "region", l.region, "why", why)
	return l.align(ctx, s, dgs, rec)
}

// take takes the region's leasing the global tier gave: its records
// copied down one last time (the global tier changes none of them once it
// gave), the decisive done written into the global directory, then the
// region record into its own directory with the giver's record; the
// leasing starts from its view.
func (l *Link) take(ctx context.Context, s, dgs *global.Store, rec linkRecords) (linkRecords, error) {
	var err error
	if l.deps.Own <= 0 {
		return rec, nil // it said ready only with --auto-failover; a router restarted without waits for the rollback
	}
	if _, err := l.down(ctx, s, rec.de, rec.dg); err != nil {
		return rec, err
	}
	if rec.dg, err = l.writeRegion(ctx, dgs, global.DirGlobal, rec.dg, func(r *global.Region) error { return r.Take(l.deps.Now()) }); err != nil {
		return rec, err
	}
	h := rec.dg.Value.Handoff
	l.log.Info("handoff: the region leases its nodes", "region", l.region, "epoch", rec.dg.Value.Epoch,
		"giver_term", h.Term, "giver_record_ms", h.LeaseRecordMS)
	return l.align(ctx, s, dgs, rec)
}

// settleForce tells the leasing when a forced takeover is settled: once
// the global directory shows the region leasing at its epoch, and the
// global record and a tenth have passed since.
func (l *Link) settleForce(rec linkRecords) {
	de, dg := rec.de.Value, rec.dg.Value
	forced := de.Handoff != nil && de.Handoff.Force && de.LeasedBy() == global.LeaserRegion
	if !forced {
		l.mu.Lock()
		l.ackedAt = 0
		l.mu.Unlock()
		l.deps.Leasing.SettleForce(0)
		return
	}
	if dg.LeasedBy() != global.LeaserRegion || dg.Epoch < de.Epoch {
		return
	}
	l.mu.Lock()
	if l.ackedAt == 0 {
		l.ackedAt = l.deps.Clock.Now()
	}
	rl := time.Duration(rec.snap.view.LeaseRecordMS) * time.Millisecond
	at := l.ackedAt + rl + rl/10
	l.mu.Unlock()
	l.deps.Leasing.SettleForce(at)
}

// writeRegion rewrites the region's record in s (the directory dir names)
// as global.Store.UpdateRegion does, and audits the record written.
func (l *Link) writeRegion(ctx context.Context, s *global.Store, dir string, at global.Versioned[global.Region], fn func(*global.Region) error) (global.Versioned[global.Region], error) {
	out, err := s.UpdateRegion(ctx, l.region, at, fn)
	if err == nil {
		was := at.Value
		was.Name = l.region
		l.deps.AuditRegion(dir, was, out.Value)
	}
	return out, err
}
