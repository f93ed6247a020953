package region

import "errors"

// Sentinel errors of the cross-tenant read (POST /_shard/query). The whole
// read's are wrapped with ErrBadRequest (400 by the control plane's
// table); a tenant's own are listed under its name in the answer.
var (
	// ErrTooManyRows: the merged answer would hold more than maxQueryRows
	// rows; the read is refused rather than cut short.
	ErrTooManyRows = errors.New("merged answer would hold more rows than the bound")
	// ErrAnswerTooLarge: a tenant's answer body passed maxTenantAnswer.
	ErrAnswerTooLarge = errors.New("tenant's answer larger than the bound")
	// ErrNotRows: a tenant's answer was not a JSON array of rows (objects).
	ErrNotRows = errors.New("answer is not an array of rows")
	// ErrOutOfOrder: a tenant's rows were not in the order the merge
	// states; the query must order them the same way.
	ErrOutOfOrder = errors.New("rows not in the merge's order (order the query by the same keys)")
)
