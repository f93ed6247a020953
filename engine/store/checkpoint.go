package store

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
)

// keepFrom picks where the kept records start: the earliest index entry
// from which the records (images left out) to the end of the file fit in
// retain bytes; failing that, the trailing records that hold no write
// (forks at the current seq), which are always kept so that the file holds
// every record after its base. ok false keeps nothing.
func keepFrom(idx *indexer, images []span, size, retain int64, seq uint64) (indexEntry, bool) {
	if retain > 0 {
		for _, e := range idx.entries {
			kept := size - e.off
			for _, im := range images {
				if im.start >= e.off {
					kept -= im.end - im.start
				}
			}
			if kept <= retain {
				return e, true
			}
		}
	}
	if idx.zeroRun >= 0 {
		return indexEntry{off: idx.zeroRun, first: seq + 1}, true
	}
	return indexEntry{}, false
}

func (l *Log) checkpoint(writeState WriteStateFunc, retain int64) error {
	_, err := l.rewrite(writeState, retain, false)
	return err
}

// rewrite writes a checkpoint keeping retain bytes of records and renames
// it over the file. With shrink it does so only where the file gains by
// it (see Shrink), and reports whether it did. wmu is taken here.
func (l *Log) rewrite(writeState WriteStateFunc, retain int64, shrink bool) (bool, error) {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	l.mu.Lock()
	if err := l.usableLocked(); err != nil {
		l.mu.Unlock()
		return false, err
	}
	if err := l.spillingLocked(); err != nil {
		l.mu.Unlock()
		return false, fmt.Errorf("checkpoint: %w", err)
	}
	ref := l.file.acquire()
	size, pos := l.size, Position{Seq: l.seq, Lineage: l.lineageCopyLocked()}
	idx, images, wrote := l.idx, l.images, l.appended > l.openLSN
	l.mu.Unlock()
	defer ref.release()
	// An open replaying more records than a checkpoint keeps is worth an
	// image even where the file grows by its graphs.
	long := recordsAfterImage(images, size) > retain
	if shrink && (!wrote || !long && !mayShrink(&idx, images, size, retain, pos.Seq)) {
		return false, nil // nothing written since the open, or a rewrite cannot be smaller
	}

	tmp := l.path + ".tmp"
	f, err := openSide(tmp)
	if err != nil {
		return false, fmt.Errorf("checkpoint: %w", err)
	}
	renamed := false
	defer func() {
		if !renamed {
			f.Close()
			os.Remove(tmp)
		}
	}()
	built, err := l.writeCheckpoint(f, ref.f, pos, &idx, images, size, retain, writeState)
	if err != nil {
		return false, fmt.Errorf("checkpoint: %w", err)
	}
	if shrink && !long && built.end >= size {
		return false, nil
	}
	if err := datasync(f); err != nil {
		return false, fmt.Errorf("checkpoint: sync: %w", err)
	}
	if err := os.Rename(tmp, l.path); err != nil {
		return false, fmt.Errorf("checkpoint: rename: %w", err)
	}
	renamed = true
	return true, l.switchFile(f, built, syncDir(l.path))
}

// recordsAfterImage is the bytes of records after a file's last image
// (after its header when it has none): what an open replays.
func recordsAfterImage(images []span, size int64) int64 {
	if len(images) == 0 {
		return size - headerSize
	}
	return size - images[len(images)-1].end
}

// mayShrink says whether a checkpoint could be smaller than the file: the
// records it would keep, with the header, leave room for an image below
// the file's size.
func mayShrink(idx *indexer, images []span, size, retain int64, seq uint64) bool {
	from, keep := keepFrom(idx, images, size, retain, seq)
	kept := int64(0)
	if keep {
		kept = size - from.off
		for _, im := range images {
			if im.start >= from.off {
				kept -= im.end - im.start
			}
		}
	}
	return headerSize+kept < size
}

// switchFile makes the renamed checkpoint file the Log's file. wmu is held.
func (l *Log) switchFile(f *os.File, built *scanned, dirErr error) error {
	l.mu.Lock()
	old := l.file
	l.file = newFileRef(f)
	l.size, l.base = built.end, built.base
	l.idx, l.images = built.idx, built.images
	// The file ends with an image: nothing after it to bound. A checkpoint
	// leaves seq and lineage as they were; ForkPast moves them on.
	l.seq, l.lineage, l.bound, l.lost = built.seq, built.lineage, 0, 0
	l.lsnBase = l.appended - built.end
	l.durableLSN, l.durableSeq = l.appended, l.seq
	l.notifyLocked()
	var err error
	if dirErr != nil {
		// The new file is whole, but its name may not survive a crash:
		// appending to it could lose acknowledged writes.
		err = l.failLocked(fmt.Errorf("checkpoint: %w", dirErr))
	}
	l.mu.Unlock()
	old.release()
	return err
}

// writeCheckpoint writes header, kept records and image into f and
// describes what it wrote.
func (l *Log) writeCheckpoint(f, old *os.File, pos Position, idx *indexer, images []span,
	size, retain int64, writeState WriteStateFunc) (*scanned, error) {
	built := &scanned{base: pos.Seq, seq: pos.Seq, lineage: pos.Lineage, idx: newIndexer(l.opts.indexEvery)}
	from, keep := keepFrom(idx, images, size, retain, pos.Seq)
	if keep {
		built.base = from.first - 1
	}
	cw := &countingWriter{w: f}
	bw := bufio.NewWriterSize(cw, 1<<20)
	if _, err := bw.Write(encodeHeader(built.base)); err != nil {
		return nil, err
	}
	off := int64(headerSize)
	if keep {
		var err error
		if off, err = copyKept(bw, old, from.off, size, images, &built.idx); err != nil {
			return nil, err
		}
	}
	n, err := writeImageFrames(bw, pos, l.opts.imageChunk, off, writeState)
	if err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	built.images = []span{{start: off, end: off + n, seq: pos.Seq}}
	built.idx.image()
	if err := bw.Flush(); err != nil {
		return nil, err
	}
	built.end = off + n
	if cw.n != built.end {
		return nil, fmt.Errorf("wrote %d bytes, counted %d", cw.n, built.end)
	}
	return built, nil
}

// copyKept copies the records of old from off to size (images left out,
// and refused blocks' spills with their drop marker) to w, which starts
// after a header, indexing them in idx. It returns the offset after them.
func copyKept(w io.Writer, old *os.File, off, size int64, images []span, idx *indexer) (int64, error) {
	out := int64(headerSize)
	var spills []span
	it := newFrameIter(old, off, size, images)
	for {
		frame, at, err := it.next()
		if errors.Is(err, io.EOF) {
			return out, nil // spills left would be a block not landed: none while checkpointing
		}
		if err != nil {
			return 0, err
		}
		rec, err := DecodeFrame(frame)
		if err != nil {
			return 0, fmt.Errorf("frame at %d: %w", at, err)
		}
		switch rec.Kind {
		case KindSpill:
			spills = append(spills, span{start: at, end: at + int64(len(frame))})
			continue
		case KindSpillDrop:
			spills = nil
			continue
		case KindBound:
			continue // the image after the kept records ends the file
		}
		for _, sp := range spills {
			if _, err := io.Copy(w, io.NewSectionReader(old, sp.start, sp.end-sp.start)); err != nil {
				return 0, err
			}
			idx.record(out, Record{Kind: KindSpill, First: rec.First, Last: rec.First - 1})
			out += sp.end - sp.start
		}
		spills = nil
		idx.record(out, rec)
		if _, err := w.Write(frame); err != nil {
			return 0, err
		}
		out += int64(len(frame))
	}
}
