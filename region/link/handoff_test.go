package link

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/internal/testkit"
	"github.com/fenec-go/fenec/lease"
)

// The link never adopts a region record whose epoch is more than the
// margin from the other directory's: not the largest epoch a router once
// recorded on one node's word, in either direction.
func TestLinkRefusesEpochGap(t *testing.T) {
	for _, c := range []struct {
		de, dg uint64
		ok     bool
	}{
		{0, 0, true}, {3, 5, true}, {5, 3, true}, {1, 1 + lease.EpochMargin, true},
		{1, 2 + lease.EpochMargin, false}, {1, math.MaxUint64, false}, {math.MaxUint64, 1, false}, {math.MaxUint64, math.MaxUint64, false},
	} {
		err := epochGap(global.Region{Name: "eu", Epoch: c.de}, global.Region{Name: "eu", Epoch: c.dg})
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, global.ErrEpochBound)) {
			t.Errorf("records at %d and %d: %v", c.de, c.dg, err)
		}
	}
}

// globalStep writes fn into the global directory's record of region eu,
// as the global tier's leading router would, reading it again while the
// link's own writes race it.
func (l *linkedRegion) globalStep(tb testing.TB, fn func(*global.Region) error) {
	tb.Helper()
	ctx := testCtx(tb)
	testkit.Eventually(tb, testWait, func() error {
		at, err := l.g.ReadRegion(ctx, "eu")
		if err != nil {
			return err
		}
		_, err = l.g.UpdateRegion(ctx, "eu", at, fn)
		return err
	})
}

// waitRecord waits until s's record of region eu passes ok.
func waitRecord(tb testing.TB, s *global.Store, ok func(global.Region) error) global.Region {
	tb.Helper()
	var r global.Region
	testkit.Eventually(tb, testWait, func() error {
		at, err := s.ReadRegion(testCtx(tb), "eu")
		if err != nil {
			return err
		}
		r = at.Value
		return ok(r)
	})
	return r
}

// leasedAt says a record is leased by side at epoch with no handoff in
// flight.
func leasedAt(side string, epoch uint64) func(global.Region) error {
	return func(r global.Region) error {
		if r.Leaser != side || r.Epoch != epoch || r.InFlight() {
			return fmt.Errorf("leaser %s epoch %d state %q, want %s at %d", r.Leaser, r.Epoch, r.HandoffState(), side, epoch)
		}
		return nil
	}
}

// inState says a record's handoff is in state.
func inState(state string) func(global.Region) error {
	return func(r global.Region) error {
		if r.HandoffState() != state {
			return fmt.Errorf("state %q, want %q", r.HandoffState(), state)
		}
		return nil
	}
}

// The region's side of a planned handoff, both ways, with the global
// tier's steps written by the test: offered to the region, the link says
// ready; given, it takes (done, epoch 1, the giver's longer record raised
// in the region's directory) and from then copies the region's records
// up; offered back and made ready, it gives (the leasing resynced first,
// given into the global directory with this router's name), and follows
// the global tier's taking into its own directory.
func TestLinkHandoffBothWays(t *testing.T) {
	l := startLinkedRegion(t)
	rs := global.NewStore(l.rd)
	ctx := testCtx(t)
	now := time.Now().UTC()
	waitRecord(t, rs, leasedAt(global.LeaserGlobal, 0))

	l.globalStep(t, func(r *global.Region) error { return r.Offer(global.LeaserRegion, "g", now) })
	ready := waitRecord(t, l.g, inState(global.HandoffReady))
	if ready.Handoff.Taker != "eu-1" {
		t.Fatalf("ready by %q, want eu-1", ready.Handoff.Taker)
	}
	l.globalStep(t, func(r *global.Region) error { return r.Give("g", 7, 2500, now, now) })
	waitRecord(t, l.g, func(r global.Region) error {
		if err := leasedAt(global.LeaserRegion, 1)(r); err != nil {
			return err
		}
		if r.Router != "eu-1" || r.HandoffState() != global.HandoffDone {
			return fmt.Errorf("router %q state %q, want eu-1 done", r.Router, r.HandoffState())
		}
		return nil
	})
	waitRecord(t, rs, leasedAt(global.LeaserRegion, 1))
	if rec, err := rs.LeaseRecord(ctx); err != nil || rec.Value != 2500 {
		t.Fatalf("the region's longest-lease record after the take: %+v %v, want the giver's 2500", rec, err)
	}
	l.leasing.mu.Lock()
	pokes := l.leasing.pokes
	l.leasing.mu.Unlock()
	if pokes == 0 {
		t.Fatal("the leasing was not told the region record changed")
	}

	// The region leases: a placement written in its directory is copied up.
	fenced, err := l.lead.Changes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fenced.Txn().PutTenant("t9", 0, global.Tenant{Node: "e1", State: global.StateActive}).Commit(ctx); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, testWait, func() error {
		_, err := l.g.GetTenant(ctx, "t9")
		return err
	}, "t9, placed in the region's directory, in the global one")

	l.globalStep(t, func(r *global.Region) error { return r.Offer(global.LeaserGlobal, "eu-1", now) })
	waitRecord(t, rs, inState(global.HandoffOffered))
	l.globalStep(t, func(r *global.Region) error { return r.Ready("g", now) })
	given := waitRecord(t, l.g, inState(global.HandoffGiven))
	if h := given.Handoff; h.Giver != "eu-1" || h.LeaseRecordMS != 2500 {
		t.Fatalf("given: %+v, want given by eu-1 with record 2500", h)
	}
	waitRecord(t, rs, inState(global.HandoffGiven))
	l.leasing.mu.Lock()
	resyncs := l.leasing.resyncs
	l.leasing.mu.Unlock()
	if resyncs == 0 {
		t.Fatal("given without resyncing the leasing")
	}
	at, err := l.g.ReadRegion(ctx, "eu")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.g.TakeHandoff(ctx, "eu", at, now); err != nil {
		t.Fatal(err)
	}
	waitRecord(t, rs, leasedAt(global.LeaserGlobal, 2))
	if n := len(l.audit.with("region_record")); n < 4 {
		t.Fatalf("%d region records audited, want one for every record the link wrote", n)
	}
}

