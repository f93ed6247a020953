package lease

import (
	"errors"
	"fmt"
)

// Sentinel errors. The node maps the refusals to statuses with
// [ReplyStatus]; the router's transport turns statuses back into them with
// [DecodeReply].
var (
	// ErrLowerTerm: the grant names a lower term than one the node already
	// took (409, with the highest term). Returned as a *TermError.
	ErrLowerTerm = errors.New("grant of a lower term than one already taken")
	// ErrNeedsList: the grant carries no tenant list and the node does not
	// hold the list it names (412).
	ErrNeedsList = errors.New("node needs the tenant list")
	// ErrTakesNoLease: the node was started without --lease (409).
	ErrTakesNoLease = errors.New("this node takes no lease")
	// ErrBadGrant: the grant is malformed (400).
	ErrBadGrant = errors.New("malformed grant")
	// ErrClosed: the Leaser was closed.
	ErrClosed = errors.New("leaser is closed")
	// ErrStarted: the Leaser was started already.
	ErrStarted = errors.New("leaser already started")
	// ErrBadConfig: a configuration that cannot work.
	ErrBadConfig = errors.New("bad lease configuration")
)

// TermError is the 409 refusal of a grant from a lower term. It matches
// ErrLowerTerm with errors.Is.
type TermError struct {
	Highest uint64 // the highest term the node has taken
}

func (e *TermError) Error() string {
	return fmt.Sprintf("%v (highest %d)", ErrLowerTerm, e.Highest)
}

// Is makes errors.Is(err, ErrLowerTerm) true for a *TermError.
func (e *TermError) Is(target error) bool { return target == ErrLowerTerm }
