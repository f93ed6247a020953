package engine

import (
	"encoding/binary"
	"fmt"
	"sort"
	"sync"

	"github.com/fenec-go/fenec/engine/hnsw"
)

// A collection's documents as the last image holds them are read where
// the mapped file holds them: the image carries, per collection, a
// section (store.SectionWriter) of
//
//	n × (int64 id, uint64 end), little-endian, ids ascending
//	the documents' encoded values, one after another
//
// where document k's values are the bytes from entry k-1's end (0 for
// the first) to its own, counted from the start of the values. An open
// checks the table (ids ascending, within the collection's counter, ends
// in order and within the section) and decodes no document: each is
// decoded when a read reaches it. Writes since the image are a B-tree of
// changes over the table (collection.order): a document written, or a
// tombstone for one of the table's deleted.
//
// A document read from the table (doc.tab set) is a view of the mapping;
// what its values decode to is copied out of it (never aliased), so only
// a *doc points into the mapping. The table holds one reference on the
// mapping (the count graphs keep too: fmap.Region), given back as the
// table is replaced by the next checkpoint's (foldDocs) or the tenant
// closes; every read under the DB's lock runs while it is held. A read
// whose rows are encoded after its lock is given back (lazyRows) takes a
// reference of its own on each table its documents come from, given back
// once nothing reaches the answer (a cleanup the runtime runs: an answer
// may be encoded more than once). A mapping never holds the store's flock
// (fmap.Map), so one that outlives its tenant's close locks nothing.

// docEntry is the size of one entry of a documents section's table.
const docEntry = 16

// docTable is the documents of a collection's last image, read in place.
type docTable struct {
	ents []byte // n entries of docEntry bytes
	vals []byte // the documents' values, back to back
	n    int
	size int64 // the section's bytes, as MemoryBytes counts them

	hold    hnsw.Holder // the table's reference on the mapping (nil: in memory)
	release func()      // gives it back, once
}

// tombstone marks, in a collection's changes, a deleted document the
// table still holds.
var tombstone = &docTable{}

// newDocTable checks section, the documents section of n documents of a
// collection whose last id given is last, and returns the table over it.
// hold, when not nil, is a reference on the mapping section lies in: the
// table keeps it until release, and on an error it is released.
func newDocTable(section []byte, n uint64, last int64, hold hnsw.Holder) (*docTable, error) {
	t, err := checkDocTable(section, n, last)
	if err != nil {
		if hold != nil {
			hold.Release()
		}
		return nil, err
	}
	t.hold, t.release = hold, func() {}
	if hold != nil {
		t.release = sync.OnceFunc(hold.Release)
	}
	return t, nil
}

// pin takes a reference on the table's mapping for a reader that holds
// its documents past the DB's lock; false if it is gone.
func (t *docTable) pin() bool { return t.hold == nil || t.hold.Acquire() }

func checkDocTable(section []byte, n uint64, last int64) (*docTable, error) {
	if n > uint64(len(section))/docEntry {
		return nil, fmt.Errorf("documents section of %d bytes for %d documents", len(section), n)
	}
	t := &docTable{ents: section[:n*docEntry], vals: section[n*docEntry:], n: int(n), size: int64(len(section))}
	prevID, prevEnd := int64(0), uint64(0)
	for k := range t.n {
		id, end := t.entry(k)
		if id <= prevID || id > last {
			return nil, fmt.Errorf("document %d not after %d and within the last id given, %d", id, prevID, last)
		}
		if end < prevEnd || end > uint64(len(t.vals)) {
			return nil, fmt.Errorf("document %d ends at %d, after %d, in %d bytes", id, end, prevEnd, len(t.vals))
		}
		prevID, prevEnd = id, end
	}
	if prevEnd != uint64(len(t.vals)) {
		return nil, fmt.Errorf("documents section holds %d bytes past its documents", uint64(len(t.vals))-prevEnd)
	}
	return t, nil
}

func (t *docTable) entry(k int) (int64, uint64) {
	e := t.ents[k*docEntry:]
	return int64(binary.LittleEndian.Uint64(e)), binary.LittleEndian.Uint64(e[8:])
}

func (t *docTable) id(k int) int64 { return int64(binary.LittleEndian.Uint64(t.ents[k*docEntry:])) }

