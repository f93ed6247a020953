package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
)

// span is a byte range of a file: one whole image, written at seq.
type span struct {
	start, end int64
	seq        uint64
}

// indexEntry is one point of the sparse index: a record (not an image
// frame) starting at off whose First is first.
type indexEntry struct {
	off   int64
	first uint64
}

// defaultIndexEvery is the least distance between two index entries.
const defaultIndexEvery = 64 << 10

// indexer builds the sparse index as records go by. An entry is put only
// on a record whose previous record (images aside) holds a write, so no
// record before an entry has a First as high as the entry's: reading or
// keeping records from an entry on never leaves out a fork at its seq.
type indexer struct {
	every   int64
	entries []indexEntry
	last    int64 // offset of the last entry
	pending bool  // the next eligible record gets an entry whatever the distance
	// zeroRun is the offset of the first of the trailing records that
	// hold no write (forks at the current seq), or -1. Bounds are passed
	// over: they are not read, nor kept.
	zeroRun int64
}

func newIndexer(every int64) indexer {
	if every <= 0 {
		every = defaultIndexEvery
	}
	return indexer{every: every, pending: true, zeroRun: -1}
}

// record notes a record (not an image frame) starting at off.
func (x *indexer) record(off int64, rec Record) {
	if rec.Kind == KindBound {
		return
	}
	if x.zeroRun < 0 && (x.pending || off-x.last >= x.every) {
		x.entries = append(x.entries, indexEntry{off: off, first: rec.First})
		x.last, x.pending = off, false
	}
	switch {
	case rec.N() > 0:
		x.zeroRun = -1
	case x.zeroRun < 0:
		x.zeroRun = off
	}
}

// image notes a whole image: the first record after it gets an entry.
func (x *indexer) image() { x.pending = true }

// scanned is what a scan of a whole file learned.
type scanned struct {
	base    uint64
	seq     uint64
	end     int64 // offset after the last good frame
	lineage []LineageEntry
	images  []span // complete images, in file order
	// bound is the last bound since the file's last fork or image (0:
	// none): a Log appending its own writes may have gone as far.
	bound   uint64
	idx     indexer
	tailWhy string // why the frame at end is bad; "" when the file ends there
}

// scanError is a file that cannot be opened as it is: what and where.
type scanError struct {
	off int64
	why string
}

func (e *scanError) Error() string { return fmt.Sprintf("offset %d: %s", e.off, e.why) }

// scan checks every frame of a file held in data. A bad frame with nothing
// valid after it is the tail (s.end stops there); a bad frame followed by a
// valid one is damage. strict refuses any bad frame (an image to install).
func scan(data []byte, indexEvery int64, strict bool) (*scanned, error) {
	return scanTrusting(data, indexEvery, strict, false)
}

// scanTrusting is scan that, with lead, takes the image the file starts
// with as checked already: its frames' checksums are not computed again
// (an install decoded it as it came, each frame's checksum checked).
func scanTrusting(data []byte, indexEvery int64, strict, lead bool) (*scanned, error) {
	base, err := decodeHeader(data)
	if err != nil {
		return nil, &scanError{0, err.Error()}
	}
	sc := &scanner{scanned: scanned{base: base, seq: base, end: headerSize, idx: newIndexer(indexEvery)}}
	for off := int64(headerSize); off < int64(len(data)); {
		leading := off == headerSize || sc.inImage && sc.imgStart == headerSize
		sum := !lead || len(sc.images) > 0 || !leading
		rec, size, why := frameAt(data, off, sc.seq, sum)
		if why != "" {
			if err := badFrame(data, off, sc.seq, why, strict); err != nil {
				return nil, err
			}
			sc.tailWhy = why
			break
		}
		if err := sc.step(off, size, rec); err != nil {
			return nil, err
		}
		off += size
		sc.seq, sc.end = rec.Last, off
	}
	return sc.finish(strict)
}

// badFrame decides what a bad frame at off is: nil for a torn tail, an
// error for damage (or for any bad frame when strict).
func badFrame(data []byte, off int64, seq uint64, why string, strict bool) error {
	if strict {
		return &scanError{off, why}
	}
	switch valid := searchValid(data, off+1, seq, searchBudget(data, off)); {
	case valid >= 0:
		return &scanError{off, fmt.Sprintf("%s (a valid frame follows at %d)", why, valid)}
	case valid == searchGaveUp:
		return &scanError{off, why + " (too much follows it to tell a torn tail from damage)"}
	}
	return nil
}

// scanner is scan's state between frames.
type scanner struct {
	scanned
	inImage    bool
	imgStart   int64
	spills     uint64  // spills of the block not landed yet
	spillStart int64   // offset of its first spill
	spillIdx   indexer // the index as it was before that spill
}

