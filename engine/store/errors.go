package store

import (
	"errors"
	"fmt"
)

// Sentinel errors; the engine maps them to its own.
var (
	ErrLocked     = errors.New("tenant file is open elsewhere")
	ErrExist      = errors.New("tenant file already exists")
	ErrNotExist   = errors.New("tenant file does not exist")
	ErrClosed     = errors.New("log is closed")
	ErrCursorGone = errors.New("records after this seq are no longer kept")
	ErrSeqGap     = errors.New("record does not continue this file's seq")
	ErrBadImage   = errors.New("image is damaged or cut short")
	ErrBadRecord  = errors.New("record is damaged")
	ErrBadKind    = errors.New("record kind is not the caller's to append")
	ErrTooLarge   = errors.New("record is larger than a frame can hold")
	ErrSpilling   = errors.New("a spilled block has not landed yet")
	// ErrFailed is returned by every write after a write or fsync failed:
	// what reached the disk is no longer known, so the Log takes nothing
	// more (close and open it again).
	ErrFailed = errors.New("log stopped after an I/O failure")
)

// DamagedError is a bad frame before the file's tail (a valid frame follows
// it), or a header or image that cannot be read: the file refuses to open.
type DamagedError struct {
	Path   string
	Offset int64
	Why    string
}

func (e *DamagedError) Error() string {
	return fmt.Sprintf("tenant file %s is damaged at offset %d: %s", e.Path, e.Offset, e.Why)
}