// A router without --auto-failover (Own 0) cannot lease its region's
// nodes: an offer of them is rolled back, saying so, and the global tier
// keeps leasing the region.
func TestLinkWithoutLeaseRollsOfferBack(t *testing.T) {
	l := startLinkedRegion(t, func(d *Deps) { d.Own = 0 })
	l.globalStep(t, func(r *global.Region) error { return r.Offer(global.LeaserRegion, "g", time.Now().UTC()) })
	r := waitRecord(t, l.g, inState(global.HandoffRolledBack))
	if r.LeasedBy() != global.LeaserGlobal || !strings.Contains(r.Handoff.Why, "--auto-failover") {
		t.Fatalf("rolled back: leased by %s, why %q; want the global tier, naming --auto-failover", r.LeasedBy(), r.Handoff.Why)
	}
}

// A region that gave its leasing waits GiveBound of its own lease for the
// global tier to take it; untaken by then, the link rolls the handoff
// back in the global directory and the region leases again.
func TestLinkGiverRollsBackUntaken(t *testing.T) {
	l := startLinkedRegion(t)
	rs := global.NewStore(l.rd)
	now := time.Now().UTC()
	l.globalStep(t, func(r *global.Region) error { return r.Offer(global.LeaserRegion, "g", now) })
	waitRecord(t, l.g, inState(global.HandoffReady))
	l.globalStep(t, func(r *global.Region) error { return r.Give("g", 7, 1500, now, now) })
	waitRecord(t, rs, leasedAt(global.LeaserRegion, 1))

	l.globalStep(t, func(r *global.Region) error { return r.Offer(global.LeaserGlobal, "eu-1", now) })
	waitRecord(t, rs, inState(global.HandoffOffered))
	l.globalStep(t, func(r *global.Region) error { return r.Ready("g", now) })
	given := time.Now()
	waitRecord(t, l.g, inState(global.HandoffGiven))
	r := waitRecord(t, l.g, inState(global.HandoffRolledBack))
	if waited := time.Since(given); waited < global.GiveBound(time.Second) {
		t.Fatalf("rolled back %v after it was given, before the bound %v", waited, global.GiveBound(time.Second))
	}
	if r.LeasedBy() != global.LeaserRegion || !strings.Contains(r.Handoff.Why, "did not take") {
		t.Fatalf("rolled back: leased by %s, why %q", r.LeasedBy(), r.Handoff.Why)
	}
	waitRecord(t, rs, func(r global.Region) error {
		if r.LeasedBy() != global.LeaserRegion || r.HandoffState() != global.HandoffRolledBack {
			return fmt.Errorf("leased by %s, state %q: want the region, rolled back", r.LeasedBy(), r.HandoffState())
		}
		return nil
	})
}

// Two records epochs apart are never brought in line: the region's
// record stays as it is, every step fails (the lead is told), and the
// refusal is audited once however often the link tries again.
func TestLinkRefusesEpochGapOnce(t *testing.T) {
	l := newLinkedRegion(t)
	ctx := testCtx(t)
	rs := global.NewStore(l.rd)
	if _, err := rs.Txn().PutRegion(0, global.Region{Name: "eu", Leaser: global.LeaserGlobal, Epoch: 1}).Commit(ctx); err != nil {
		t.Fatal(err)
	}
	l.globalStep(t, func(r *global.Region) error { r.Epoch = 2 + lease.EpochMargin; return nil })
	l.lead.lead(t)
	l.start(t)
	testkit.Eventually(t, testWait, func() error {
		l.lead.mu.Lock()
		defer l.lead.mu.Unlock()
		if n := len(l.lead.lost); n < 3 {
			return fmt.Errorf("%d steps failed", n)
		}
		if err := l.lead.lost[len(l.lead.lost)-1]; !errors.Is(err, global.ErrEpochBound) {
			return fmt.Errorf("a step failed with %v, want the epoch's bound", err)
		}
		return nil
	})
	if n := len(l.audit.with("region_record_refused")); n != 1 {
		t.Fatalf("the refusal audited %d times, want once", n)
	}
	if n := len(l.audit.with("region_record")); n != 0 {
		t.Fatalf("%d region records written across the gap", n)
	}
	at, err := rs.ReadRegion(ctx, "eu")
	if err != nil || at.Value.Epoch != 1 {
		t.Fatalf("the region's record: %+v %v, want it at epoch 1 still", at.Value, err)
	}
}
