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
	// hold no write (forks at the current seq), or -1.
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
	base, err := decodeHeader(data)
	if err != nil {
		return nil, &scanError{0, err.Error()}
	}
	s := &scanned{base: base, seq: base, end: headerSize, idx: newIndexer(indexEvery)}
	var (
		inImage    bool
		imgStart   int64
		spills     uint64  // spills of the block not landed yet
		spillStart int64   // offset of its first spill
		spillIdx   indexer // the index as it was before that spill
	)
	off := int64(headerSize)
	for off < int64(len(data)) {
		rec, size, why := frameAt(data, off, s.seq)
		if why != "" {
			if strict {
				return nil, &scanError{off, why}
			}
			if valid := searchValid(data, off+1, s.seq, searchBudget(data, off)); valid >= 0 {
				return nil, &scanError{off, fmt.Sprintf("%s (a valid frame follows at %d)", why, valid)}
			} else if valid == searchGaveUp {
				return nil, &scanError{off, why + " (too much follows it to tell a torn tail from damage)"}
			}
			s.tailWhy = why
			break
		}
		switch {
		case isImage(rec.Kind) && spills > 0:
			return nil, &scanError{off, "image inside a spilled block"}
		case isImage(rec.Kind):
			if !inImage {
				imgStart = off
				pos, _, err := decodeImageHeader(rec.Body)
				if err != nil {
					return nil, &scanError{off, err.Error()}
				}
				if pos.Seq != s.seq {
					return nil, &scanError{off, "image seq does not match the records before it"}
				}
				s.lineage = pos.Lineage
			}
			inImage = rec.Kind == KindImage
			if !inImage {
				s.images = append(s.images, span{imgStart, off + size, s.seq})
				s.idx.image()
			}
		case inImage:
			return nil, &scanError{off, "record inside an image"}
		default:
			switch rec.Kind {
			case KindFork:
				if spills > 0 {
					return nil, &scanError{off, "fork inside a spilled block"}
				}
				s.lineage = append(s.lineage, LineageEntry{History: forkHistory(rec.Body), From: rec.Last})
			case KindSpill:
				if i, _ := spillPiece(rec.Body); i != spills {
					return nil, &scanError{off, fmt.Sprintf("spill %d where %d was due", i, spills)}
				}
				if spills == 0 {
					spillStart, spillIdx = off, s.idx
				}
				spills++
			default:
				spills = 0
			}
			s.idx.record(off, rec)
		}
		s.seq = rec.Last
		off += size
		s.end = off
	}
	if inImage {
		return nil, &scanError{imgStart, "image cut short"}
	}
	if spills > 0 {
		// A block that never landed: its spills go as a torn tail does.
		if strict {
			return nil, &scanError{spillStart, "spilled block never landed"}
		}
		s.end, s.idx = spillStart, spillIdx
		s.tailWhy = strings.TrimPrefix(s.tailWhy+"; spilled block never landed", "; ")
	}
	return s, nil
}

// frameAt checks the frame at off against the seq before it. It returns
// the record (Body aliasing data), the frame's size, or why it is bad.
func frameAt(data []byte, off int64, seq uint64) (Record, int64, string) {
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
	if binary.LittleEndian.Uint32(data[off+4:]) != checksum(p) {
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
