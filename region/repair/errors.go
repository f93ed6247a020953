package repair

import "errors"

// Sentinel errors of the repair and of making copies. The router answers
// with the same values (package region), so errors.Is holds across the
// two.
var (
	// ErrNoCandidate: no node of the region can take a tenant (409).
	ErrNoCandidate = errors.New("no node to place the tenant on")
	// ErrCopyBehind: a new copy did not take its primary's image in time
	// (502).
	ErrCopyBehind = errors.New("copy did not catch up with its primary")
	// ErrSameNode: a copy, or a move, onto the node already serving the
	// tenant (409).
	ErrSameNode = errors.New("tenant is already on that node")
)

// errNotLeftBehind: the file is not a move's source to collect; nothing
// is done.
var errNotLeftBehind = errors.New("not a moved tenant's source left frozen")
