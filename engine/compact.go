package engine

import (
	"context"
	"fmt"
)

// The compact statement, and the rewrite a tenant gets as it closes.
//
// compact rewrites the file as an image of what the tenant holds now,
// keeping no record from before: the bytes of deleted and overwritten
// rows, of dropped collections, of refused blocks and of the graphs kept
// in the file's tail come back, and a tenant at its bytes quota writes
// again. It changes no row and writes no seq, so it is not a block: it
// runs on its own, never inside a block with other statements. Change
// cursors from before it are gone (a feed from there answers
// ErrCursorGone; a replica behind it is sent an image).

// compactStatement runs a parsed compact: the file rewritten, its sizes
// before and after in the answer.
func (db *DB) compactStatement(ctx context.Context) (*Result, uint64, error) {
	if err := ctx.Err(); err != nil {
		return nil, db.Seq(), err
	}
	before := db.FileBytes()
	if err := db.Compact(); err != nil {
		return nil, db.Seq(), err
	}
	after := db.FileBytes()
	return &Result{Kind: ResultMessage, Message: fmt.Sprintf("compacted: %d bytes, was %d", after, before)}, db.Seq(), nil
}

// Shrink checkpoints the file as it closes only where it gains by it:
// the rewrite is smaller than the file, or the records after its last
// image pass the retain bound (an open would replay more than a
// checkpoint keeps). A tenant nothing was written to since its open, and
// a small file of records, are left as they are: closing never grows a
// small file by an image. It reports whether the file was rewritten.
func (db *DB) Shrink() (bool, error) {
	db.mu.RLock()
	defer db.mu.RUnlock()
	if db.closed {
		return false, ErrClosed
	}
	snap, err := db.snapshotLocked(nil)
	if err != nil {
		return false, fmt.Errorf("checkpoint: %w", err)
	}
	defer snap.wait()
	did, err := db.log.Shrink(snap.write)
	if err != nil {
		return false, fmt.Errorf("checkpoint: %w", storeErr(err))
	}
	return did, nil
}
