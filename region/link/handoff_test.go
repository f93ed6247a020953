package link

import (
	"errors"
	"math"
	"testing"

	"github.com/fenec-go/fenec/global"
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