// doc is document k, a view of the table's bytes.
func (t *docTable) doc(k int) *doc {
	id, end := t.entry(k)
	start := uint64(0)
	if k > 0 {
		_, start = t.entry(k - 1)
	}
	return &doc{id: id, raw: t.vals[start:end:end], tab: t}
}

// search is the place of the first document with an id at or past id.
func (t *docTable) search(id int64) int {
	return sort.Search(t.n, func(k int) bool { return t.id(k) >= id })
}

// has says whether the table holds a document with id.
func (t *docTable) has(id int64) bool {
	if t == nil {
		return false
	}
	k := t.search(id)
	return k < t.n && t.id(k) == id
}

// docSectionLen is the bytes of the documents section of docs.
func docSectionLen(docs []*doc) int64 {
	n := int64(len(docs)) * docEntry
	for _, d := range docs {
		n += int64(len(d.raw))
	}
	return n
}

// appendDocSection appends the documents section of docs (ascending by
// id) to w, in pieces of about 64 KiB.
func writeDocSection(write func([]byte) error, docs []*doc) error {
	b := make([]byte, 0, 64<<10)
	end := uint64(0)
	for _, d := range docs {
		end += uint64(len(d.raw))
		b = binary.LittleEndian.AppendUint64(b, uint64(d.id))
		b = binary.LittleEndian.AppendUint64(b, end)
		if len(b) >= 64<<10-docEntry {
			if err := write(b); err != nil {
				return err
			}
			b = b[:0]
		}
	}
	for _, d := range docs {
		if len(b)+len(d.raw) > cap(b) && len(b) > 0 {
			if err := write(b); err != nil {
				return err
			}
			b = b[:0]
		}
		if len(d.raw) > cap(b) {
			if err := write(d.raw); err != nil {
				return err
			}
			continue
		}
		b = append(b, d.raw...)
	}
	if len(b) == 0 {
		return nil
	}
	return write(b)
}

// The collection's one way to its documents: the table and the changes
// over it, merged in id order.

// get returns the document with id, or nil.
func (c *collection) get(id int64) *doc {
	if d, ok := c.order.Get(&doc{id: id}); ok {
		if d.tab == tombstone {
			return nil
		}
		return d
	}
	if t := c.base; t != nil {
		if k := t.search(id); k < t.n && t.id(k) == id {
			return t.doc(k)
		}
	}
	return nil
}

// len is the number of documents.
func (c *collection) len() int { return c.n }

// ascend visits the documents in id order until fn says stop.
func (c *collection) ascend(fn func(*doc) bool) { c.ascendFrom(-1<<63, fn) }

// ascendFrom visits the documents with an id at or past lo, ascending.
func (c *collection) ascendFrom(lo int64, fn func(*doc) bool) {
	t, k := c.base, 0
	if t == nil {
		t = &docTable{}
	}
	k = t.search(lo)
	stopped := false
	c.order.AscendGreaterOrEqual(&doc{id: lo}, func(ch *doc) bool {
		for ; k < t.n && t.id(k) < ch.id; k++ {
			if !fn(t.doc(k)) {
				stopped = true
				return false
			}
		}
		if k < t.n && t.id(k) == ch.id {
			k++
		}
		if ch.tab != tombstone && !fn(ch) {
			stopped = true
			return false
		}
		return true
	})
	for ; !stopped && k < t.n; k++ {
		if !fn(t.doc(k)) {
			return
		}
	}
}

// descend visits the documents in descending id order.
func (c *collection) descend(fn func(*doc) bool) { c.descendFrom(1<<63-1, fn) }

// descendFrom visits the documents with an id at or below hi, descending.
func (c *collection) descendFrom(hi int64, fn func(*doc) bool) {
	t := c.base
	if t == nil {
		t = &docTable{}
	}
	k := t.search(hi) // the first past hi, or hi itself
	if k < t.n && t.id(k) == hi {
		k++
	}
	k-- // the last at or below hi
	stopped := false
	c.order.DescendLessOrEqual(&doc{id: hi}, func(ch *doc) bool {
		for ; k >= 0 && t.id(k) > ch.id; k-- {
			if !fn(t.doc(k)) {
				stopped = true
				return false
			}
		}
		if k >= 0 && t.id(k) == ch.id {
			k--
		}
		if ch.tab != tombstone && !fn(ch) {
			stopped = true
			return false
		}
		return true
	})
	for ; !stopped && k >= 0; k-- {
		if !fn(t.doc(k)) {
			return
		}
	}
}
