package text

import (
	"math"
	"slices"
)

// Default BM25 parameters, used when New is given zero.
const (
	DefaultK1 = 1.2
	DefaultB  = 0.75
)

// MaxTF is the largest term frequency kept per document: a token repeated
// more often in one document counts MaxTF times.
const MaxTF = math.MaxUint16

// term is one distinct token: its text and its postings, as two parallel
// slices sorted by slot: the documents holding it and how often each does
// (6 bytes a posting).
type term struct {
	text  string
	slots []uint32
	tfs   []uint16
}

// Index is a BM25 index over one text field. The zero value is not usable;
// call New.
type Index struct {
	k1, b float64

	dict      map[string]uint32 // token -> term id
	terms     []term            // by term id; a freed id has nil postings and empty text
	freeTerms []uint32

	slotOf    map[int64]uint32 // document id -> slot
	ids       []int64          // by slot
	lens      []uint32         // by slot: document length in tokens
	live      []bool           // by slot
	freeSlots []uint32

	// The distinct term ids of each document, which Remove needs, lie in
	// one arena: the document in slot s holds arena[off[s]:off[s]+cnt[s]].
	// Removed documents leave holes, counted in holes, and the arena is
	// compacted once they pass half of it.
	arena []uint32
	off   []uint32 // by slot
	cnt   []uint32 // by slot
	holes int

	total int64 // sum of lengths of live documents

	// Put's scratch, kept from one document to the next (Put is never
	// called beside another): each term's count in the document, and
	// the document's terms in the order met.
	counts map[uint32]int
	order  []uint32
}

// scratchKept is the most distinct terms of a document whose scratch Put
// keeps for the next.
const scratchKept = 1024

// New returns an empty index with BM25 parameters k1 and b; zero selects
// DefaultK1 and DefaultB.
func New(k1, b float64) *Index {
	if k1 == 0 {
		k1 = DefaultK1
	}
	if b == 0 {
		b = DefaultB
	}
	return &Index{
		k1:     k1,
		b:      b,
		dict:   make(map[string]uint32),
		slotOf: make(map[int64]uint32),
	}
}

// Put indexes text as document id, replacing what id held before. A text
// with no tokens still counts as a document, of length 0.
func (x *Index) Put(id int64, text string) {
	x.Remove(id)
	slot := x.allocSlot(id)

	if x.counts == nil {
		x.counts = make(map[uint32]int)
	}
	counts := x.counts // Put's own, cleared for each document
	clear(counts)
	order := x.order[:0]
	var dl uint32
	forEachToken(text, func(tok []byte) {
		dl++
		t := x.termID(tok)
		if counts[t] == 0 {
			order = append(order, t)
		}
		counts[t]++
	})
	slices.Sort(order)
	for _, t := range order {
		x.addPosting(t, slot, uint16(min(counts[t], MaxTF)))
	}
	x.order = order
	if len(order) > scratchKept { // a long document: its scratch not kept, so clearing stays cheap
		x.counts, x.order = nil, nil
	}
	x.lens[slot] = dl
	x.off[slot] = uint32(len(x.arena))
	x.cnt[slot] = uint32(len(order))
	x.arena = append(x.arena, order...)
	x.total += int64(dl)
}

// Remove drops document id; removing an id not present does nothing.
func (x *Index) Remove(id int64) {
	slot, ok := x.slotOf[id]
	if !ok {
		return
	}
	for _, t := range x.docTermIDs(slot) {
		x.dropPosting(t, slot)
	}
	x.total -= int64(x.lens[slot])
	delete(x.slotOf, id)
	x.holes += int(x.cnt[slot])
	x.ids[slot], x.lens[slot], x.off[slot], x.cnt[slot] = 0, 0, 0, 0
	x.live[slot] = false
	x.freeSlots = append(x.freeSlots, slot)
	if x.holes > 1024 && x.holes > len(x.arena)/2 {
		x.compact()
	}
}

// docTermIDs returns the distinct term ids of the document in slot.
func (x *Index) docTermIDs(slot uint32) []uint32 {
	o := x.off[slot]
	return x.arena[o : o+x.cnt[slot]]
}

// compact rewrites the arena without its holes.
func (x *Index) compact() {
	arena := make([]uint32, 0, len(x.arena)-x.holes)
	for s := range x.ids {
		if !x.live[s] {
			continue
		}
		ts := x.docTermIDs(uint32(s))
		x.off[s] = uint32(len(arena))
		arena = append(arena, ts...)
	}
	x.arena = arena
	x.holes = 0
}

