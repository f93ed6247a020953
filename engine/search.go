package engine

import (
	"sync"
	"sync/atomic"

	"github.com/fenec-go/fenec/engine/hnsw"
	"github.com/fenec-go/fenec/engine/text"
)

// searchIndex is a field's full-text or vector index, kept in step with
// the documents by the collection.
type searchIndex interface {
	put(id int64, v any)
	remove(id int64)
}

// textIndex is an @text field's BM25 index, built from the collection's
// documents the first time a match reads it (index), not as the tenant
// opens or the index is created: an open decodes no text, and a tenant
// never searched holds no postings. Until it is built, writes leave it
// be (the build reads the documents as they are then); once built, they
// keep it in step.
type textIndex struct {
	k1, b float64
	// mu guards the build among readers, who build under the DB's read
	// lock; writers hold the write lock, so no build runs beside them.
	mu sync.Mutex
	x  atomic.Pointer[text.Index] // nil until built
}

func newTextIndex(k1, b float64) *textIndex { return &textIndex{k1: k1, b: b} }

func (t *textIndex) put(id int64, v any) {
	x := t.x.Load()
	if x == nil {
		return
	}
	if s, ok := v.(string); ok {
		x.Put(id, s)
	}
}

func (t *textIndex) remove(id int64) {
	if x := t.x.Load(); x != nil {
		x.Remove(id)
	}
}

// built is the index if it was built, else nil.
func (t *textIndex) built() *text.Index { return t.x.Load() }

// index returns the index of field i of c, building it from c's documents
// if this is its first use (the caller holds the DB's lock, read or
// write). A build stopped (stop, the statement's, said so) keeps nothing:
// the next use builds it again.
func (t *textIndex) index(c *collection, i int, stop *stopper) (*text.Index, bool) {
	if x := t.x.Load(); x != nil {
		return x, true
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if x := t.x.Load(); x != nil {
		return x, true
	}
	x := text.New(t.k1, t.b)
	stopped := false
	c.ascend(func(d *doc) bool {
		if stop.step() {
			stopped = true
			return false
		}
		if s, ok := d.val(i).(string); ok {
			x.Put(d.id, s)
		}
		return true
	})
	if stopped {
		return nil, false
	}
	t.x.Store(x)
	return x, true
}

// vectorIndex is an @hnsw field's graph. A vector the graph refuses cannot
// happen: the field's type checked its dimension. The graph is swapped
// (under the read lock) for the same graph served from the file a
// checkpoint just wrote: writers, under the write lock, use it as it is;
// readers pin it first.
type vectorIndex struct{ p atomic.Pointer[hnsw.Index] }

func newVectorIndex(x *hnsw.Index) *vectorIndex {
	g := &vectorIndex{}
	g.p.Store(x)
	return g
}

// graph is the graph, for writers (under the write lock: never swapped
// meanwhile) and for what reads no vector or list (MemoryBytes).
func (g *vectorIndex) graph() *hnsw.Index { return g.p.Load() }

// pin returns the graph pinned (hnsw.Index.Pin) for a reader, who unpins
// it; false only once it is released and not replaced (a closed tenant).
func (g *vectorIndex) pin() (*hnsw.Index, bool) {
	for {
		x := g.p.Load()
		if x.Pin() {
			return x, true
		}
		if g.p.Load() == x {
			return nil, false
		}
	}
}

// swap serves the graph from x, letting the old one's mapping go once its
// readers are done.
func (g *vectorIndex) swap(x *hnsw.Index) { g.p.Swap(x).Release() }

func (g *vectorIndex) put(id int64, v any) {
	if vec, ok := v.([]float32); ok {
		_ = g.graph().Add(id, vec)
	}
}
func (g *vectorIndex) remove(id int64) { g.graph().Remove(id) }

func hnswConfig(f *fieldSpec) hnsw.Config {
	cfg := hnsw.Config{Dim: f.Type.dim, M: f.HNSW.M, EfConstruction: f.HNSW.EfConstruction,
		EfSearch: f.HNSW.EfSearch, Seed: 1}
	switch f.HNSW.Metric {
	case "l2":
		cfg.Metric = hnsw.L2
	case "dot":
		cfg.Metric = hnsw.Dot
	default:
		cfg.Metric = hnsw.Cosine
	}
	return cfg
}

func newSearchIndex(f *fieldSpec) searchIndex {
	if f.Text {
		return newTextIndex(f.TextK1, f.TextB)
	}
	x, err := hnsw.New(hnswConfig(f))
	if err != nil {
		// checkAnnotations admitted the spec; a config the graph refuses
		// is a fenec bug, not a user error.
		panic("engine: hnsw config: " + err.Error())
	}
	return newVectorIndex(x)
}
