package global

import (
	"errors"
	"sync"
	"testing"
	"time"
)

var handoffNow = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

// A planned handoff goes offered, ready, given, done, each step a
// compare-and-swap on the record read; taking it flips the leaser, moves
// the epoch on and raises the longest-lease record to the giver's in one
// transaction. Steps out of order are refused and change nothing.
func testHandoff(t *testing.T, s *Store) {
	ctx := testCtx(t)
	if _, err := s.RaiseLeaseRecord(ctx, 1000); err != nil {
		t.Fatal(err)
	}
	at, err := s.ReadRegion(ctx, "eu")
	if err != nil || at.Rev != 0 || at.Value.LeasedBy() != LeaserGlobal {
		t.Fatalf("a region with no record: %+v %v", at, err)
	}
	step := func(at Versioned[Region], fn func(*Region) error) Versioned[Region] {
		t.Helper()
		next, err := s.UpdateRegion(ctx, "eu", at, fn)
		if err != nil {
			t.Fatal(err)
		}
		return next
	}
	if _, err := s.UpdateRegion(ctx, "eu", at, func(r *Region) error { return r.Offer(LeaserGlobal, "g", handoffNow) }); !errors.Is(err, ErrHandoffState) {
		t.Fatalf("offered to the side that leases: %v", err)
	}
	if _, err := s.UpdateRegion(ctx, "eu", at, func(r *Region) error { return r.Take(handoffNow) }); !errors.Is(err, ErrHandoffState) {
		t.Fatalf("taken with nothing given: %v", err)
	}
	at = step(at, func(r *Region) error { return r.Offer(LeaserRegion, "g", handoffNow) })
	if _, err := s.UpdateRegion(ctx, "eu", at, func(r *Region) error { return r.Offer(LeaserRegion, "g", handoffNow) }); !errors.Is(err, ErrHandoffState) {
		t.Fatalf("offered twice: %v", err)
	}
	at = step(at, func(r *Region) error { return r.Ready("eu-1", handoffNow) })
	if !at.Value.InFlight() || at.Value.LeasedBy() != LeaserGlobal {
		t.Fatalf("ready: %+v", at.Value)
	}
	at = step(at, func(r *Region) error { return r.Give("g", 7, 5000, handoffNow, handoffNow) })
	if at.Value.LeasedBy() != "" {
		t.Fatalf("given: leased by %q, want nobody", at.Value.LeasedBy())
	}
	took, err := s.TakeHandoff(ctx, "eu", at, handoffNow)
	if err != nil {
		t.Fatal(err)
	}
	r := took.Value
	if r.LeasedBy() != LeaserRegion || r.Epoch != 1 || r.Handoff.State != HandoffDone || r.Handoff.Term != 7 || r.InFlight() {
		t.Fatalf("taken: %+v %+v", r, r.Handoff)
	}
	if rec, _ := s.LeaseRecord(ctx); rec.Value != 5000 {
		t.Fatalf("lease record %d, want the giver's 5000", rec.Value)
	}
	if got, _ := s.GetRegion(ctx, "eu"); got.Rev != took.Rev || !r.Newer(at.Value) || at.Value.Newer(r) {
		t.Fatalf("stored %+v at %d", got, got.Rev)
	}
	// Back again, then rolled back: the epoch does not move, the giver
	// leases; a second rollback is refused.
	at = step(took, func(r *Region) error { return r.Offer(LeaserGlobal, "eu-1", handoffNow) })
	at = step(at, func(r *Region) error { return r.Ready("g", handoffNow) })
	at = step(at, func(r *Region) error { return r.Give("eu-1", 3, 200, handoffNow, handoffNow) })
	at = step(at, func(r *Region) error { return r.RollBack("not taken in time", handoffNow) })
	if at.Value.LeasedBy() != LeaserRegion || at.Value.Epoch != 1 || at.Value.Handoff.Why != "not taken in time" {
		t.Fatalf("rolled back: %+v %+v", at.Value, at.Value.Handoff)
	}
	if _, err := s.UpdateRegion(ctx, "eu", at, func(r *Region) error { return r.RollBack("again", handoffNow) }); !errors.Is(err, ErrHandoffState) {
		t.Fatalf("rolled back twice: %v", err)
	}
	if rec, _ := s.LeaseRecord(ctx); rec.Value != 5000 {
		t.Fatalf("lease record lowered by a handoff to %d", rec.Value)
	}
	// A forced takeover moves the epoch two above the highest known.
	var forced Region
	forced = Region{Name: "us", Leaser: LeaserGlobal, Epoch: 4}
	if err := forced.Force("us-1", 6, 3000, "op", handoffNow); err != nil || forced.Epoch != 8 || forced.LeasedBy() != LeaserRegion || !forced.Handoff.Force {
		t.Fatalf("forced: %+v %v", forced, err)
	}
	if err := forced.Force("us-1", 6, 3000, "op", handoffNow); !errors.Is(err, ErrHandoffState) {
		t.Fatalf("forced twice: %v", err)
	}
}