// step takes one good frame (CRC and seq checked) at off.
func (sc *scanner) step(off, size int64, rec Record) error {
	switch {
	case isImage(rec.Kind) && sc.spills > 0:
		return &scanError{off, "image inside a spilled block"}
	case isImage(rec.Kind):
		return sc.image(off, size, rec)
	case sc.inImage:
		return &scanError{off, "record inside an image"}
	}
	switch rec.Kind {
	case KindBound:
		b, err := decodeBound(rec.Body)
		if err != nil {
			return &scanError{off, err.Error()}
		}
		sc.bound = b
		return nil // between a block's spills too: it leaves them be
	case KindFork:
		if sc.spills > 0 {
			return &scanError{off, "fork inside a spilled block"}
		}
		sc.lineage = append(sc.lineage, LineageEntry{History: forkHistory(rec.Body), From: rec.Last})
		sc.bound = 0
	case KindSpill:
		if i, _ := spillPiece(rec.Body); i != sc.spills {
			return &scanError{off, fmt.Sprintf("spill %d where %d was due", i, sc.spills)}
		}
		if sc.spills == 0 {
			sc.spillStart, sc.spillIdx = off, sc.idx
		}
		sc.spills++
	default:
		sc.spills = 0
	}
	sc.idx.record(off, rec)
	return nil
}

// image takes one image frame.
func (sc *scanner) image(off, size int64, rec Record) error {
	if !sc.inImage {
		sc.imgStart = off
		pos, _, err := decodeImageHeader(rec.Body)
		if err != nil {
			return &scanError{off, err.Error()}
		}
		if pos.Seq != sc.seq {
			return &scanError{off, "image seq does not match the records before it"}
		}
		sc.lineage = pos.Lineage
	}
	sc.inImage = rec.Kind == KindImage
	sc.bound = 0
	if !sc.inImage {
		sc.images = append(sc.images, span{sc.imgStart, off + size, sc.seq})
		sc.idx.image()
	}
	return nil
}

// finish checks what the last frames left open.
func (sc *scanner) finish(strict bool) (*scanned, error) {
	if sc.inImage {
		return nil, &scanError{sc.imgStart, "image cut short"}
	}
	if sc.spills > 0 {
		// A block that never landed: its spills go as a torn tail does.
		if strict {
			return nil, &scanError{sc.spillStart, "spilled block never landed"}
		}
		// A bound among them goes with them but is kept: it bounds what
		// the Log may have answered, and only ever by too much.
		sc.end, sc.idx = sc.spillStart, sc.spillIdx
		sc.tailWhy = strings.TrimPrefix(sc.tailWhy+"; spilled block never landed", "; ")
	}
	return &sc.scanned, nil
}

// frameAt checks the frame at off against the seq before it, and against
// its checksum with sum. It returns the record (Body aliasing data), the
// frame's size, or why it is bad.
func frameAt(data []byte, off int64, seq uint64, sum bool) (Record, int64, string) {
	rem := int64(len(data)) - off
	if rem < frameHead {
		return Record{}, 0, "frame header cut short"
	}
	l := int64(binary.LittleEndian.Uint32(data[off:]))
	if l < minPayload {
		return Record{}, 0, "frame length too small"
	}
	if l > rem-frameHead {
		return Record{}, 0, "frame runs past the end of the file"
	}
	p := data[off+frameHead : off+frameHead+l]
	if sum && binary.LittleEndian.Uint32(data[off+4:]) != checksum(p) {
		return Record{}, 0, "checksum does not match"
	}
	rec, err := decodePayload(p)
	if err != nil {
		return Record{}, 0, err.Error()
	}
	if rec.First != seq+1 {
		return Record{}, 0, fmt.Sprintf("seq does not continue (first %d after %d)", rec.First, seq)
	}
	return rec, frameHead + l, ""
}

// frameTrusted decodes the frame at off of a file scan already checked,
// without checking its CRC again.
func frameTrusted(data []byte, off int64) (Record, int64, error) {
	if int64(len(data))-off < frameHead {
		return Record{}, 0, errors.New("frame header cut short")
	}
	l := int64(binary.LittleEndian.Uint32(data[off:]))
	if l > int64(len(data))-off-frameHead {
		return Record{}, 0, errors.New("frame runs past the end of the file")
	}
	rec, err := decodePayload(data[off+frameHead : off+frameHead+l])
	return rec, frameHead + l, err
}

// searchBudget is the checksum work a search after a bad frame at off may
// do: a few times what follows it, and a gigabyte more.
func searchBudget(data []byte, off int64) int64 {
	return 8*(int64(len(data))-off) + 1<<30
}

const (
	searchNone   = -1
	searchGaveUp = -2
)

// searchValid looks for any valid frame starting at or after from: CRC
// matching, kind known, seqs continuing past seq. It returns its offset,
// searchNone, or searchGaveUp when checking every candidate would cost
// more checksum work than the budget (the caller then refuses the file
// rather than cut what may be good records).
func searchValid(data []byte, from int64, seq uint64, budget int64) int64 {
	n := int64(len(data))
	for p := from; p+frameHead+minPayload <= n; p++ {
		if !knownKind(Kind(data[p+frameHead])) {
			continue
		}
		l := int64(binary.LittleEndian.Uint32(data[p:]))
		if l < minPayload || l > n-p-frameHead {
			continue
		}
		pl := data[p+frameHead : p+frameHead+l]
		rec, err := decodePayload(pl)
		if err != nil || rec.First <= seq {
			continue
		}
		if budget -= l; budget < 0 {
			return searchGaveUp
		}
		if binary.LittleEndian.Uint32(data[p+4:]) == checksum(pl) {
			return p
		}
	}
	return searchNone
}