// Has reports whether document id is indexed.
func (x *Index) Has(id int64) bool {
	_, ok := x.slotOf[id]
	return ok
}

// Len returns the number of documents indexed.
func (x *Index) Len() int { return len(x.slotOf) }

// TotalLen returns the sum of the lengths, in tokens, of all documents.
func (x *Index) TotalLen() int64 { return x.total }

// AvgLen returns the average document length in tokens (0 when empty).
func (x *Index) AvgLen() float64 {
	if len(x.slotOf) == 0 {
		return 0
	}
	return float64(x.total) / float64(len(x.slotOf))
}

// DocFreq returns how many documents contain token tok. tok is matched as
// Tokenize would produce it (already lower-cased).
func (x *Index) DocFreq(tok string) int {
	t, ok := x.dict[tok]
	if !ok {
		return 0
	}
	return len(x.terms[t].slots)
}

// Terms returns the number of distinct tokens in the index.
func (x *Index) Terms() int { return len(x.dict) }

// MemoryBytes estimates the heap the index holds, for memory accounting.
func (x *Index) MemoryBytes() int64 {
	const mapEntry = 32 // rough per-entry cost of a Go map, key and value
	n := int64(len(x.dict)) * mapEntry
	for i := range x.terms {
		tm := &x.terms[i]
		n += 64 + int64(len(tm.text)) + int64(cap(tm.slots))*4 + int64(cap(tm.tfs))*2
	}
	n += int64(len(x.slotOf)) * mapEntry
	n += int64(cap(x.ids))*8 + int64(cap(x.lens)+cap(x.off)+cap(x.cnt))*4 + int64(cap(x.live))
	n += int64(cap(x.arena)+cap(x.freeSlots)+cap(x.freeTerms)) * 4
	return n
}

func (x *Index) allocSlot(id int64) uint32 {
	var slot uint32
	if n := len(x.freeSlots); n > 0 {
		slot = x.freeSlots[n-1]
		x.freeSlots = x.freeSlots[:n-1]
	} else {
		slot = uint32(len(x.ids))
		x.ids = append(x.ids, 0)
		x.lens = append(x.lens, 0)
		x.off = append(x.off, 0)
		x.cnt = append(x.cnt, 0)
		x.live = append(x.live, false)
	}
	x.ids[slot] = id
	x.live[slot] = true
	x.slotOf[id] = slot
	return slot
}

// termID returns the id of tok, creating the term if it is new.
func (x *Index) termID(tok []byte) uint32 {
	if t, ok := x.dict[string(tok)]; ok {
		return t
	}
	s := string(tok)
	var t uint32
	if n := len(x.freeTerms); n > 0 {
		t = x.freeTerms[n-1]
		x.freeTerms = x.freeTerms[:n-1]
		x.terms[t] = term{text: s}
	} else {
		t = uint32(len(x.terms))
		x.terms = append(x.terms, term{text: s})
	}
	x.dict[s] = t
	return t
}

// addPosting inserts slot with frequency tf into term t's postings,
// keeping them sorted by slot.
func (x *Index) addPosting(t uint32, slot uint32, tf uint16) {
	tm := &x.terms[t]
	if n := len(tm.slots); n == 0 || tm.slots[n-1] < slot {
		tm.slots = append(tm.slots, slot)
		tm.tfs = append(tm.tfs, tf)
		return
	}
	i, _ := slices.BinarySearch(tm.slots, slot)
	tm.slots = slices.Insert(tm.slots, i, slot)
	tm.tfs = slices.Insert(tm.tfs, i, tf)
}

// dropPosting removes slot from term t's postings; a term left with none
// is forgotten and its id reused.
func (x *Index) dropPosting(t uint32, slot uint32) {
	tm := &x.terms[t]
	if i, ok := slices.BinarySearch(tm.slots, slot); ok {
		tm.slots = slices.Delete(tm.slots, i, i+1)
		tm.tfs = slices.Delete(tm.tfs, i, i+1)
	}
	if len(tm.slots) == 0 {
		delete(x.dict, tm.text)
		*tm = term{}
		x.freeTerms = append(x.freeTerms, t)
		return
	}
	// Give back memory when a list shrinks far below its capacity.
	if cap(tm.slots) > 64 && len(tm.slots) < cap(tm.slots)/4 {
		tm.slots = slices.Clone(tm.slots)
		tm.tfs = slices.Clone(tm.tfs)
	}
}