// Of a taker's done and a giver's rollback, racing on the same given
// record, exactly one lands.
func testHandoffRace(t *testing.T, s *Store) {
	ctx := testCtx(t)
	for i := range 20 {
		at, err := s.ReadRegion(ctx, "eu")
		if err != nil {
			t.Fatal(err)
		}
		if at.Value.LeasedBy() == LeaserRegion {
			at, err = s.UpdateRegion(ctx, "eu", at, func(r *Region) error { return r.Offer(LeaserGlobal, "x", handoffNow) })
		} else {
			at, err = s.UpdateRegion(ctx, "eu", at, func(r *Region) error { return r.Offer(LeaserRegion, "x", handoffNow) })
		}
		if err != nil {
			t.Fatal(err)
		}
		if at, err = s.UpdateRegion(ctx, "eu", at, func(r *Region) error { return r.Ready("t", handoffNow) }); err != nil {
			t.Fatal(err)
		}
		if at, err = s.UpdateRegion(ctx, "eu", at, func(r *Region) error { return r.Give("g", 1, 100, handoffNow, handoffNow) }); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var takeErr, backErr error
		wg.Go(func() { _, takeErr = s.TakeHandoff(ctx, "eu", at, handoffNow) })
		wg.Go(func() {
			_, backErr = s.UpdateRegion(ctx, "eu", at, func(r *Region) error { return r.RollBack("late", handoffNow) })
		})
		wg.Wait()
		if (takeErr == nil) == (backErr == nil) {
			t.Fatalf("round %d: take %v, rollback %v: want exactly one", i, takeErr, backErr)
		}
		for _, err := range []error{takeErr, backErr} {
			if err != nil && !errors.Is(err, ErrConflict) {
				t.Fatalf("round %d: the loser failed with %v, want a conflict", i, err)
			}
		}
	}
}

// A directory names itself once; a router naming it otherwise is refused.
func testClaimName(t *testing.T, s *Store) {
	ctx := testCtx(t)
	if err := s.ClaimName(ctx, DirOfRegion("eu")); err != nil {
		t.Fatal(err)
	}
	if err := s.ClaimName(ctx, DirOfRegion("eu")); err != nil {
		t.Fatalf("the same name again: %v", err)
	}
	if err := s.ClaimName(ctx, DirGlobal); !errors.Is(err, ErrWrongDirectory) {
		t.Fatalf("another name: %v", err)
	}
	if DirOf(LeaserRegion, "eu") != "region:eu" || DirOf(LeaserGlobal, "eu") != "global" {
		t.Fatal("DirOf")
	}
}

// A guarded store writes only while its guard holds.
func testGuarded(t *testing.T, s *Store) {
	ctx := testCtx(t)
	at, err := s.UpdateRegion(ctx, "eu", Versioned[Region]{}, func(*Region) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	g := s.Guarded(IfModRev(RegionKey("eu"), at.Rev))
	if _, err := g.Txn().PutNode("n1", 0, Node{Addr: "http://n1", Region: "eu"}).Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateRegion(ctx, "eu", at, func(r *Region) error { return r.Offer(LeaserRegion, "x", handoffNow) }); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Txn().PutNode("n2", 0, Node{Addr: "http://n2", Region: "eu"}).Commit(ctx); !errors.Is(err, ErrConflict) {
		t.Fatalf("a guarded write after the guard moved: %v", err)
	}
	if _, err := s.GetNode(ctx, "n2"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("n2 written: %v", err)
	}
}

// Two region records are equal as stored only field by field, the
// handoff's too (not the pointer); an offer is unanswered from wait on,
// and only while it is offered; a giver waits its own lease, a second at
// least.
func TestRegionRules(t *testing.T) {
	h := Handoff{From: LeaserGlobal, To: LeaserRegion, State: HandoffOffered, Seq: 1, At: handoffNow}
	base := Region{Name: "eu", Leaser: LeaserGlobal, Epoch: 3, Router: "g", Term: 2, LeaseRecordMS: 1500, Handoff: &h}
	same := base
	h2 := h
	same.Handoff = &h2
	for _, c := range []struct {
		name string
		b    func(r *Region)
		want bool
	}{
		{"its copy", func(*Region) {}, true},
		{"another epoch", func(r *Region) { r.Epoch++ }, false},
		{"another router", func(r *Region) { r.Router = "h" }, false},
		{"another record", func(r *Region) { r.LeaseRecordMS++ }, false},
		{"no handoff", func(r *Region) { r.Handoff = nil }, false},
		{"the handoff's state", func(r *Region) { h := *r.Handoff; h.State = HandoffReady; r.Handoff = &h }, false},
	} {
		b := same
		c.b(&b)
		if got := base.Equal(b); got != c.want {
			t.Errorf("%s: Equal %v, want %v", c.name, got, c.want)
		}
	}
	if got := (Region{}).HandoffState(); got != "" {
		t.Errorf("no handoff: state %q", got)
	}
	if got := base.HandoffState(); got != HandoffOffered {
		t.Errorf("offered: state %q", got)
	}
	for _, c := range []struct {
		state string
		after time.Duration
		want  bool
	}{
		{HandoffOffered, time.Second - 1, false}, {HandoffOffered, time.Second, true}, {HandoffReady, time.Hour, false},
	} {
		h := Handoff{State: c.state, At: handoffNow}
		if got := h.Unanswered(handoffNow.Add(c.after), time.Second); got != c.want {
			t.Errorf("%s %v later: unanswered %v, want %v", c.state, c.after, got, c.want)
		}
	}
	for _, c := range []struct{ own, want time.Duration }{{0, time.Second}, {300 * time.Millisecond, time.Second}, {5 * time.Second, 5 * time.Second}} {
		if got := GiveBound(c.own); got != c.want {
			t.Errorf("GiveBound(%v) = %v, want %v", c.own, got, c.want)
		}
	}
}
