package store

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"slices"

	"golang.org/x/sys/unix"
)

// appendBlock builds and writes one engine record; wmu is taken here.
func (l *Log) appendBlock(kind Kind, n uint64, body []byte) (Record, int64, error) {
	if kind < KindEngine {
		return Record{}, 0, fmt.Errorf("append kind %d: %w", kind, ErrBadKind)
	}
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if err := l.boundLocked(n); err != nil {
		return Record{}, 0, fmt.Errorf("append: %w", err)
	}
	l.mu.Lock()
	seq := l.seq
	l.mu.Unlock()
	rec := Record{Kind: kind, First: seq + 1, Last: seq + n, Body: body}
	end, err := l.writeParts(rec, body)
	return rec, end, err
}

// writeParts frames a record whose body is the parts given, without
// copying them, and writes it. wmu is held.
func (l *Log) writeParts(rec Record, parts ...[]byte) (int64, error) {
	bodyLen := 0
	for _, p := range parts {
		bodyLen += len(p)
	}
	if frameSize(rec.Kind, rec.First, rec.Last, bodyLen)-frameHead > maxPayload {
		return 0, fmt.Errorf("append: %w", ErrTooLarge)
	}
	var pre [frameHead + 1 + 2*binary.MaxVarintLen64]byte
	p := payloadPrefix(pre[:frameHead], rec.Kind, rec.First, rec.Last)
	crc := checksum(p[frameHead:])
	for _, part := range parts {
		crc = crc32.Update(crc, castagnoli, part)
	}
	binary.LittleEndian.PutUint32(p[0:], uint32(len(p)-frameHead+bodyLen))
	binary.LittleEndian.PutUint32(p[4:], crc)
	return l.writeLocked(append([][]byte{p}, parts...), rec)
}

func (l *Log) spill(piece []byte) (Record, error) {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if err := l.boundLocked(0); err != nil {
		return Record{}, fmt.Errorf("spill: %w", err)
	}
	l.mu.Lock()
	seq, i := l.seq, l.spills
	l.mu.Unlock()
	index := binary.AppendUvarint(nil, uint64(i))
	rec := Record{Kind: KindSpill, First: seq + 1, Last: seq, Body: append(index, piece...)}
	if _, err := l.writeParts(rec, index, piece); err != nil {
		return Record{}, fmt.Errorf("spill: %w", err)
	}
	return rec, nil
}

func (l *Log) dropSpills() error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	l.mu.Lock()
	seq, spills := l.seq, l.spills
	l.mu.Unlock()
	if spills == 0 {
		return nil
	}
	if l.cutSpills() {
		return nil
	}
	if _, err := l.writeParts(Record{Kind: KindSpillDrop, First: seq + 1, Last: seq}); err != nil {
		// The refused block's spills are in the file with no marker after
		// them: the next record would land them as its own. Take nothing
		// more (reopening cuts them off as an unfinished block).
		l.mu.Lock()
		defer l.mu.Unlock()
		return fmt.Errorf("drop spills: %w", l.failLocked(err))
	}
	return nil
}

