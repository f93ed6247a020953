package store

// This file is the store's public surface: the types the engine codes
// against and the methods of an open Log. The implementation lives in the
// files named for each concept: frame.go (the format), scan.go (checking a
// file, the sparse index), log.go (create, open and replay, close),
// append.go, sync.go (sync modes, group commit), image.go, checkpoint.go,
// install.go, read.go (the record feed) and lock.go (flock, side files).

import (
	"context"
	"io"
	"log/slog"
	"time"
)

// Kind is a record's kind, its payload's first byte. Kinds below KindEngine
// are the store's own (images, forks); the engine numbers its records from
// KindEngine up and the store treats their bodies as opaque bytes.
type Kind uint8

const (
	// KindImage is one chunk of an image that continues in the next frame.
	KindImage Kind = 1
	// KindImageEnd is the last (or only) chunk of an image.
	KindImageEnd Kind = 2
	// KindFork starts a new history at the current seq; body: 8-byte history.
	KindFork Kind = 3
	// KindSpill is a piece of a block written before the block lands
	// (Spill); body: uvarint piece index, then the piece. The block's own
	// record follows its spills and lands them all; spills with no record
	// after them are an unfinished block, cut off on open.
	KindSpill Kind = 4
	// KindSpillDrop refuses the spills before it (DropSpills): they stay
	// in the file, dead, until the next checkpoint or compact.
	KindSpillDrop Kind = 5
	// KindBound bounds the seqs appended before the file's next fsync;
	// body: uvarint seq. Under SyncEvery a Log writes and syncs one
	// before a write of its own (Append) takes a seq past the
	// last since the file's last fork or image, and one at the seq it
	// closes at as it closes. A file whose last bound is past its seq
	// (Lost) may have lost writes its Log acknowledged. Bounds are the
	// store's own: never replayed, read (ReadFrom) or kept by a
	// checkpoint.
	KindBound Kind = 6

	// KindEngine is the first kind the engine may use; every kind from it
	// to 255 is the engine's.
	KindEngine Kind = 16
)

// SyncMode says when appended records reach the disk (engine.SyncMode is
// this type).
type SyncMode int

const (
	// SyncEvery fsyncs every Options.SyncEvery when anything was appended;
	// a record is durable once the next tick has synced it.
	SyncEvery SyncMode = iota
	// SyncAlways fsyncs before Append returns; concurrent appenders that
	// wait with WaitDurable share one fsync (group commit).
	SyncAlways
	// SyncOff never fsyncs on its own; everything appended counts as
	// durable.
	SyncOff
)

// Options configures one open Log.
type Options struct {
	Sync      SyncMode
	SyncEvery time.Duration // for SyncEvery; default 100 ms

	// RetainBytes bounds the records a Checkpoint keeps in front of its
	// image for change cursors and replicas (newest kept); default 16 MiB.
	// Compact keeps none whatever it says.
	RetainBytes int64

	// Logger receives what the store notices (a torn tail cut off, a
	// leftover side file removed). Nil means slog.Default().
	Logger *slog.Logger

	indexEvery int64  // least bytes between sparse index entries (tests set it)
	imageChunk int    // most state bytes in one image frame (tests set it)
	boundAhead uint64 // how far past the seq a bound reaches (tests set it)
}

// SpillBytes is how large a block's body may grow in memory before the
// engine spills it into the file (Spill); a rule for the engine, which the
// store does not enforce.
const SpillBytes = 16 << 20

// DefaultRetainBytes is Options.RetainBytes when it is zero.
const DefaultRetainBytes = 16 << 20

// DefaultSyncEvery is Options.SyncEvery when it is zero.
const DefaultSyncEvery = 100 * time.Millisecond

// Record is one record of the log.
//
// First and Last are the seq range of the writes it holds: First = seq+1
// and Last = seq+n for a record appended at seq holding n writes, so a
// record holding none (a fork, an image) has First == Last+1.
type Record struct {
	Kind        Kind
	First, Last uint64
	// Body is the record's payload after the kind and seqs: the engine's
	// bytes. It belongs to the receiver (the store keeps no reference),
	// except from Append, where it is the caller's own slice, and when
	// Borrowed is set. For a block that was spilled, Body is the whole
	// block as replay, ReadFrom and AppendRaw give it: its spills' pieces,
	// then its own record's body.
	Body []byte
	// Borrowed says Body lies in memory the store takes back once the
	// call that gave it returns (replay reads records from the mapped
	// file without copying them): the receiver copies what it keeps.
	Borrowed bool
	// Frame is the whole frame as it lies in the file (length and CRC
	// included), set by ReadFrom and AppendRaw: what replication ships.
	// Body is a sub-slice of it when it is set.
	Frame []byte
}

