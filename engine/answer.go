package engine

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"slices"

	"github.com/fenec-go/fenec/engine/fql"
)

// A read's answer can be written out as it is encoded rather than built
// whole (DB.ReadStream): the statement runs under the read lock as any
// other, finding its rows — their documents, and a search's scores — and
// the rows are encoded from those documents after the lock is given back,
// a few at a time, as the caller writes them. Documents are never changed
// in place (a write replaces them), and the rows are projected through a
// copy of the collection's schema taken under the lock, so the answer is
// the state the read saw, whatever lands while it is being written. What
// it holds meanwhile is 8 bytes a row (16 with a search's score), not the
// rows: its caller is charged that (ReadOptions.Charge) before the lock is
// given back.
//
// A get with a lookup, a group or a count is answered as before, its rows
// built under the lock (each charged as it is built); so are the rows of
// a block's statements (BatchOptions.Charge).

// ReadOptions adjust one DB.ReadStream.
type ReadOptions struct {
	// Charge, when set, is told the bytes the answer is about to hold, as
	// it is made, under the read lock: it must not block. An error ends the
	// read with that error (the caller's, returned as it is).
	Charge func(bytes int64) error
}

// ReadStream runs st as Read does (only a statement that reads; ErrNotRead
// before anything runs otherwise), but a get whose answer is rows of a
// collection (no lookup, group or count) is answered with its rows not
// yet encoded: Result.Rows is nil, and Result.Encoder (or JSON) encodes
// them from what the read found, after the lock is given back.
func (db *DB) ReadStream(ctx context.Context, st Statement, opts ReadOptions) (*Result, uint64, error) {
	stmt, params, err := db.parse(st)
	if err != nil {
		return nil, db.Seq(), err
	}
	if !stmt.ReadOnly() {
		return nil, db.Seq(), fmt.Errorf("%w: %s writes", ErrNotRead, stmt.Verb())
	}
	db.mu.RLock()
	defer db.mu.RUnlock()
	if db.closed {
		return nil, 0, ErrClosed
	}
	r := &runner{st: db.st, params: params, now: db.nowMs(), stop: newStopper(ctx), lazy: true, charge: opts.Charge}
	res, err := r.run(stmt)
	return res, db.log.Seq(), err
}

// lazyRows are a get's rows not yet encoded: the documents it found, in
// answer order, and their scores from a search.
type lazyRows struct {
	c      *collection // a copy of the schema, nothing else: read with no lock
	docs   []*doc
	scores []float64 // nil unless the get searched
	sel    []fql.SelectItem
	maxRaw int // the largest document's stored bytes
	// A reference is held on each mapping docs are read from, given back
	// once nothing reaches the rows (lazyAnswer): an answer may be encoded
	// more than once (JSON).
}

// releasePins gives back a reference on each of tabs' mappings.
func releasePins(tabs []*docTable) {
	for _, t := range tabs {
		if t.hold != nil {
			t.hold.Release()
		}
	}
}

// detached is a collection holding c's schema as it is now and nothing
// else: rows are projected through it with no lock held, while an index
// created under the write lock rewrites c's own (its fields' names and
// positions never change).
func detached(c *collection) *collection {
	s := *c.sch
	s.Fields = slices.Clone(c.sch.Fields)
	return &collection{sch: &s}
}

// lazyAnswer makes a rows answer of docs (and their scores) to encode
// later, charging what it holds.
func (r *runner) lazyAnswer(c *collection, docs []*doc, scores []float64, sel []fql.SelectItem) (*Result, error) {
	l := &lazyRows{c: detached(c), docs: docs, scores: scores, sel: sel}
	var pins []*docTable
	for _, d := range docs {
		l.maxRaw = max(l.maxRaw, len(d.raw))
		if d.tab != nil && !slices.Contains(pins, d.tab) {
			if !d.tab.pin() {
				releasePins(pins)
				return nil, ErrClosed
			}
			pins = append(pins, d.tab)
		}
	}
	if len(pins) > 0 {
		runtime.AddCleanup(l, releasePins, pins)
	}
	if err := r.chargeBytes(int64(8*cap(docs) + 8*cap(scores) + 256)); err != nil {
		return nil, err
	}
	return &Result{Kind: ResultRows, lazy: l}, nil
}

