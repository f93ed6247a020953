package engine

import (
	"sync"
	"sync/atomic"

	"github.com/google/btree"
)

// doc is one stored document: its id and its values by field position,
// encoded (see encodeVals; val and values decode them). A stored doc is
// never modified in place: a write replaces it, so rows handed to readers
// and watchers stay as they were and strings may point into raw.
type doc struct {
	id  int64
	raw []byte
	tab *docTable // the image's table raw is a view of (doctable.go); nil: raw is the heap's
}

// collection is one collection's documents and indexes. Writes hold the
// DB's write lock; reads hold its read lock.
type collection struct {
	sch *schema
	// base is the documents as the last image holds them, read where the
	// mapped file does (nil: none); order is the changes since, by id:
	// each document written, and a tombstone (tab: tombstone) for each of
	// base's deleted. get, ascend and descend merge them (doctable.go).
	base  *docTable
	order *btree.BTreeG[*doc]
	n     int // live documents

	// Indexes by field position (nil where a field has none).
	hash   []*hashIndex   // @hash and @unique
	sorted []*sortedIndex // @sorted and @ttl
	search []searchIndex  // @text and @hnsw

	mem int64 // estimated bytes of the stored documents

	// lazyMu guards lazy among readers (who build it under the DB's read
	// lock); writers hold the DB's write lock, so no reader runs beside
	// them and they use lazy without lazyMu.
	lazyMu sync.Mutex
	lazy   map[int]*hashIndex // hash indexes built on first use by lookup
}

func docLess(a, b *doc) bool { return a.id < b.id }

func newCollection(s *schema) *collection {
	c := &collection{
		sch:    s,
		order:  btree.NewG(32, docLess),
		hash:   make([]*hashIndex, len(s.Fields)),
		sorted: make([]*sortedIndex, len(s.Fields)),
		search: make([]searchIndex, len(s.Fields)),
		lazy:   make(map[int]*hashIndex),
	}
	for i := range s.Fields {
		c.addIndexes(i)
	}
	return c
}

// addIndexes creates (empty) the indexes field i's annotations ask for.
func (c *collection) addIndexes(i int) {
	f := &c.sch.Fields[i]
	if (f.Hash || f.Unique) && c.hash[i] == nil {
		c.hash[i] = newHashIndex()
	}
	if (f.Sorted || f.TTLms > 0) && c.sorted[i] == nil {
		c.sorted[i] = newSortedIndex(f.Type.kind)
	}
	if (f.Text || f.HNSW != nil) && c.search[i] == nil {
		c.search[i] = newSearchIndex(f)
	}
}

func (c *collection) indexOne(i int, d *doc, v any) {
	if v == nil {
		return
	}
	if h := c.hash[i]; h != nil && h.ready.Load() {
		h.add(v, d.id)
	}
	if s := c.sorted[i]; s != nil && s.ready.Load() {
		s.add(v, d.id)
	}
	if s := c.search[i]; s != nil {
		s.put(d.id, v)
	}
	if h := c.lazy[i]; h != nil {
		if k, ok := keyFor(c.sch.Fields[i].Type.kind, v); ok {
			h.add(k, d.id)
		}
	}
}

func (c *collection) unindexOne(i int, d *doc, v any) {
	if v == nil {
		return
	}
	if h := c.hash[i]; h != nil && h.ready.Load() {
		h.remove(v, d.id)
	}
	if s := c.sorted[i]; s != nil && s.ready.Load() {
		s.remove(v, d.id)
	}
	if s := c.search[i]; s != nil {
		s.remove(d.id)
	}
	if h := c.lazy[i]; h != nil {
		if k, ok := keyFor(c.sch.Fields[i].Type.kind, v); ok {
			h.remove(k, d.id)
		}
	}
}

// set stores d (replacing any doc with its id) and returns the old one.
// vals are d's values when the caller has them decoded, else nil.
func (c *collection) set(d *doc, vals []any) *doc {
	old := c.get(d.id)
	if prev, ok := c.order.ReplaceOrInsert(d); ok {
		c.mem -= docBytes(prev)
	}
	c.mem += docBytes(d)
	if old != nil {
		c.eachIndexed(old, c.unindexOne)
	} else {
		c.n++
	}
	if vals == nil {
		c.eachIndexed(d, c.indexOne)
		return old
	}
	for i, v := range vals {
		if c.indexed(i) {
			c.indexOne(i, d, v)
		}
	}
	return old
}