// N is the number of writes the record holds.
func (r Record) N() uint64 { return r.Last + 1 - r.First }

// LineageEntry is one history of a file: writes from From+1 on belong to
// History until the next entry's From.
type LineageEntry struct {
	History uint64 `json:"history"`
	From    uint64 `json:"from"`
}

// Position is where a log stands: its seq and its lineage. An image is
// written at a Position.
type Position struct {
	Seq     uint64
	Lineage []LineageEntry
}

// Replayer receives a file's state as Open replays it: first the last
// image (if the file has one), then every engine record after it, in order.
// An error from either method stops Open, which returns it wrapped.
type Replayer interface {
	// Image is called at most once, before any Record, with the seq the
	// image was written at and a reader over the state the engine wrote
	// (what Checkpoint's writeState wrote). It must not keep r after it
	// returns.
	Image(seq uint64, r io.Reader) error
	// Record is called for each engine record (Kind >= KindEngine) after
	// the image. Forks and images are the store's own and are not passed.
	// rec.Body is Borrowed unless the block was spilled (then it is a
	// copy joined from its pieces, the receiver's to keep).
	Record(rec Record) error
}

// ReplayFuncs adapts two functions to a Replayer; a nil func ignores what
// it would be given (a nil Image func drains the image).
type ReplayFuncs struct {
	OnImage  func(seq uint64, r io.Reader) error
	OnRecord func(rec Record) error
}

// Image implements Replayer.
func (f ReplayFuncs) Image(seq uint64, r io.Reader) error {
	if f.OnImage == nil {
		_, err := io.Copy(io.Discard, r)
		return err
	}
	return f.OnImage(seq, r)
}

// Record implements Replayer.
func (f ReplayFuncs) Record(rec Record) error {
	if f.OnRecord == nil {
		return nil
	}
	return f.OnRecord(rec)
}

// WriteStateFunc streams the engine's whole state to w. The store cuts
// what it writes into frames as it comes, so the state is never held as
// one []byte.
type WriteStateFunc func(w io.Writer) error

// Log is one open tenant file: an append-only log of framed, checksummed
// records under an exclusive flock. Its methods are safe for concurrent use;
// appends are serialised inside the Log (the engine's own write lock keeps
// the order it wants).
type Log struct {
	logState
}

// Create makes a new tenant file at path (it must not exist: ErrExist),
// takes its flock and starts a fresh random history at seq 0, durably.
func Create(path string, opts Options) (*Log, error) {
	return create(path, opts)
}

// Open takes the flock on an existing tenant file (ErrNotExist, ErrLocked),
// removes leftover side files (<path>.tmp, <path>.install), checks every
// frame (cutting a torn tail, refusing a damaged file with a
// *DamagedError), and replays it into h: the last image, then every engine
// record after it. h may be nil.
func Open(path string, opts Options, h Replayer) (*Log, error) {
	return open(path, opts, h)
}

// Install copies r into <path>.install, checks every frame (a cut-short or
// damaged image is refused with an error wrapping ErrBadImage), calls
// verify with the side file's path (the engine replays it fully; the side
// file is not locked while verify runs, so verify may Open it), fsyncs and
// links it into place at path, which must not exist (ErrExist). Any failure
// removes the side file. It returns the bytes installed.
func Install(path string, r io.Reader, verify func(tmpPath string) error) (int64, error) {
	return install(path, r, verify)
}

// InstallOpen installs an image read from r as a new file at path, as
// Install does, and opens it: the image is read once, its frames checked
// as h is given it, and the Log returned is the installed file. It
// returns the bytes installed.
func InstallOpen(path string, r io.Reader, opts Options, h Replayer) (*Log, int64, error) {
	return installOpen(path, r, opts, h)
}

// WriteImage streams a compact tenant file to w: the header and one image
// at pos holding what writeState writes. The caller takes a consistent
// snapshot (pos must match the state); writes to the Log may go on
// meanwhile. It returns the bytes written.
func WriteImage(w io.Writer, pos Position, writeState WriteStateFunc) (int64, error) {
	return writeImage(w, pos, defaultImageChunk, writeState)
}

