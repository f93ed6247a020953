package copies

import "errors"

// Sentinel errors of a tenant's copies across regions. The router answers
// with the same values (package region), so errors.Is holds across the
// two; both are 409.
var (
	// ErrReadCopy: a read copy cannot be placed or kept where asked.
	ErrReadCopy = errors.New("read copy refused")
	// ErrSurvive: a tenant's survival cannot be set or kept as asked.
	ErrSurvive = errors.New("survival refused")
)
