package leasing

import (
	"errors"

	"github.com/fenec-go/fenec/region/lead"
	"github.com/fenec-go/fenec/region/nodeapi"
)

// Sentinel errors of the leasing. The router answers with the same values
// (package region), so errors.Is holds across the two.
var (
	// ErrNotLeader: this router does not lead, so it grants nothing
	// (GrantNow); the lead's (package region/lead).
	ErrNotLeader = lead.ErrNotLeader
	// ErrUnknownNode: no node of that name is recorded.
	ErrUnknownNode = errors.New("unknown node")
	// ErrNodeCall: an admin call to a node failed or was refused (the
	// node client's, package region/nodeapi).
	ErrNodeCall = nodeapi.ErrNodeCall
)
