package lease

import "fmt"

// Bounds on the numbers a grant carries. A grant is sent by whoever holds
// a node's admin token, which every router of a deployment holds: a stolen
// token or a compromised router must not move a node's binding so far that
// no router can ever lease it again, nor carry a number whose next one
// wraps to zero.
const (
	// EpochMargin is how far past the epoch a node is bound at a grant
	// may name and still be taken. Each planned handoff moves a region's
	// epoch on by one and a forced takeover by two, so a node that missed
	// up to 32 round trips of its region's leasing (down meanwhile) takes
	// its leaser's next grant; a grant past it is refused 409 and logged.
	// A router adopts a region record from the other directory only
	// within the same margin of the epoch it knows (package region).
	EpochMargin = 64

	// MaxNumber is the largest term or epoch a grant may carry, and the
	// largest a directory moves a region's epoch to: 2^53, which every
	// JSON reader holds exactly, and far enough below 2^64 that adding a
	// margin or a step never wraps.
	MaxNumber = 1 << 53
)

// EpochWithin says whether a grant's epoch e may be taken by a node that
// knows epoch known: at most EpochMargin past it, and within MaxNumber.
func EpochWithin(known, e uint64) bool {
	return e <= MaxNumber && e <= min(known, MaxNumber)+EpochMargin
}

// NextEpoch is epoch e moved on by step, refused past MaxNumber (never
// wrapped).
func NextEpoch(e, step uint64) (uint64, error) {
	if e > MaxNumber || step > MaxNumber-e {
		return 0, fmt.Errorf("%w: epoch %d + %d is past %d", ErrEpochBound, e, step, uint64(MaxNumber))
	}
	return e + step, nil
}
