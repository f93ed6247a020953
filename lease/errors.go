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
	// ErrOtherDirectory: the node is leased by another directory than the
	// grant's, and the grant carries no handoff from it it can take, or
	// the grant is of an earlier epoch (409, naming the directory).
	// Returned as a *DirectoryError.
	ErrOtherDirectory = errors.New("this node is leased by another directory")
	// ErrEpochBound: the grant names an epoch more than EpochMargin past
	// the one the node is bound at, or a term or epoch past MaxNumber
	// (409, naming the node's binding). Returned as a *BoundError.
	ErrEpochBound = errors.New("grant's epoch or term is past the bound")
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

// DirectoryError is the 409 refusal of a grant from a directory other than
// the one the node is bound to (with no handoff from it the node can
// take), or of an earlier epoch. It names the node's binding. It matches
// ErrOtherDirectory with errors.Is.
type DirectoryError struct {
	Dir   string // the directory leasing the node
	Epoch uint64 // the epoch it leases the node at
	Term  uint64 // the highest term the node took from it
}

func (e *DirectoryError) Error() string {
	return fmt.Sprintf("%v: %s, at epoch %d (term %d): a grant from another directory needs a handoff from it",
		ErrOtherDirectory, e.Dir, e.Epoch, e.Term)
}

// Is makes errors.Is(err, ErrOtherDirectory) true for a *DirectoryError.
func (e *DirectoryError) Is(target error) bool { return target == ErrOtherDirectory }

// BoundError is the 409 refusal of a grant whose epoch is more than
// EpochMargin past the node's, or whose term or epoch is past MaxNumber.
// It names the node's binding, and matches ErrEpochBound with errors.Is.
// A router meeting it treats the node as it treats one that does not
// answer: it is neither deposed nor told another directory leases it.
type BoundError struct {
	Dir   string // the directory leasing the node
	Epoch uint64 // the epoch it leases the node at
	Term  uint64 // the highest term the node took from it
	Asked uint64 // the epoch (or term) the grant named
}

func (e *BoundError) Error() string {
	return fmt.Sprintf("%v: the grant names %d; this node is bound to %q at epoch %d (term %d) and takes at most %d epochs more, and no number past %d",
		ErrEpochBound, e.Asked, e.Dir, e.Epoch, e.Term, EpochMargin, uint64(MaxNumber))
}

// Is makes errors.Is(err, ErrEpochBound) true for a *BoundError.
func (e *BoundError) Is(target error) bool { return target == ErrEpochBound }
