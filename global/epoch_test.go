package global

import (
	"math"
	"testing"

	"github.com/fenec-go/fenec/lease"
)

// A region's epoch never wraps: taking a handoff at the largest epoch, or
// forcing a takeover whose next epoch passes the bound, is refused and
// leaves the record as it was (the record at MaxUint64 was what a forged
// grant once put there; taking it back answered epoch 0 and the two
// directories then rewrote the record back and forth). A forced takeover
// does not adopt a known epoch more than the margin past the record's.
func TestRegionEpochNeverWraps(t *testing.T) {
	given := func(epoch uint64) Region {
		return Region{Name: "eu", Leaser: LeaserRegion, Epoch: epoch,
			Handoff: &Handoff{From: LeaserRegion, To: LeaserGlobal, State: HandoffGiven, Seq: 3}}
	}
	for _, epoch := range []uint64{math.MaxUint64, lease.MaxNumber} {
		r := given(epoch)
		if err := r.Take(handoffNow); err == nil || r.Epoch != epoch || r.Handoff.State != HandoffGiven || r.Leaser != LeaserRegion {
			t.Fatalf("take at epoch %d: %v, record %+v", epoch, err, r)
		}
	}
	if r := given(7); r.Take(handoffNow) != nil || r.Epoch != 8 {
		t.Fatalf("take at epoch 7: %+v", r)
	}
	for _, c := range []struct {
		epoch, known uint64
		want         uint64 // 0: refused
	}{
		{math.MaxUint64, 0, 0},
		{lease.MaxNumber - 1, 0, 0},
		{4, math.MaxUint64, 0},
		{4, 4 + lease.EpochMargin + 1, 0},
		{4, 4 + lease.EpochMargin, 4 + lease.EpochMargin + 2},
		{4, 6, 8},
		{9, 6, 11},
	} {
		r := Region{Name: "eu", Leaser: LeaserGlobal, Epoch: c.epoch}
		err := r.Force("eu-1", c.known, 3000, "op", handoffNow)
		switch {
		case c.want == 0 && (err == nil || r.Epoch != c.epoch || r.LeasedBy() != LeaserGlobal):
			t.Errorf("force at %d knowing %d: %v, record %+v", c.epoch, c.known, err, r)
		case c.want != 0 && (err != nil || r.Epoch != c.want):
			t.Errorf("force at %d knowing %d: %v, epoch %d, want %d", c.epoch, c.known, err, r.Epoch, c.want)
		}
	}
}
