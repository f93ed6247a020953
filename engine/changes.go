package engine

import (
	"errors"
	"fmt"
	"runtime/debug"

	"github.com/fenec-go/fenec/engine/store"
)

// Watch calls fn after every landed block, in seq order, under the write
// lock: fn must not block. The returned func stops it.
func (db *DB) Watch(fn func(Change)) (stop func()) {
	db.mu.Lock()
	id := db.nextW
	db.nextW++
	db.watchers[id] = fn
	db.mu.Unlock()
	return func() {
		db.mu.Lock()
		delete(db.watchers, id)
		db.mu.Unlock()
	}
}

// notifyLocked tells the watchers of a landed block. Called with mu held.
func (db *DB) notifyLocked(seq uint64, ops []blockOp) {
	if len(db.watchers) == 0 {
		return
	}
	ch := db.change(seq, ops)
	for _, fn := range db.watchers {
		fn(ch)
	}
}

// change turns a block's ops into what watchers and change cursors see.
// Schema changes carry no documents.
func (db *DB) change(seq uint64, ops []blockOp) Change {
	ch := Change{Seq: seq}
	for i := range ops {
		o := &ops[i]
		switch o.kind {
		case opPut:
			ch.Puts = append(ch.Puts, DocChange{Coll: o.coll, ID: o.doc.id, Doc: db.opRow(o)})
		case opDel:
			ch.Dels = append(ch.Dels, DocChange{Coll: o.coll, ID: o.id})
		}
	}
	return ch
}

// opRow names a put's values by its schema: the one it was written with
// when known, else the collection's current one.
func (db *DB) opRow(o *blockOp) Row {
	s := o.sch
	if s == nil {
		if c := db.st.colls[o.coll]; c != nil {
			s = c.sch
		}
	}
	row := make(Row, o.nvals+1)
	row["id"] = o.doc.id
	for i, v := range o.doc.values(o.nvals) {
		if s != nil && i < len(s.Fields) {
			row[s.Fields[i].Name] = v
		} else {
			row[fmt.Sprintf("_%d", i)] = v
		}
	}
	return row
}

// errStop ends a ReadFrom early.
var errStop = errors.New("stop")

// ChangesSince returns the changes after seq since, at most limit blocks,
// read from the records still in the file. ErrCursorGone when records
// after since are no longer kept (the caller reseeds).
func (db *DB) ChangesSince(since uint64, limit int) ([]Change, error) {
	if limit <= 0 {
		limit = 1000
	}
	// The store reads only what is durable; a cursor wants every landed
	// block, so put the rest on disk first.
	if db.log.Durable() < db.log.Seq() {
		if err := db.log.Sync(); err != nil {
			return nil, fmt.Errorf("changes since %d: %w", since, storeErr(err))
		}
	}
	var out []Change
	err := db.log.ReadFrom(since, func(rec store.Record) error {
		if rec.Kind != kindBlock {
			return nil
		}
		ops, err := decodeBlock(rec.Body, true)
		if err != nil {
			return err
		}
		db.mu.RLock()
		ch := db.change(rec.Last, ops)
		db.mu.RUnlock()
		out = append(out, ch)
		if len(out) >= limit {
			return errStop
		}
		return nil
	})
	if err != nil && !errors.Is(err, errStop) {
		return nil, fmt.Errorf("changes since %d: %w", since, storeErr(err))
	}
	return out, nil
}

// RecordCursor is where a ReadRecords stopped: the next, from where it
// left the caller, starts there.
type RecordCursor = store.Cursor

// ReadRecords calls fn for every durable record whose writes come after
// seq since, in order; ErrCursorGone when they are no longer kept. With a
// cursor (nil: none) a read from the seq the last one left it at starts
// where that one stopped, giving none of the records it gave again, and
// leaves the cursor where it stops.
func (db *DB) ReadRecords(cur *RecordCursor, since uint64, fn func(RawRecord) error) error {
	var fnErr error
	err := db.log.ReadAt(cur, since, func(rec store.Record) error {
		if fnErr = fn(RawRecord{First: rec.First, Last: rec.Last, Bytes: rec.Frame}); fnErr != nil {
			return fnErr
		}
		return nil
	})
	if err != nil && fnErr != nil && errors.Is(err, fnErr) {
		return fnErr
	}
	if err != nil {
		return fmt.Errorf("read records since %d: %w", since, storeErr(err))
	}
	return nil
}

// applyGuarded is applyBody of a record a replica follows, a fault
// reading a mapped document it replaces (fault.go) undoing what t kept
// and answered as ErrFault.
func applyGuarded(t *txn, body []byte, n uint64) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if e := faultErr(recover()); e != nil {
			t.rollback()
			err = e
		}
	}()
	return applyBody(t, body, n, false, new(blockOp))
}

// ApplyRecord appends a record read from a primary's ReadRecords and
// applies it (a replica's follow). It must continue this file's seq.
func (db *DB) ApplyRecord(rec RawRecord) error {
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.closed {
		return ErrClosed
	}
	// PeekRaw gives a block whole, with the spilled pieces that came
	// before it.
	dec, err := db.log.PeekRaw(rec.Bytes)
	if err != nil {
		return fmt.Errorf("apply record: %w", storeErr(err))
	}
	if dec.First != db.log.Seq()+1 {
		return fmt.Errorf("%w: record starts at %d, file is at %d", ErrSeqGap, dec.First, db.log.Seq())
	}
	var t *txn
	if dec.Kind == kindBlock {
		// Apply first (with undo) so a record this file cannot take is
		// refused before it is appended.
		t = &txn{st: db.st}
		if err = applyGuarded(t, dec.Body, dec.N()); err != nil {
			return fmt.Errorf("%w: %v", ErrInvalid, err)
		}
	}
	out, err := db.log.AppendRaw(rec.Bytes)
	if err != nil {
		if t != nil {
			t.rollback()
		}
		return fmt.Errorf("apply record: %w", storeErr(err))
	}
	if t != nil {
		db.notifyLocked(out.Last, t.ops)
	}
	return nil
}
