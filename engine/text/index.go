package text

import (
	"slices"
	"sort"
)

// Default BM25 parameters, used when New is given zero.
const (
	DefaultK1 = 1.2
	DefaultB  = 0.75
)

// posting is one document's entry in a term's postings: the document's
// slot and how often the term occurs in it.
type posting struct {
	slot uint32
	tf   uint32
}

// term is one distinct token: its text and its postings sorted by slot.
type term struct {
	text     string
	postings []posting
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
	docTerms  [][]uint32       // by slot: the distinct term ids of the document; nil when free
	live      []bool           // by slot
	freeSlots []uint32

	total int64 // sum of lengths of live documents
}

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

	counts := make(map[uint32]uint32)
	var order []uint32
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
		x.addPosting(t, posting{slot: slot, tf: counts[t]})
	}
	x.lens[slot] = dl
	x.docTerms[slot] = slices.Clip(order)
	if x.docTerms[slot] == nil {
		x.docTerms[slot] = []uint32{}
	}
	x.total += int64(dl)
}

// Remove drops document id; removing an id not present does nothing.
func (x *Index) Remove(id int64) {
	slot, ok := x.slotOf[id]
	if !ok {
		return
	}
	for _, t := range x.docTerms[slot] {
		x.dropPosting(t, slot)
	}
	x.total -= int64(x.lens[slot])
	delete(x.slotOf, id)
	x.ids[slot] = 0
	x.lens[slot] = 0
	x.docTerms[slot] = nil
	x.live[slot] = false
	x.freeSlots = append(x.freeSlots, slot)
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
	return len(x.terms[t].postings)
}

// Terms returns the number of distinct tokens in the index.
func (x *Index) Terms() int { return len(x.dict) }

// MemoryBytes estimates the heap the index holds, for memory accounting.
func (x *Index) MemoryBytes() int64 {
	const mapEntry = 48 // rough per-entry cost of a Go map, key and value
	n := int64(len(x.dict)) * mapEntry
	for i := range x.terms {
		n += int64(len(x.terms[i].text)) + 40 + int64(cap(x.terms[i].postings))*8
	}
	n += int64(len(x.slotOf)) * mapEntry
	n += int64(cap(x.ids))*8 + int64(cap(x.lens))*4 + int64(cap(x.live))
	for _, d := range x.docTerms {
		n += 24 + int64(cap(d))*4
	}
	n += int64(cap(x.freeSlots)+cap(x.freeTerms)) * 4
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
		x.docTerms = append(x.docTerms, nil)
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

// addPosting inserts p into term t's postings, keeping them sorted by slot.
func (x *Index) addPosting(t uint32, p posting) {
	ps := x.terms[t].postings
	if n := len(ps); n == 0 || ps[n-1].slot < p.slot {
		x.terms[t].postings = append(ps, p)
		return
	}
	i := sort.Search(len(ps), func(i int) bool { return ps[i].slot >= p.slot })
	x.terms[t].postings = slices.Insert(ps, i, p)
}

// dropPosting removes slot from term t's postings; a term left with none
// is forgotten and its id reused.
func (x *Index) dropPosting(t uint32, slot uint32) {
	ps := x.terms[t].postings
	i := sort.Search(len(ps), func(i int) bool { return ps[i].slot >= slot })
	if i < len(ps) && ps[i].slot == slot {
		ps = slices.Delete(ps, i, i+1)
	}
	if len(ps) == 0 {
		delete(x.dict, x.terms[t].text)
		x.terms[t] = term{}
		x.freeTerms = append(x.freeTerms, t)
		return
	}
	// Give back memory when a list shrinks far below its capacity.
	if cap(ps) > 64 && len(ps) < cap(ps)/4 {
		ps = slices.Clone(ps)
	}
	x.terms[t].postings = ps
}
