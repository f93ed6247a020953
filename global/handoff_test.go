package global

import (
	"errors"
	"testing"
	"time"
)

func testAcceptHandoff(t *testing.T, s *Store) {
	ctx := testCtx(t)
	if _, err := s.ClaimLeader(ctx, "eu-1", 2); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RaiseLeaseRecord(ctx, 1000); err != nil {
		t.Fatal(err)
	}
	h := Handoff{From: LeaserGlobal, To: LeaserRegion, Term: 7, LeaseRecordMS: 5000,
		LastGrant: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), At: time.Date(2026, 3, 1, 0, 0, 1, 0, time.UTC)}
	term, err := s.AcceptHandoff(ctx, "eu", "eu-1", h)
	if err != nil {
		t.Fatal(err)
	}
	if term != 8 {
		t.Fatalf("term %d, want 8 (above the giver's 7)", term)
	}
	r, err := s.GetRegion(ctx, "eu")
	if err != nil || r.Value.Leaser != LeaserRegion || r.Value.Handoff == nil || *r.Value.Handoff != h {
		t.Fatalf("region after handoff: %+v (%v)", r.Value, err)
	}
	if l, _ := s.Leader(ctx); l.Value.Router != "eu-1" || l.Value.Term != 8 {
		t.Fatalf("leader %+v, want eu-1 at 8", l.Value)
	}
	if rec, _ := s.LeaseRecord(ctx); rec.Value != 5000 {
		t.Fatalf("lease record %d, want the giver's 5000", rec.Value)
	}
	// Handing back: the record is not lowered, the term moves on again.
	back := Handoff{From: LeaserRegion, To: LeaserGlobal, Term: 3, LeaseRecordMS: 200}
	term, err = s.AcceptHandoff(ctx, "eu", "eu-1", back)
	if err != nil || term != 9 {
		t.Fatalf("hand back: term %d, %v; want 9", term, err)
	}
	if rec, _ := s.LeaseRecord(ctx); rec.Value != 5000 {
		t.Fatalf("lease record lowered by a handoff to %d", rec.Value)
	}
	if _, err := s.AcceptHandoff(ctx, "eu", "eu-1", Handoff{From: LeaserRegion, To: LeaserRegion}); !errors.Is(err, ErrInvalidRecord) {
		t.Fatalf("handoff to the same side: err %v, want ErrInvalidRecord", err)
	}
}
