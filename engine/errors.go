package engine

import (
	"errors"
	"fmt"

	"github.com/fenec-go/fenec/engine/hnsw"
	"github.com/fenec-go/fenec/engine/store"
)

// Sentinel errors; the node maps them to statuses in one table.
var (
	ErrClosed            = errors.New("tenant is closed")
	ErrUnknownCollection = errors.New("unknown collection")
	ErrUnknownField      = errors.New("unknown field")
	ErrTaken             = errors.New("id or unique value taken") // 409
	ErrRequire           = errors.New("require not met")          // 412
	ErrType              = errors.New("wrong type")               // 400
	ErrInvalid           = errors.New("invalid statement")        // 400
	ErrTooMany           = errors.New("more than 10000 rows")     // 400: a limit, offset or near without a limit past it
	ErrNotRead           = errors.New("statement is not a read")  // 400: DB.Read refused a statement that writes
	// ErrStopped is a statement stopped before its end because its
	// context ended (the client left, the caller's time bound passed); the
	// error wraps the context's cause too. Nothing it did landed.
	ErrStopped = errors.New("statement stopped")
	// ErrParams is an ErrInvalid of the parameters alone: fewer than the
	// statement names, or a value of no JSON type. Like a parse error it
	// depends on the request, never on the tenant's rows or schema.
	ErrParams = fmt.Errorf("%w (parameters)", ErrInvalid)
	// ErrNewerImage is a tenant file whose image a later fenec wrote, in
	// a format this one does not read: open it with that fenec (or a
	// later one), or restore an older copy.
	ErrNewerImage = errors.New("image written by a newer fenec: open the file with a fenec of its version or later")
	// ErrFault is a read of the mapped tenant file that faulted: the file
	// was shortened under the node by something other than fenec
	// (fault.go). The read fails; the tenant must be reopened. A graph's
	// reads answer the same error.
	ErrFault = hnsw.ErrFault
)

// The file's own errors are the store's: the engine returns them wrapped
// as they come.
var (
	ErrLocked     = store.ErrLocked   // the file is open (flocked) elsewhere
	ErrNotExist   = store.ErrNotExist // no tenant file at the path
	ErrExist      = store.ErrExist    // a tenant file is already there
	ErrCursorGone = store.ErrCursorGone
	ErrSeqGap     = store.ErrSeqGap
	ErrBadImage   = store.ErrBadImage
)

// ParseError is a statement the parser refused, with the byte offset.
type ParseError struct {
	Pos int
	Msg string
	// Err is the sentinel the refusal is an instance of, if any: ErrTooMany
	// for a limit, an offset or the two together past 10 000.
	Err error
}

func (e *ParseError) Error() string { return fmt.Sprintf("parse error at %d: %s", e.Pos, e.Msg) }
func (e *ParseError) Unwrap() error { return e.Err }

// DamagedError is a record before the file's tail that fails its CRC or
// framing (or a header or image that cannot be read): the file refuses to
// open, and the error names the offset.
type DamagedError = store.DamagedError

// GateError wraps what the write gate said.
type GateError struct{ Err error }

func (e *GateError) Error() string { return e.Err.Error() }
func (e *GateError) Unwrap() error { return e.Err }

// QuotaError wraps what the quota hook said.
type QuotaError struct{ Err error }

func (e *QuotaError) Error() string { return e.Err.Error() }
func (e *QuotaError) Unwrap() error { return e.Err }

// BatchError names the statement of a block that failed; nothing landed.
type BatchError struct {
	At        int // index of the failing statement
	Completed int // statements that ran before it (none of them landed)
	Err       error
}

func (e *BatchError) Error() string { return fmt.Sprintf("statement %d: %v", e.At, e.Err) }
func (e *BatchError) Unwrap() error { return e.Err }
