package engine

// This file is the engine's public surface: what the node (and tests, and
// benchmarks) may call. Everything else in the package is unexported.

import (
	"context"
	"io"
	"log/slog"
	"time"
)

// SyncMode says when appended records reach the disk.
type SyncMode int

const (
	// SyncEvery fsyncs at most every Options.SyncEvery (default 100 ms);
	// a record is durable once the next tick has synced it.
	SyncEvery SyncMode = iota
	// SyncAlways fsyncs before a write returns.
	SyncAlways
	// SyncOff never fsyncs (the kernel writes back when it likes).
	SyncOff
)

// Options configures one open tenant file.
type Options struct {
	Sync      SyncMode
	SyncEvery time.Duration // for SyncEvery; default 100 ms

	// Logger receives what the engine notices (a torn tail cut off, a
	// sweep). Nil means slog.Default().
	Logger *slog.Logger

	// Now is the clock for now(), @ttl and the sweeper. Nil means time.Now.
	Now func() time.Time

	// Gate is asked under the write lock as each block lands. A non-nil
	// error lands nothing; Exec and Batch return a *GateError wrapping it.
	Gate func() error

	// Quota is asked under the write lock as each block lands, after the
	// gate, with the block's exact record length and the rows it adds. A
	// non-nil error lands nothing; the caller gets a *QuotaError wrapping it.
	Quota func(QuotaAsk) error

	// NoSweep turns off the TTL sweeper (replicas never sweep; their
	// primary's deletes arrive by replication). Expired rows stay hidden
	// from reads either way.
	NoSweep bool

	// SweepEvery is how often the TTL sweeper looks; default 1 s.
	SweepEvery time.Duration
}

// QuotaAsk is what the quota hook is told about a block about to land.
type QuotaAsk struct {
	RecordBytes int64 // exact length of the record about to be appended, framing included
	FileBytes   int64 // bytes in the file before it
	AddRows     int64 // net rows the block adds to collections not starting with "_"
	Rows        int64 // rows in those collections before it
	Rollback    bool  // true when the block only takes away (delete, drop): quotas let it through
}

// Statement is one statement of the query language with its $1..$n
// parameters (JSON-decoded values: nil, bool, float64 or json.Number,
// string, []any, map[string]any).
type Statement struct {
	Query  string
	Params []any
}

// ResultKind says which of Result's fields carries the answer.
type ResultKind int

const (
	ResultRows     ResultKind = iota // Rows
	ResultAffected                   // Affected (put, insert, set, del without returning)
	ResultCount                      // Count
	ResultMessage                    // Message (DDL)
)

// Result is one statement's answer.
type Result struct {
	Kind     ResultKind
	Rows     []Row
	Affected int64
	Count    int64
	Message  string

	// Write is true for statements that write (they may have written
	// nothing, e.g. a set whose filter matched no row).
	Write bool
	// Claim is true for a set or del statement that took nothing: what
	// Fenec-Wait holds.
	Claim bool
	// WakeAt, for a Claim, is the next moment a time-based filter (now(),
	// @ttl) could make the statement take something; zero if none.
	WakeAt time.Time
}

// Row is one answer row: field name to JSON-ready value. "id" is the
// document id; "_score" carries a search score.
type Row map[string]any

// JSON returns the answer as the node sends it: rows as a JSON array,
// {"affected": N}, {"count": N} or {"message": "..."}.
func (r *Result) JSON() []byte { panic("engine: not built") }

// BatchOptions adjusts one Batch call.
type BatchOptions struct {
	// Extra, if set, is called once every statement has run (still under
	// the write lock, before the block lands) with their results; the
	// statements it returns run in the same block. The node stores an
	// Idempotency-Key this way. Collections whose names start with "_"
	// may be created by these statements like any other.
	Extra func(results []*Result) []Statement
}

// BatchResult is a block's answer.
type BatchResult struct {
	Results []*Result
	Seq     uint64 // the tenant's seq after the block (unchanged if it wrote nothing)
	Wrote   bool
}

// Change is one landed block as watchers see it.
type Change struct {
	Seq  uint64 // seq of the block's last write
	Puts []DocChange
	Dels []DocChange
}

// DocChange names one document of a change; Doc is nil for deletes.
type DocChange struct {
	Coll string
	ID   int64
	Doc  Row
}

// LineageEntry is one history of a file: writes from From+1 on belong to
// History until the next entry.
type LineageEntry struct {
	History uint64 `json:"history"`
	From    uint64 `json:"from"`
}

