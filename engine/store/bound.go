package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
)

// Under SyncEvery a write is acknowledged before it is on disk, and a
// power loss takes what was not synced. The writes it takes
// had seqs, and clients may hold them (a write's answer, a change shown to
// a subscriber): if the file went on from where the loss left it, in the
// same history, the next writes would take those seqs again and one
// (history, seq) would name two writes. So, before a write of its own
// takes a seq past the last bound, a Log writes and syncs a bound record
// (KindBound) naming a seq some way ahead; it writes one at its last seq
// as it closes. On open, a file whose last bound since its last fork or
// image is past its seq may have lost writes up to that bound (Lost), and
// ForkPast starts it again past them, as a restore in place does: one
// image at a seq past the bound, in a new history from where the file's
// writes end. No other mode writes bounds: under SyncAlways every write
// is on disk before it is acknowledged, and SyncOff, which never fsyncs
// on its own, promises nothing of a power loss (a process killed loses
// nothing under it).

// defaultBoundAhead is how far past the seq a bound reaches: a file that
// lost its tail skips at most this many seqs (and its id counters as
// many ids) past the block that wrote the bound.
const defaultBoundAhead = 1024

// ErrLostTail: the file opened with a lost tail (Lost); it takes no write
// of its own until ForkPast has started it past it.
var ErrLostTail = errors.New("the file lost writes at its tail that may have been acknowledged: fork past them first")

func boundBody(seq uint64) []byte { return binary.AppendUvarint(nil, seq) }

// decodeBound reads a bound record's seq.
func decodeBound(body []byte) (uint64, error) {
	seq, n := binary.Uvarint(body)
	if n <= 0 || n != len(body) {
		return 0, errors.New("bad bound")
	}
	return seq, nil
}

// bounding says whether the Log writes bounds: under SyncEvery only.
// Under SyncAlways nothing acknowledged is lost; under SyncOff, which
// never fsyncs on its own, a power loss may take anything, bounds
// included, and a process killed loses nothing.
func (l *Log) bounding() bool { return l.opts.Sync == SyncEvery }

// boundLocked makes sure a bound on disk covers n more writes of the
// Log's own, writing and syncing one if not. wmu is held.
func (l *Log) boundLocked(n uint64) error {
	l.mu.Lock()
	seq, bound, lost := l.seq, l.bound, l.lost
	l.mu.Unlock()
	if lost > 0 {
		return ErrLostTail
	}
	if !l.bounding() || seq+n <= bound {
		return nil
	}
	return l.writeBoundLocked(seq + n + l.opts.boundAhead)
}

// writeBoundLocked appends a bound at seq and syncs it. wmu is held.
func (l *Log) writeBoundLocked(seq uint64) error {
	l.mu.Lock()
	at := l.seq
	l.mu.Unlock()
	body := boundBody(seq)
	if _, err := l.writeParts(Record{Kind: KindBound, First: at + 1, Last: at, Body: body}, body); err != nil {
		return fmt.Errorf("bound: %w", err)
	}
	if err := l.sync(); err != nil {
		return fmt.Errorf("bound: %w", err)
	}
	return nil
}

// closeBoundLocked writes the bound of a clean close: the Log's own seq,
// when a bound past it is outstanding. wmu is held.
func (l *Log) closeBoundLocked() error {
	l.mu.Lock()
	seq, bound, lost, usable := l.seq, l.bound, l.lost, l.usableLocked()
	l.mu.Unlock()
	if usable != nil || lost > 0 || !l.bounding() || bound <= seq {
		return nil
	}
	return l.writeBoundLocked(seq)
}

func (l *Log) lostTail() (uint64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost, l.lost > 0
}

// forkPast rewrites a file that opened with a lost tail as one image at a
// seq past its bound, in a new history from its seq. wmu is taken here.
func (l *Log) forkPast(writeState WriteStateFunc) (Position, error) {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	l.mu.Lock()
	if err := l.usableLocked(); err != nil {
		l.mu.Unlock()
		return Position{}, err
	}
	if l.lost == 0 {
		pos := Position{Seq: l.seq, Lineage: l.lineageCopyLocked()}
		l.mu.Unlock()
		return pos, nil
	}
	lineage := append(l.lineageCopyLocked(), LineageEntry{History: newHistory(), From: l.seq})
	pos := Position{Seq: l.lost + 1, Lineage: lineage}
	l.mu.Unlock()

	tmp := l.path + ".tmp"
	f, err := openSide(tmp)
	if err != nil {
		return Position{}, fmt.Errorf("fork past a lost tail: %w", err)
	}
	n, err := writeImage(f, pos, l.opts.imageChunk, writeState)
	if err == nil {
		err = datasync(f)
	}
	if err == nil {
		err = os.Rename(tmp, l.path)
	}
	if err != nil {
		f.Close()
		os.Remove(tmp)
		return Position{}, fmt.Errorf("fork past a lost tail: %w", err)
	}
	built := &scanned{base: pos.Seq, seq: pos.Seq, end: n, lineage: pos.Lineage,
		images: []span{{start: headerSize, end: n, seq: pos.Seq}}, idx: newIndexer(l.opts.indexEvery)}
	built.idx.image()
	if err := l.switchFile(f, built, syncDir(l.path)); err != nil {
		return Position{}, fmt.Errorf("fork past a lost tail: %w", err)
	}
	l.log.Warn("store: the file lost writes at its tail that may have been acknowledged; it goes on past them in a new history",
		"path", l.path, "seq", lineage[len(lineage)-1].From, "bound", pos.Seq-1, "history", lineage[len(lineage)-1].History)
	return pos, nil
}
