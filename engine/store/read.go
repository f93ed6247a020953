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
		it.r = bufio.NewReaderSize(io.NewSectionReader(it.f, it.off, it.end-it.off), 256<<10)
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

// readPlan says what a ReadFrom reads: the file (a reference it must
// release), where to start and stop, and the images to step over. A nil
// ref means there is nothing to read.
func (l *Log) readPlan(since uint64) (ref *fileRef, start, end int64, images []span, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.closed:
		return nil, 0, 0, nil, ErrClosed
	case since < l.base:
		return nil, 0, 0, nil, fmt.Errorf("read from %d (kept from %d): %w", since, l.base, ErrCursorGone)
	case since > l.seq:
		return nil, 0, 0, nil, nil
	}
	start = indexStart(l.idx.entries, since)
	end = min(l.durableLSN-l.lsnBase, l.size)
	if l.spills > 0 {
		end = min(end, l.spillStart) // a block not landed may yet be cut off
	}
	return l.file.acquire(), start, end, l.images, nil
}

func (l *Log) readFrom(since uint64, fn func(Record) error) error {
	ref, start, end, images, err := l.readPlan(since)
	if ref == nil {
		return err
	}
	defer ref.release()
	it := newFrameIter(ref.f, start, end, images)
	var spills []span // a block's spills, sent only with the block
	for {
		if l.closing.Load() {
			return ErrClosed
		}
		frame, off, err := it.next()
		if errors.Is(err, io.EOF) {
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
		case rec.Kind == KindSpillDrop:
			spills = nil // a refused block: nothing to send
			continue
		case rec.First <= since && rec.Last <= since:
			spills = nil
			continue
		}
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
