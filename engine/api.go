package engine

// This file is the engine's public surface: what the node (and tests, and
// benchmarks) may call. Everything else in the package is unexported.

import (
	"log/slog"
	"time"

	"github.com/fenec-go/fenec/engine/internal/hugemem"
	"github.com/fenec-go/fenec/engine/store"
)

// AdviseHugePages turns on or off, for the whole process, asking the
// kernel for huge pages for the large arrays a tenant loads: a graph's
// vectors and links, an installed image's graph as it arrives. Off unless
// turned on; whether it pays depends on the host (docs/runbook.md).
func AdviseHugePages(on bool) { hugemem.Advise(on) }

// SyncMode says when appended records reach the disk: the store's modes.
type SyncMode = store.SyncMode

const (
	// SyncEvery fsyncs at most every Options.SyncEvery (default 100 ms);
	// a record is durable once the next tick has synced it.
	SyncEvery = store.SyncEvery
	// SyncAlways fsyncs before a write returns.
	SyncAlways = store.SyncAlways
	// SyncOff never fsyncs (the kernel writes back when it likes).
	SyncOff = store.SyncOff
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

	// RetainBytes bounds the records a checkpoint keeps before its image
	// for change cursors and replicas (newest kept); 0 means 16 MiB.
	// Compact keeps none.
	RetainBytes int64
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
	// IDs are the ids a put or insert wrote, in order; never nil for
	// one (empty when it wrote none), nil for any other statement.
	IDs []int64

	// Write is true for statements that write (they may have written
	// nothing, e.g. a set whose filter matched no row), but not for a
	// schema statement that found nothing to do (create if not exists on
	// a collection that is there, drop if exists on one that is not).
	Write bool
	// Claim is true for a set or del statement that took nothing: what
	// Fenec-Wait holds.
	Claim bool
	// WakeAt, for a Claim, is the next moment a time-based filter (now(),
	// @ttl) could make the statement take something; zero if none.
	WakeAt time.Time

	// lazy, from DB.ReadStream, are rows found and not yet encoded, in
	// place of Rows (answer.go).
	lazy *lazyRows
}

// Row is one answer row: field name to JSON-ready value. "id" is the
// document id; "_score" carries a search score.
type Row map[string]any

// BatchOptions adjusts one Batch call.
type BatchOptions struct {
	// Extra, if set, is called once every statement has run (still under
	// the write lock, before the block lands) with their results; the
	// statements it returns run in the same block. The node stores an
	// Idempotency-Key this way. Collections whose names start with "_"
	// may be created by these statements like any other.
	Extra func(results []*Result) []Statement

	// Charge, when set, is told the bytes of each answer row as a
	// statement builds it (a get's, a write's returning), under the write
	// lock: it must not block. An error fails the block with it, as it is.
	Charge func(bytes int64) error
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

// DB (db.go) is one open tenant file; its methods are spread over db.go,
// image.go (its image: image_write.go, image_read.go, image_sections.go,
// image_feed.go), mapping.go, changes.go and sweep.go.