// Append appends one block of n writes (n = 0 for a record that writes no
// seq) as one frame: First = Seq()+1, Last = Seq()+n. Under SyncAlways it
// returns once the record is on disk. kind must be >= KindEngine.
func (l *Log) Append(kind Kind, n uint64, body []byte) (Record, error) {
	return l.append(kind, n, body, true)
}

// Spill writes piece, the next part of a block too large to hold in memory
// (past SpillBytes), into the file before the block lands. The next Append
// lands the block: its Body, wherever the store gives it back, is every
// piece spilled since the last record, then Append's body. DropSpills
// refuses the block instead (and must be called if the Append fails). A spill is not synced on its own and is not
// given to replicas until its block lands; a crash before it lands leaves
// an unfinished block that the next Open cuts off. Forks and checkpoints
// are refused (ErrSpilling) while spills wait for their block.
func (l *Log) Spill(piece []byte) (Record, error) {
	return l.spill(piece)
}

// SpillSize is the exact framed size the next Spill of a piece of pieceLen
// bytes would add, for the quota hook, which is asked before each spill.
func (l *Log) SpillSize(pieceLen int) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return frameSize(KindSpill, l.seq+1, l.seq, uvarintLen(uint64(l.spills))+pieceLen)
}

// DropSpills refuses the block being spilled: a marker is appended and
// the spills stay in the file, dead, until the next checkpoint or compact
// leaves them out. Nothing happens if nothing was spilled.
func (l *Log) DropSpills() error {
	return l.dropSpills()
}

// AppendNoSync is Append without waiting for the disk whatever the sync
// mode: the engine appends under its write lock, releases it, then calls
// WaitDurable(ctx, rec.Last) so that concurrent writers share one fsync.
func (l *Log) AppendNoSync(kind Kind, n uint64, body []byte) (Record, error) {
	return l.append(kind, n, body, false)
}

// WaitDurable returns once every write up to seq is on disk: under
// SyncAlways it syncs (or joins a sync under way), under SyncEvery it waits
// for the next tick, under SyncOff it returns at once. seq may be ahead of
// Seq(): it then waits for it to be appended too (a feed waiting for the
// next write). It returns the Log's sticky error if a write or sync failed,
// ErrClosed if the Log closed first, or ctx's error.
func (l *Log) WaitDurable(ctx context.Context, seq uint64) error {
	return l.waitDurable(ctx, seq)
}

// RecordSize is the exact framed size (length and CRC included) that
// Append(kind, n, body) with len(body) == bodyLen would add now, for the
// quota hook. Call it under the same lock as the Append.
func (l *Log) RecordSize(kind Kind, n uint64, bodyLen int) int64 {
	l.mu.Lock()
	seq := l.seq
	l.mu.Unlock()
	return frameSize(kind, seq+1, seq+n, bodyLen)
}

// Sync puts everything appended so far on disk, whatever the sync mode.
func (l *Log) Sync() error {
	return l.sync()
}

// Seq is the seq of the last appended write.
func (l *Log) Seq() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.seq
}

// Durable is the highest seq known to be on disk (under SyncOff, Seq).
func (l *Log) Durable() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.durableSeq
}

// DurableMoved returns a channel closed the next time what is durable
// moves on (an fsync, or under SyncOff an append), and as the Log fails
// or closes: a reader of durable records waits on it, not on a timer.
func (l *Log) DurableMoved() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.chTaken = true
	return l.durableCh
}

// Size is the bytes in the file, counted (no system call).
func (l *Log) Size() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.size
}

// Path is the tenant file's path.
func (l *Log) Path() string {
	return l.path
}

// History is the current history id (the last lineage entry's).
func (l *Log) History() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.lineage) == 0 {
		return 0 // only a file whose first record was cut off as a torn tail
	}
	return l.lineage[len(l.lineage)-1].History
}

// Lineage returns a copy of the lineage, oldest first.
func (l *Log) Lineage() []LineageEntry {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lineageCopyLocked()
}

// Position returns Seq and Lineage read together.
func (l *Log) Position() Position {
	l.mu.Lock()
	defer l.mu.Unlock()
	return Position{Seq: l.seq, Lineage: l.lineageCopyLocked()}
}

// Holds says whether this file holds write seq of history h: h is on the
// lineage and seq is at most where that history stopped here (the next
// entry's From, or Seq for the last).
func (l *Log) Holds(h uint64, seq uint64) bool {
	return l.holds(h, seq)
}

// Fork appends a fork record starting a new random history at Seq and
// syncs it whatever the sync mode. It returns the new history.
func (l *Log) Fork() (uint64, error) {
	return l.fork()
}

