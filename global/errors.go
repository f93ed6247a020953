package global

import "errors"

var (
	// ErrNotFound is returned when a key or record does not exist.
	ErrNotFound = errors.New("not found")
	// ErrConflict is returned when a transaction's condition failed: a key
	// changed (or appeared, or vanished) since the revision the caller read.
	ErrConflict = errors.New("directory changed since it was read")
	// ErrCompacted is returned (on a watch) when the revision asked for was
	// compacted away; the caller lists again and watches from the new list.
	ErrCompacted = errors.New("revision compacted")
	// ErrFutureRevision is returned when compacting past the current revision.
	ErrFutureRevision = errors.New("revision not yet reached")
	// ErrClosed is returned by a directory, store or watcher after Close.
	ErrClosed = errors.New("directory closed")
	// ErrInvalidKey is returned for an empty key or one outside the layout.
	ErrInvalidKey = errors.New("invalid key")
	// ErrInvalidName is returned for a name outside [a-z0-9_-]{1,64}.
	ErrInvalidName = errors.New("invalid name: a name is 1 to 64 characters of a-z, 0-9, _ and -")
	// ErrInvalidRecord is returned for a record that fails validation or
	// whose stored JSON cannot be decoded.
	ErrInvalidRecord = errors.New("invalid record")
	// ErrStaleTerm is returned by ClaimLeader when the term does not move
	// on past the leader's.
	ErrStaleTerm = errors.New("term does not move on")
	// ErrEmbedded is returned when an embedded etcd member cannot start or
	// stopped with an error.
	ErrEmbedded = errors.New("embedded etcd")
	// ErrUntrusted is returned for a node record a router must not use:
	// its token's seal does not open, or it is held in clear (UsableNode).
	ErrUntrusted = errors.New("node record not trusted")
	// ErrAuth is returned when the directory's etcd refused a client's
	// credentials, or asked for some it did not bring.
	ErrAuth = errors.New("directory authentication")
	// ErrPasswordFile: the directory's password file holds no password.
	ErrPasswordFile = errors.New("directory password file")
	// ErrHeld is returned when a tenant is held by another operation.
	ErrHeld = errors.New("tenant held by another operation")
	// ErrState is returned when a record is not in the state an operation
	// needs (a move finished on a tenant not moving, a failover onto the
	// node already serving it).
	ErrState = errors.New("record not in the state the operation needs")
)

// RecordNotFound is a record the directory does not hold, named as the
// API names it (its kind and name) rather than by its key: it is
// ErrNotFound. Get* return it.
type RecordNotFound struct {
	Kind string // "node", "tenant", "region", "quota"
	Name string
}

func (e *RecordNotFound) Error() string { return e.Kind + " " + e.Name + ": not found" }

// Is makes a RecordNotFound ErrNotFound.
func (e *RecordNotFound) Is(target error) bool { return target == ErrNotFound }
