package nodeapi

import "errors"

// Sentinel errors of the node client. The router answers with the same
// values (package region), so errors.Is holds across the two.
var (
	// ErrNodeCall: an admin call to a node failed or was refused.
	ErrNodeCall = errors.New("node admin call")
	// ErrNodeCheck: the node did not answer its admin token.
	ErrNodeCheck = errors.New("node did not answer its admin token")
	// ErrTenantExists: the tenant is already placed (Create: the node
	// holds a file of it).
	ErrTenantExists = errors.New("tenant already exists")
	// ErrAnswerTooLarge: a tenant's answer to a read passed its bound.
	ErrAnswerTooLarge = errors.New("tenant's answer larger than the bound")
	// ErrNoBulkPromote: a node without POST /_admin/promote; its copies
	// are promoted one call each.
	ErrNoBulkPromote = errors.New("the node promotes one tenant a call")
)