// Checkpoint rewrites the file as the records kept for cursors (the newest
// non-image records up to RetainBytes, and always the forks at the current
// seq, so that the file holds every record after its first kept seq and a
// replica at that seq is still sent them) followed by an image of the state
// writeState writes, in a side file that is synced, locked and renamed over
// the tenant file; appends continue on it. The caller keeps the state
// still (holds its write lock) while it runs; appends through the Log wait
// for it. On any failure the old file stays as it was and the Log goes on.
func (l *Log) Checkpoint(writeState WriteStateFunc) error {
	return l.checkpoint(writeState, l.opts.RetainBytes)
}

// Compact is Checkpoint keeping no records but the forks at the current
// seq: cursors before the current seq are gone.
func (l *Log) Compact(writeState WriteStateFunc) error {
	return l.checkpoint(writeState, 0)
}

// Shrink is Checkpoint only where the file gains by it: something was
// appended since the Log was opened, and the checkpoint is smaller than
// the file (records superseded, an old image, dead spills left out), or
// the records after the file's last image pass RetainBytes (an open would
// replay more than a checkpoint keeps). Otherwise the file is left as it
// is, so closing a small file never grows it by an image. It reports
// whether it rewrote the file.
func (l *Log) Shrink(writeState WriteStateFunc) (bool, error) {
	return l.rewrite(writeState, l.opts.RetainBytes, true)
}

// WriteImage is WriteImage(w, l.Position(), writeState): the caller keeps
// the state still at that position while it runs.
func (l *Log) WriteImage(w io.Writer, writeState WriteStateFunc) (int64, error) {
	return writeImage(w, l.Position(), l.opts.imageChunk, writeState)
}

// ReadFrom calls fn, in order, with each durable record whose writes come
// after seq since (First > since or Last > since), forks included and
// images left out, read from the file with Frame set. It returns
// ErrCursorGone when records after since are no longer kept, and what fn
// returns if it is not nil. Appends go on while it reads; it reads up to
// what was durable when it started.
func (l *Log) ReadFrom(since uint64, fn func(Record) error) error {
	return l.readFrom(since, nil, fn)
}

// ReadAt is ReadFrom that starts where the read that left cur stopped,
// when it is asked from cur.Seq() in the file cur was taken in (else as
// ReadFrom does), and leaves cur where it stops. Records before that
// point, forks at since among them, were given to an earlier read's fn
// and are not given again. cur is left the zero Cursor when the read
// fails.
func (l *Log) ReadAt(cur *Cursor, since uint64, fn func(Record) error) error {
	return l.readFrom(since, cur, fn)
}

// AppendRaw appends a frame read from a primary's ReadFrom verbatim: its
// CRC must match (ErrBadRecord), it must continue this file's seq
// (First == Seq()+1, else ErrSeqGap), and images are refused. A fork
// extends this file's lineage (a fork whose history the lineage already
// holds is not appended again and returns its record). It syncs as Append
// does and returns the decoded record for the engine to apply.
func (l *Log) AppendRaw(frame []byte) (Record, error) {
	return l.appendRaw(frame)
}

// PeekRaw decodes a frame as AppendRaw would take it, without appending
// it: for a block's record, Body is the whole block, with the spills
// AppendRaw holds for it, so the engine can apply a block before it lands.
func (l *Log) PeekRaw(frame []byte) (Record, error) {
	return l.peekRaw(frame)
}

// Lost says whether the file opened with a lost tail, and how far it may
// have gone: a Log under SyncEvery appended writes of its own
// and stopped without closing, and its last bound (KindBound) is past the
// file's seq, so writes up to the bound may have been acknowledged and
// lost. Such a file takes no Append or Spill until ForkPast.
func (l *Log) Lost() (bound uint64, ok bool) {
	return l.lostTail()
}

// ForkPast starts a file that opened with a lost tail (Lost) past it, as
// a restore in place does (Restart): it rewrites the file as one image
// of the state writeState writes at the bound + 1, its lineage the
// file's with a new history from the file's seq, synced and renamed into
// place. So write s of the old history past the file's seq is on no
// history the file holds, and change cursors before the image are older
// than what it keeps. The caller keeps the state still while it runs. It
// returns the new position (the file's own, unchanged, when it lost
// nothing).
func (l *Log) ForkPast(writeState WriteStateFunc) (Position, error) {
	return l.forkPast(writeState)
}

// Close syncs, stops the sync goroutine and releases the flock and the
// file. Safe to call twice.
func (l *Log) Close() error {
	return l.close()
}