// RawRecord is one record as it lies in the file, for replication.
type RawRecord struct {
	First, Last uint64 // seq range it covers (First > Last for records that write no seq, e.g. a fork)
	Bytes       []byte // the whole frame, length and CRC included
}

// Filter is a compiled where clause for one collection.
type Filter interface {
	Match(doc Row) bool
}

// DB is one open tenant file. Its methods are safe for concurrent use.
type DB struct{}

// Create makes a new, empty tenant file at path (it must not exist) and
// opens it.
func Create(path string, opts Options) (*DB, error) { panic("engine: not built") }

// Open opens an existing tenant file, taking an exclusive flock on it
// (a second opener gets ErrLocked), and replays it into memory.
func Open(path string, opts Options) (*DB, error) { panic("engine: not built") }

// Install reads a whole image from r, verifies it by replaying it into a
// side file next to path, and renames it into place. path must not exist.
// A cut-short or damaged image is refused and leaves nothing behind.
func Install(path string, r io.Reader) error { panic("engine: not built") }

// Close syncs, stops the sweeper and releases the file. Safe to call twice.
func (db *DB) Close() error { panic("engine: not built") }

// Exec runs one statement as one block.
func (db *DB) Exec(ctx context.Context, st Statement) (*Result, uint64, error) {
	panic("engine: not built")
}

// Batch runs the statements as one block: all land or none does. On a
// failure it returns a *BatchError naming the statement.
func (db *DB) Batch(ctx context.Context, sts []Statement, opts BatchOptions) (*BatchResult, error) {
	panic("engine: not built")
}

// CompileFilter compiles a where clause (the text after "where") for coll.
func (db *DB) CompileFilter(coll, where string, params []any) (Filter, error) {
	panic("engine: not built")
}

// Seq is the seq of the last landed write.
func (db *DB) Seq() uint64 { panic("engine: not built") }

// Durable is the highest seq known to be on disk.
func (db *DB) Durable() uint64 { panic("engine: not built") }

// Sync forces everything landed to disk now.
func (db *DB) Sync() error { panic("engine: not built") }

// History is the current history id (the last lineage entry's).
func (db *DB) History() uint64 { panic("engine: not built") }

// Lineage returns a copy of the file's lineage, oldest first.
func (db *DB) Lineage() []LineageEntry { panic("engine: not built") }

// Holds says whether this file holds write seq of history h: h is on the
// lineage and seq is within what that history wrote here.
func (db *DB) Holds(h uint64, seq uint64) bool { panic("engine: not built") }

// Fork starts a new history at the current seq (promotion), durably.
func (db *DB) Fork() (uint64, error) { panic("engine: not built") }

// Checkpoint writes the whole state, index graphs included, to a side file
// with the recent records kept for change cursors, and renames it into
// place.
func (db *DB) Checkpoint() error { panic("engine: not built") }

// Compact is Checkpoint keeping no records from before the image.
func (db *DB) Compact() error { panic("engine: not built") }

// WriteImage streams a compact image of the whole tenant to w (what a move
// or a backup copies; Install takes it). Writes go on meanwhile.
func (db *DB) WriteImage(w io.Writer) (int64, error) { panic("engine: not built") }

// Watch calls fn after every landed block, in seq order, under the write
// lock: fn must not block. The returned func stops it.
func (db *DB) Watch(fn func(Change)) (stop func()) { panic("engine: not built") }

// ChangesSince returns the changes after seq since, at most limit blocks,
// read from the records still in the file. ErrCursorGone when records
// after since are no longer kept (the caller reseeds).
func (db *DB) ChangesSince(since uint64, limit int) ([]Change, error) { panic("engine: not built") }

// ReadRecords calls fn for every durable record whose writes come after
// seq since, in order; ErrCursorGone when they are no longer kept.
func (db *DB) ReadRecords(since uint64, fn func(RawRecord) error) error { panic("engine: not built") }

// ApplyRecord appends a record read from a primary's ReadRecords and
// applies it (a replica's follow). It must continue this file's seq.
func (db *DB) ApplyRecord(rec RawRecord) error { panic("engine: not built") }

// FileBytes is the size of the file, counted by the engine.
func (db *DB) FileBytes() int64 { panic("engine: not built") }

// MemoryBytes estimates the memory the open tenant holds.
func (db *DB) MemoryBytes() int64 { panic("engine: not built") }

// Rows is the row count over collections not starting with "_".
func (db *DB) Rows() int64 { panic("engine: not built") }
