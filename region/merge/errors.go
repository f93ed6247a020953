package merge

import "errors"

// Sentinel errors of the merge. ErrBadRule and ErrTooManyRows refuse the
// whole read (the control plane answers them 400); the others are a
// tenant's own, listed under its name in the answer.
var (
	// ErrBadRule: the rule is not exactly one of concat, order or group,
	// or names no field where it must.
	ErrBadRule = errors.New("bad merge rule")
	// ErrTooManyRows: the merged answer would hold more than MaxRows
	// rows; the read is refused rather than cut short.
	ErrTooManyRows = errors.New("merged answer would hold more rows than the bound")
	// ErrNotRows: a tenant's answer was not a JSON array of rows (objects).
	ErrNotRows = errors.New("answer is not an array of rows")
	// ErrOutOfOrder: a tenant's rows were not in the order the merge
	// states; the query must order them the same way.
	ErrOutOfOrder = errors.New("rows not in the merge's order (order the query by the same keys)")
)
