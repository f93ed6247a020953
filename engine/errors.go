package engine

import (
	"errors"
	"fmt"
)

// Sentinel errors; the node maps them to statuses in one table.
var (
	ErrLocked            = errors.New("tenant file is open in another process")
	ErrNotExist          = errors.New("tenant file does not exist")
	ErrExist             = errors.New("tenant file already exists")
	ErrClosed            = errors.New("tenant is closed")
	ErrUnknownCollection = errors.New("unknown collection")
	ErrUnknownField      = errors.New("unknown field")
	ErrTaken             = errors.New("id or unique value taken")    // 409
	ErrRequire           = errors.New("require not met")             // 412
	ErrType              = errors.New("wrong type")                  // 400
	ErrInvalid           = errors.New("invalid statement")           // 400
	ErrTooMany           = errors.New("limit and offset past 10000") // 400
	ErrCursorGone        = errors.New("changes before this cursor are no longer kept")
	ErrSeqGap            = errors.New("record does not continue this file's seq")
	ErrBadImage          = errors.New("image is damaged or cut short")
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
// framing: the file refuses to open.
type DamagedError struct {
	Path   string
	Offset int64
	Why    string
}

func (e *DamagedError) Error() string {
	return fmt.Sprintf("tenant file %s is damaged at offset %d: %s", e.Path, e.Offset, e.Why)
}

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