// indexed says whether field i has an index to keep: one built (an index
// not built yet reads the documents as they are when it is).
func (c *collection) indexed(i int) bool {
	if h := c.hash[i]; h != nil && h.ready.Load() {
		return true
	}
	if s := c.sorted[i]; s != nil && s.ready.Load() {
		return true
	}
	switch x := c.search[i].(type) {
	case *vectorIndex:
		return true
	case *textIndex:
		if x.built() != nil {
			return true
		}
	}
	return c.lazy[i] != nil
}

// eachIndexed decodes d's indexed fields only, skipping the others, and
// calls fn with each. (Called under the write lock, as lazy allows.)
func (c *collection) eachIndexed(d *doc, fn func(i int, d *doc, v any)) {
	last := -1 // the last field with an index to keep: none past it is decoded
	for i := range c.sch.Fields {
		if c.indexed(i) {
			last = i
		}
	}
	b := d.raw
	for i := range last + 1 {
		k := skipValue(b, 0)
		if k < 0 {
			return
		}
		if c.indexed(i) {
			dec := decoder{b: b[:k], alias: d.tab == nil}
			fn(i, d, dec.value(0))
		}
		b = b[k:]
	}
}

// remove deletes the doc with id and returns it (nil if none).
func (c *collection) remove(id int64) *doc {
	old := c.get(id)
	if old == nil {
		return nil
	}
	c.eachIndexed(old, c.unindexOne)
	c.n--
	if !c.base.has(id) {
		c.order.Delete(old)
		c.mem -= docBytes(old)
		return old
	}
	gone := &doc{id: id, tab: tombstone}
	if prev, ok := c.order.ReplaceOrInsert(gone); ok {
		c.mem -= docBytes(prev)
	}
	c.mem += docBytes(gone)
	return old
}

func (c *collection) hasTTL() bool {
	for i := range c.sch.Fields {
		if c.sch.Fields[i].TTLms > 0 {
			return true
		}
	}
	return false
}

// uniqueHolder returns the id holding value v of @unique field i, if any
// other than self.
func (c *collection) uniqueHolder(i int, v any, self int64) (int64, bool) {
	h := c.hashOf(i)
	if h == nil || v == nil {
		return 0, false
	}
	for _, id := range h.get(v) {
		if id != self {
			return id, true
		}
	}
	return 0, false
}

// hashOf returns field i's @hash or @unique index (nil if it has none),
// built from the documents if this is its first use: an open, and an
// index created, decode nothing for it. Safe under the read lock:
// building takes lazyMu.
func (c *collection) hashOf(i int) *hashIndex {
	h := c.hash[i]
	if h == nil || h.ready.Load() {
		return h
	}
	c.lazyMu.Lock()
	defer c.lazyMu.Unlock()
	if !h.ready.Load() {
		c.ascend(func(d *doc) bool {
			if v := d.val(i); v != nil {
				h.add(v, d.id)
			}
			return true
		})
		h.ready.Store(true)
	}
	return h
}

// sortedOf returns field i's @sorted or @ttl index (nil if it has none),
// built from the documents if this is its first use, as hashOf.
func (c *collection) sortedOf(i int) *sortedIndex {
	s := c.sorted[i]
	if s == nil || s.ready.Load() {
		return s
	}
	c.lazyMu.Lock()
	defer c.lazyMu.Unlock()
	if !s.ready.Load() {
		c.ascend(func(d *doc) bool {
			if v := d.val(i); v != nil {
				s.add(v, d.id)
			}
			return true
		})
		s.ready.Store(true)
	}
	return s
}

