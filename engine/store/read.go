package store

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
)

// frameIter reads whole frames of a file between off and end, stepping
// over the images it is told of.
type frameIter struct {
	f        *os.File
	off, end int64
	images   []span
	r        *bufio.Reader
}

func newFrameIter(f *os.File, off, end int64, images []span) *frameIter {
	return &frameIter{f: f, off: off, end: end, images: images}
}

// next returns the next frame and its offset, or io.EOF.
func (it *frameIter) next() ([]byte, int64, error) {
	for len(it.images) > 0 && it.images[0].end <= it.off {
		it.images = it.images[1:]
	}
	if len(it.images) > 0 && it.images[0].start <= it.off {
		it.off, it.r = it.images[0].end, nil
		it.images = it.images[1:]
	}
	if it.off >= it.end {
		return nil, 0, io.EOF
	}
	if it.r == nil {
		// No bigger than what is to be read: a reader that resumes near
		// the end reads a record or two, and would clear 256 KiB for them.
		size := int(min(it.end-it.off, readBuffer))
		it.r = bufio.NewReaderSize(io.NewSectionReader(it.f, it.off, it.end-it.off), size)
	}
	var head [frameHead]byte
	if _, err := io.ReadFull(it.r, head[:]); err != nil {
		return nil, 0, fmt.Errorf("read frame at %d: %w", it.off, unexpected(err))
	}
	l := int64(binary.LittleEndian.Uint32(head[:]))
	if l > it.end-it.off-frameHead {
		return nil, 0, fmt.Errorf("read frame at %d: %w", it.off, errBad("runs past the end"))
	}
	frame := make([]byte, frameHead+l)
	copy(frame, head[:])
	if _, err := io.ReadFull(it.r, frame[frameHead:]); err != nil {
		return nil, 0, fmt.Errorf("read frame at %d: %w", it.off, unexpected(err))
	}
	off := it.off
	it.off += frameHead + l
	return frame, off, nil
}

// readBuffer is the most a frameIter buffers of the file at a time.
const readBuffer = 256 << 10

func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// indexStart is where to start reading for records after since: the last
// index entry whose record starts at or before since (no record before it
// can hold a write after since), else the first record.
func indexStart(index []indexEntry, since uint64) int64 {
	i := sort.Search(len(index), func(i int) bool { return index[i].first > since })
	if i == 0 {
		return headerSize
	}
	return index[i-1].off
}

// Cursor is where a read of the records stopped, so that the next read,
// asked from where this one left the caller (Seq), starts there rather
// than at the sparse index's entry before it: a reader that follows the
// end of the file reads each record once, not the index's stride again
// every time. It is valid while the file and its offsets are the ones it
// was taken in (a checkpoint, or a refused block cut off, ends it); the
// zero Cursor is none.
type Cursor struct {
	seq     uint64   // the since a read from here continues
	file    *fileRef // the file it was taken in (compared, never read)
	lsnBase int64    // and that file's offsets
	off     int64    // the offset the next read starts at
}

// Seq is the seq a read resuming at c is asked from.
func (c *Cursor) Seq() uint64 { return c.seq }

// readPlan says what a ReadFrom reads: the file (a reference it must
// release), where to start and stop, and the images to step over. A nil
// ref means there is nothing to read. A read from cur's own seq in cur's
// file starts where cur stopped.
func (l *Log) readPlan(since uint64, cur *Cursor) (readSpan, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.closed:
		return readSpan{}, ErrClosed
	case since < l.base:
		return readSpan{}, fmt.Errorf("read from %d (kept from %d): %w", since, l.base, ErrCursorGone)
	case since > l.seq:
		return readSpan{}, nil
	}
	p := readSpan{start: indexStart(l.idx.entries, since), end: min(l.durableLSN-l.lsnBase, l.size), lsnBase: l.lsnBase}
	if l.spills > 0 {
		p.end = min(p.end, l.spillStart) // a block not landed may yet be cut off
	}
	if cur != nil && cur.file == l.file && cur.lsnBase == l.lsnBase && cur.seq == since && cur.off >= p.start && cur.off <= p.end {
		p.start = cur.off
	}
	p.ref, p.images = l.file.acquire(), l.images
	return p, nil
}

// readSpan is a read's plan: the file (a reference it must release; nil
// when there is nothing to read), where to start and stop, the images to
// step over, and the file's lsnBase as planned.
type readSpan struct {
	ref        *fileRef
	start, end int64
	images     []span
	lsnBase    int64
}

func (l *Log) readFrom(since uint64, cur *Cursor, fn func(Record) error) error {
	p, err := l.readPlan(since, cur)
	if p.ref == nil {
		return err
	}
	ref := p.ref
	defer ref.release()
	if cur != nil {
		*cur = Cursor{} // until this read ends well
	}
	it := newFrameIter(ref.f, p.start, p.end, p.images)
	var spills []span // a block's spills, sent only with the block
	// resume is where a read that has given fn everything up to seq
	// would start again: after the last frame that is not a spill of a
	// block still to come.
	resume, seq := p.start, since
	for {
		if l.closing.Load() {
			return ErrClosed
		}
		frame, off, err := it.next()
		if errors.Is(err, io.EOF) {
			if len(spills) > 0 {
				resume = spills[0].start
			}
			if cur != nil {
				*cur = Cursor{seq: seq, file: ref, lsnBase: p.lsnBase, off: resume}
			}
			return nil // spills left are a block not landed (or not durable) yet
		}
		if err != nil {
			return err
		}
		rec, err := DecodeFrame(frame)
		if err != nil {
			return fmt.Errorf("read frame at %d: %w", off, err)
		}
		switch {
		case rec.Kind == KindSpill:
			spills = append(spills, span{start: off, end: off + int64(len(frame))})
			continue
		case rec.Kind == KindBound:
			// The writer's own, never sent; between a block's spills it
			// leaves them be.
			if len(spills) == 0 {
				resume = off + int64(len(frame))
			}
			continue
		case rec.Kind == KindSpillDrop:
			spills = nil // a refused block: nothing to send
		case rec.First <= since && rec.Last <= since:
			spills = nil
		default:
			if len(spills) > 0 {
				if rec, err = sendSpills(ref.f, spills, rec, fn); err != nil {
					return err
				}
				spills = nil
			}
			if err := fn(rec); err != nil {
				return err
			}
		}
		resume, seq = off+int64(len(frame)), max(seq, rec.Last)
	}
}

// sendSpills reads a block's spills again and gives them to fn, and
// returns the block's record with its whole body.
func sendSpills(f *os.File, spills []span, rec Record, fn func(Record) error) (Record, error) {
	pieces := make([][]byte, 0, len(spills))
	for _, sp := range spills {
		frame := make([]byte, sp.end-sp.start)
		if _, err := f.ReadAt(frame, sp.start); err != nil {
			return rec, fmt.Errorf("read spill at %d: %w", sp.start, unexpected(err))
		}
		spill, err := DecodeFrame(frame)
		if err != nil {
			return rec, fmt.Errorf("read spill at %d: %w", sp.start, err)
		}
		if err := fn(spill); err != nil {
			return rec, err
		}
		_, p := spillPiece(spill.Body)
		pieces = append(pieces, p)
	}
	if rec.Kind >= KindEngine {
		rec.Body = joinPieces(pieces, rec.Body)
	}
	return rec, nil
}
