package engine

import (
	"github.com/fenec-go/fenec/engine/hnsw"
	"github.com/fenec-go/fenec/engine/text"
)

// searchIndex is a field's full-text or vector index, kept in step with
// the documents by the collection.
type searchIndex interface {
	put(id int64, v any)
	remove(id int64)
}

// textIndex is an @text field's BM25 index.
type textIndex struct{ x *text.Index }

func (t *textIndex) put(id int64, v any) {
	if s, ok := v.(string); ok {
		t.x.Put(id, s)
	}
}
func (t *textIndex) remove(id int64) { t.x.Remove(id) }

// vectorIndex is an @hnsw field's graph. A vector the graph refuses cannot
// happen: the field's type checked its dimension.
type vectorIndex struct{ x *hnsw.Index }

func (g *vectorIndex) put(id int64, v any) {
	if vec, ok := v.([]float32); ok {
		_ = g.x.Add(id, vec)
	}
}
func (g *vectorIndex) remove(id int64) { g.x.Remove(id) }

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
		return &textIndex{x: text.New(f.TextK1, f.TextB)}
	}
	x, err := hnsw.New(hnswConfig(f))
	if err != nil {
		// checkAnnotations admitted the spec; a config the graph refuses
		// is a fenec bug, not a user error.
		panic("engine: hnsw config: " + err.Error())
	}
	return &vectorIndex{x: x}
}