// lookupIndex returns a hash index on field i, building it on first use.
// Safe under the read lock: building takes lazyMu.
func (c *collection) lookupIndex(i int) *hashIndex {
	if c.hash[i] != nil {
		return c.hashOf(i)
	}
	c.lazyMu.Lock()
	defer c.lazyMu.Unlock()
	if h := c.lazy[i]; h != nil {
		return h
	}
	kind := c.sch.Fields[i].Type.kind
	h := newHashIndex()
	h.ready.Store(true)
	if hashableKind(kind) {
		c.ascend(func(d *doc) bool {
			if k, ok := keyFor(kind, d.val(i)); ok {
				h.add(k, d.id)
			}
			return true
		})
	}
	c.lazy[i] = h
	return h
}

// docBytes estimates what a changed doc holds in memory, its map and tree
// entries included; one of the table is counted with it (docTable.size).
func docBytes(d *doc) int64 {
	if d.tab != nil && d.tab != tombstone {
		return 0
	}
	return int64(40+cap(d.raw)) + 48 // doc, raw, map and tree entries
}

// memoryBytes estimates the collection's documents and indexes.
func (c *collection) memoryBytes() int64 {
	n := c.mem
	if c.base != nil {
		n += c.base.size // mapped, counted whole as a graph's section is
	}
	// Indexes count once built (built on first use; ready is set once a
	// build is done, so a build beside this is not read).
	for _, h := range c.hash {
		if h != nil && h.ready.Load() {
			n += int64(len(h.m)) * 64
		}
	}
	for _, s := range c.sorted {
		if s != nil && s.ready.Load() {
			n += int64(s.len()) * s.itemBytes()
		}
	}
	for _, x := range c.search {
		switch x := x.(type) {
		case *vectorIndex:
			n += x.graph().MemoryBytes()
		case *textIndex:
			if t := x.built(); t != nil {
				n += t.MemoryBytes()
			}
		}
	}
	c.lazyMu.Lock()
	for _, h := range c.lazy {
		n += int64(len(h.m)) * 64
	}
	c.lazyMu.Unlock()
	return n
}

// row turns a stored doc into an answer row holding every field.
func (c *collection) row(d *doc) Row {
	r := make(Row, len(c.sch.Fields)+1)
	r["id"] = d.id
	for i, v := range d.values(len(c.sch.Fields)) {
		r[c.sch.Fields[i].Name] = v
	}
	return r
}

// hashIndex maps a key to the ids holding it. An index of @hash or
// @unique is built on its first use (collection.hashOf): until ready,
// writes leave it be.
type hashIndex struct {
	m     map[any]*bucket
	ready atomic.Bool
}

// bucket holds ids in a slice while small, and in a set once large so a
// low-cardinality field does not make removal linear.
type bucket struct {
	ids []int64
	set map[int64]struct{}
}

func newHashIndex() *hashIndex { return &hashIndex{m: make(map[any]*bucket)} }

func (h *hashIndex) add(k any, id int64) {
	b := h.m[k]
	if b == nil {
		b = &bucket{}
		h.m[k] = b
	}
	if b.set != nil {
		b.set[id] = struct{}{}
		return
	}
	b.ids = append(b.ids, id)
	if len(b.ids) > 64 {
		b.set = make(map[int64]struct{}, len(b.ids))
		for _, x := range b.ids {
			b.set[x] = struct{}{}
		}
		b.ids = nil
	}
}

func (h *hashIndex) remove(k any, id int64) {
	b := h.m[k]
	if b == nil {
		return
	}
	if b.set != nil {
		delete(b.set, id)
		if len(b.set) == 0 {
			delete(h.m, k)
		}
		return
	}
	for j, x := range b.ids {
		if x == id {
			b.ids[j] = b.ids[len(b.ids)-1]
			b.ids = b.ids[:len(b.ids)-1]
			break
		}
	}
	if len(b.ids) == 0 {
		delete(h.m, k)
	}
}

// get returns the ids holding k (in no order); the slice is the caller's.
func (h *hashIndex) get(k any) []int64 {
	b := h.m[k]
	if b == nil {
		return nil
	}
	if b.set != nil {
		out := make([]int64, 0, len(b.set))
		for id := range b.set {
			out = append(out, id)
		}
		return out
	}
	return append([]int64(nil), b.ids...)
}

func (h *hashIndex) count(k any) int {
	b := h.m[k]
	switch {
	case b == nil:
		return 0
	case b.set != nil:
		return len(b.set)
	}
	return len(b.ids)
}