// row builds answer row i.
func (l *lazyRows) row(i int) Row {
	h := hit{d: l.docs[i]}
	if l.scores != nil {
		h.score, h.hasScore = l.scores[i], true
	}
	return project(l.c, h, l.sel)
}

// rowBound is at most the bytes one row's JSON takes: every stored byte
// becomes at most six (a control character or a byte of invalid UTF-8 is
// \uXXXX; false is one byte stored), plus every field's name.
func (l *lazyRows) rowBound() int {
	n := 64
	for i := range l.c.sch.Fields {
		n += len(l.c.sch.Fields[i].Name) + 4
	}
	for _, it := range l.sel {
		n += len(it.Name()) + 4
	}
	return n + 6*l.maxRaw
}

// chargeBytes tells the read's Charge (if any) of n more bytes held.
func (r *runner) chargeBytes(n int64) error {
	if r.charge == nil {
		return nil
	}
	return r.charge(n)
}

// chargeRow charges a row built whole under the lock.
func (r *runner) chargeRow(row Row) error {
	if r.charge == nil {
		return nil
	}
	return r.charge(rowBytes(row))
}

// rowBytes estimates the memory a built row holds: its map and every
// value in it.
func rowBytes(row Row) int64 {
	n := int64(48)
	for k, v := range row {
		n += 16 + int64(len(k)) + valueBytes(v)
	}
	return n
}

func valueBytes(v any) int64 {
	switch x := v.(type) {
	case string:
		return 16 + int64(len(x))
	case []float32:
		return 24 + 4*int64(len(x))
	case []any:
		n := int64(24)
		for _, e := range x {
			n += 16 + valueBytes(e)
		}
		return n
	case map[string]any:
		return rowBytes(Row(x))
	case Row:
		return rowBytes(x)
	case []Row:
		n := int64(24)
		for _, e := range x {
			n += rowBytes(e)
		}
		return n
	}
	return 8
}

// Len is the number of rows of a rows answer.
func (r *Result) Len() int {
	if r.lazy != nil {
		return len(r.lazy.docs)
	}
	return len(r.Rows)
}

// EachRowID calls fn with the id of each row of a rows answer, in order
// (a row built whole without one is skipped).
func (r *Result) EachRowID(fn func(int64)) {
	if r.lazy != nil {
		for _, d := range r.lazy.docs {
			fn(d.id)
		}
		return
	}
	for _, row := range r.Rows {
		if id, ok := row["id"].(int64); ok {
			fn(id)
		}
	}
}

// RowsEncoder encodes a rows answer's JSON array a piece at a time.
type RowsEncoder struct {
	res  *Result
	next int  // the next row to encode
	open bool // '[' is out
	done bool // ']' is out, or err ended the rows
	err  error
}

// Err is why the rows ended before their closing (ErrFault), or nil.
func (e *RowsEncoder) Err() error { return e.err }

// Encoder returns an encoder of r's rows (for a Result of ResultRows
// kind).
func (r *Result) Encoder() *RowsEncoder { return &RowsEncoder{res: r} }

// Next appends the array's next piece to b: its opening, then whole rows
// until b holds at least size bytes, then its closing; done once the
// closing is out. The pieces together are the bytes JSON gives.
//
// A fault reading a mapped document (fault.go) ends the array where it
// is, unclosed: Next says done, and Err says why.
func (e *RowsEncoder) Next(b []byte, size int) (_ []byte, done bool) {
	if e.done {
		return b, true
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if err := faultErr(recover()); err != nil {
			e.err, e.done, done = err, true, true
		}
	}()
	if !e.open {
		b = append(b, '[')
		e.open = true
	}
	for e.next < e.res.Len() && len(b) < size {
		if e.next > 0 {
			b = append(b, ',')
		}
		if e.res.lazy != nil {
			b = appendRowJSON(b, e.res.lazy.row(e.next))
		} else {
			b = appendRowJSON(b, e.res.Rows[e.next])
		}
		e.next++
	}
	if e.next == e.res.Len() {
		b = append(b, ']')
		e.done = true
	}
	return b, e.done
}

// RowBound is at most the bytes of one row's JSON, for a buffer that
// must hold any row whole; 0 when the answer's rows are built (Rows), and
// hold what they hold already.
func (e *RowsEncoder) RowBound() int {
	if e.res.lazy == nil {
		return 0
	}
	return e.res.lazy.rowBound()
}