// cutSpills cuts the file back to where the refused block's spills
// began, durably, so they leave no bytes behind: no reader has read them
// (readPlan stops before spills waiting for their block) and no replica
// was sent them. It reports whether it did; if not, the caller marks them
// dropped instead. wmu is held.
func (l *Log) cutSpills() bool {
	l.mu.Lock()
	if l.usableLocked() != nil {
		l.mu.Unlock()
		return false
	}
	ref, start := l.file.acquire(), l.spillStart
	l.mu.Unlock()
	defer ref.release()
	if err := l.truncate(ref.f, start); err != nil {
		l.log.Warn("cut a refused block's spills", "err", err)
		return false
	}
	if err := datasync(ref.f); err != nil {
		// The file may hold the spills again after a crash: an unfinished
		// block, which an open cuts off. The next write overwrites them in
		// place until then, so take no more.
		l.mu.Lock()
		defer l.mu.Unlock()
		l.failLocked(fmt.Errorf("cut a refused block's spills: sync: %w", err))
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.size, l.idx, l.spills, l.bound = start, l.spillIdx, 0, l.spillBound
	// Everything up to the cut is on disk now; the lsn goes on from where
	// it was, so the file's offsets move under it.
	l.lsnBase = l.appended - l.size
	l.durableLSN, l.durableSeq = l.appended, l.seq
	l.notifyLocked()
	return true
}

// spillingLocked refuses what may not come between a block's spills and
// its record. mu is held.
func (l *Log) spillingLocked() error {
	if l.spills > 0 {
		return ErrSpilling
	}
	return nil
}

func (l *Log) append(kind Kind, n uint64, body []byte, wait bool) (Record, error) {
	rec, end, err := l.appendBlock(kind, n, body)
	if err != nil {
		return Record{}, err
	}
	if wait && l.opts.Sync == SyncAlways {
		if err := l.waitLSN(context.Background(), end); err != nil {
			return rec, fmt.Errorf("append: %w", err)
		}
	}
	return rec, nil
}

// writeLocked writes one frame (given in pieces) at the end of the file
// and accounts for it. wmu is held; rec.First continues the seq. It
// returns the lsn at the frame's end.
func (l *Log) writeLocked(frame [][]byte, rec Record) (int64, error) {
	l.mu.Lock()
	if err := l.usableLocked(); err != nil {
		l.mu.Unlock()
		return 0, err
	}
	ref, off := l.file, l.size // only a writer swaps the file, and we are the writer
	l.mu.Unlock()
	size, err := l.writev(ref.f, frame, off)
	if err != nil {
		if terr := ref.f.Truncate(off); terr != nil {
			l.mu.Lock()
			defer l.mu.Unlock()
			return 0, l.failLocked(fmt.Errorf("append: %v; cut back: %w", err, terr))
		}
		return 0, fmt.Errorf("append: %w", err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if rec.Kind == KindSpill && l.spills == 0 {
		l.spillStart, l.spillIdx, l.spillBound = off, l.idx, l.bound
	}
	l.idx.record(off, rec)
	switch rec.Kind {
	case KindBound:
		l.bound, _ = decodeBound(rec.Body) // between a block's spills too: it leaves them be
	case KindFork:
		l.lineage = append(l.lineage, LineageEntry{History: forkHistory(rec.Body), From: rec.Last})
		l.bound = 0
	case KindSpill:
		l.spills++
	default:
		l.spills = 0
	}
	l.size += size
	l.appended += size
	l.seq = rec.Last
	if l.opts.Sync == SyncOff {
		l.durableLSN, l.durableSeq = l.appended, l.seq
		l.notifyLocked()
	}
	return l.appended, nil
}

// pwritev writes bufs at off, whole.
func pwritev(f *os.File, bufs [][]byte, off int64) (int64, error) {
	var total int64
	for _, b := range bufs {
		total += int64(len(b))
	}
	bufs = slices.Clone(bufs)
	written := int64(0)
	for written < total {
		n, err := unix.Pwritev(int(f.Fd()), bufs, off+written)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return 0, err
		}
		if n == 0 {
			return 0, errors.New("write returned nothing")
		}
		written += int64(n)
		for n > 0 {
			if n >= len(bufs[0]) {
				n -= len(bufs[0])
				bufs = bufs[1:]
				continue
			}
			bufs[0] = bufs[0][n:]
			n = 0
		}
		for len(bufs) > 0 && len(bufs[0]) == 0 {
			bufs = bufs[1:]
		}
	}
	return total, nil
}

func (l *Log) fork() (uint64, error) {
	h := newHistory()
	l.wmu.Lock()
	l.mu.Lock()
	seq, err := l.seq, l.spillingLocked()
	l.mu.Unlock()
	rec := Record{Kind: KindFork, First: seq + 1, Last: seq, Body: forkBody(h)}
	if err == nil {
		_, err = l.writeParts(rec, rec.Body)
	}
	l.rawSpills = nil // a promoted replica's half-received block is gone
	l.wmu.Unlock()
	if err != nil {
		return 0, fmt.Errorf("fork: %w", err)
	}
	if err := l.sync(); err != nil {
		return 0, fmt.Errorf("fork: %w", err)
	}
	return h, nil
}

func (l *Log) appendRaw(frame []byte) (Record, error) {
	rec, err := DecodeFrame(frame)
	if err != nil {
		return Record{}, fmt.Errorf("append raw: %w", err)
	}
	if isImage(rec.Kind) {
		return Record{}, fmt.Errorf("append raw: %w", errBad("images do not replicate"))
	}
	l.wmu.Lock()
	rec, end, wrote, err := l.appendRawLocked(rec)
	l.wmu.Unlock()
	if err != nil || !wrote {
		return rec, err
	}
	switch {
	case rec.Kind == KindFork:
		err = l.sync()
	case l.opts.Sync == SyncAlways:
		err = l.waitLSN(context.Background(), end)
	}
	if err != nil {
		return rec, fmt.Errorf("append raw: %w", err)
	}
	return rec, nil
}

// appendRawLocked checks a replicated record against this file and
// appends it; spills wait in memory for their block. wmu is held.
func (l *Log) appendRawLocked(rec Record) (Record, int64, bool, error) {
	l.mu.Lock()
	seq, err := l.seq, l.spillingLocked()
	dup := rec.Kind == KindFork && slices.ContainsFunc(l.lineage, func(e LineageEntry) bool {
		return e.History == forkHistory(rec.Body)
	})
	l.mu.Unlock()
	if err != nil {
		return Record{}, 0, false, fmt.Errorf("append raw: %w", err)
	}
	if rec.First != seq+1 {
		return Record{}, 0, false, fmt.Errorf("append raw: first %d after %d: %w", rec.First, seq, ErrSeqGap)
	}
	switch {
	case rec.Kind == KindSpill:
		return rec, 0, false, l.holdSpill(rec)
	case rec.Kind == KindSpillDrop:
		l.rawSpills = nil
		return rec, 0, false, nil
	case dup:
		return rec, 0, false, nil
	}
	return l.landRaw(rec)
}

// holdSpill keeps a replicated spill in memory until its block arrives. A
// feed sends a block's spills only once the block landed, and sends them
// again from piece 0 after a broken connection. wmu is held.
func (l *Log) holdSpill(rec Record) error {
	i, _ := spillPiece(rec.Body)
	if i == 0 {
		l.rawSpills = nil
	}
	if i != uint64(len(l.rawSpills)) {
		return fmt.Errorf("append raw: spill %d where %d was due: %w", i, len(l.rawSpills), ErrSeqGap)
	}
	l.rawSpills = append(l.rawSpills, slices.Clone(rec.Frame))
	return nil
}

// landRaw writes a replicated record, after the spills held for it if it
// is a block. wmu is held.
func (l *Log) landRaw(rec Record) (Record, int64, bool, error) {
	var pieces [][]byte
	if rec.Kind >= KindEngine {
		for _, f := range l.rawSpills {
			sp, err := DecodeFrame(f)
			if err != nil {
				return Record{}, 0, false, fmt.Errorf("append raw: %w", err)
			}
			if _, err := l.writeLocked([][]byte{f}, sp); err != nil {
				return Record{}, 0, false, err
			}
			_, p := spillPiece(sp.Body)
			pieces = append(pieces, p)
		}
	}
	l.rawSpills = nil
	end, err := l.writeLocked([][]byte{rec.Frame}, rec)
	if err != nil {
		if len(pieces) > 0 {
			// Its spills are in the file with no block after them.
			l.mu.Lock()
			err = l.failLocked(err)
			l.mu.Unlock()
		}
		return Record{}, 0, false, err
	}
	if len(pieces) > 0 {
		rec.Body = joinPieces(pieces, rec.Body)
	}
	return rec, end, true, nil
}

func (l *Log) peekRaw(frame []byte) (Record, error) {
	rec, err := DecodeFrame(frame)
	if err != nil {
		return Record{}, fmt.Errorf("peek raw: %w", err)
	}
	if rec.Kind < KindEngine {
		return rec, nil
	}
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if len(l.rawSpills) == 0 {
		return rec, nil
	}
	pieces := make([][]byte, 0, len(l.rawSpills))
	for _, f := range l.rawSpills {
		sp, err := DecodeFrame(f)
		if err != nil {
			return Record{}, fmt.Errorf("peek raw: %w", err)
		}
		_, p := spillPiece(sp.Body)
		pieces = append(pieces, p)
	}
	rec.Body = joinPieces(pieces, rec.Body)
	return rec, nil
}
