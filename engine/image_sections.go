package engine

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"slices"

	"github.com/fenec-go/fenec/engine/hnsw"
	"github.com/fenec-go/fenec/engine/store"
)

// loadedGraph is a graph of an FNI4 or FNI3 image, loaded whole, for field.
type loadedGraph struct {
	field int
	x     *hnsw.Index
}

// readCollSections reads collection c's graphs of an FNI4 or FNI3 image, which
// come whole before its documents, each section used where the mapped
// file holds it, and returns them, for the caller to set once the
// documents are in (set before, each document's vector would be added
// again) or to release. A graph refused is logged and left to be rebuilt;
// an image cut short is an error, the graphs read so far released.
func (ir *imageReader) readCollSections(c *collection, logger *slog.Logger) (got []loadedGraph, err error) {
	defer func() {
		if err != nil {
			for _, g := range got {
				g.x.Release()
			}
			got = nil
		}
	}()
	n, err := ir.uvarint()
	if err != nil || n == 0 {
		return nil, err
	}
	if n > uint64(len(c.sch.Fields)) {
		return nil, fmt.Errorf("image of %s: %d graphs for %d fields", c.sch.Name, n, len(c.sch.Fields))
	}
	seen := make([]bool, len(c.sch.Fields))
	for range n {
		fi, err := ir.uvarint()
		if err != nil {
			return got, err
		}
		if fi >= uint64(len(c.sch.Fields)) || c.sch.Fields[fi].HNSW == nil || seen[fi] {
			return got, fmt.Errorf("image graph for %s field %d that has none", c.sch.Name, fi)
		}
		seen[fi] = true
		head, err := ir.item()
		if err != nil {
			return got, err
		}
		head = slices.Clone(head) // ir.buf is read into again
		section, hold, err := ir.section()
		if err != nil {
			return got, err
		}
		x, err := hnsw.LoadMapped(head, section, hold)
		if err != nil {
			logger.Warn("graph did not load; rebuilding it", "collection", c.sch.Name,
				"field", c.sch.Fields[fi].Name, "err", err)
			continue
		}
		got = append(got, loadedGraph{field: int(fi), x: x})
	}
	return got, nil
}

// section reads a graph's section: its length, its pad, and its bytes,
// a view of the mapped file (with a reference on it) where the state is
// read from one and the section lies in one frame, else read into memory
// (hold nil).
func (ir *imageReader) section() ([]byte, hnsw.Holder, error) {
	n, err := ir.uvarint()
	if err != nil {
		return nil, nil, err
	}
	if n > maxSection {
		return nil, nil, fmt.Errorf("image graph section of %d bytes", n)
	}
	pad, err := ir.uvarint()
	if err != nil {
		return nil, nil, err
	}
	if pad >= store.SectionAlign {
		return nil, nil, fmt.Errorf("image graph section padded by %d bytes", pad)
	}
	if _, err := ir.br.Discard(int(pad)); err != nil {
		return nil, nil, fmt.Errorf("%w: %v", errShort, err)
	}
	if ms, ok := ir.src.(store.MappedState); ok {
		back := ir.br.Buffered()
		if b, reg, ok := ms.Span(back, int(n)); ok {
			// Past the section: in the buffer, or the buffer emptied and
			// the state moved past what it did not hold.
			_, _ = ir.br.Discard(min(int(n), back))
			return b, reg, nil
		}
	}
	if n <= itemTrust {
		b := make([]byte, n)
		if _, err := io.ReadFull(ir.br, b); err != nil {
			return nil, nil, fmt.Errorf("%w: %v", errShort, err)
		}
		return b, nil, nil
	}
	saved := ir.buf
	ir.buf = nil
	b, err := ir.longItem(int(n))
	ir.buf = saved // the section is the graph's: not read into again
	if err != nil {
		return nil, nil, err
	}
	return b, nil, nil
}

// maxSection bounds a graph's section: its level-0 lists and vectors.
const maxSection = 1 << 40

// attachGraph gives x, the graph of field i of an FNI6, FNI5, FNI4 or
// FNI3 image, its live nodes' vectors where c's documents keep them. A
// graph of FNI6 places each in the documents section (hnsw's
// AttachPlaces): nothing of a document is read, the image's checksums
// standing for their agreement. Any other is checked against c's
// documents (graphMatches) and given their vectors by id, each document
// read (an FNI4 graph's live nodes have none of their own).
func attachGraph(c *collection, i int, x *hnsw.Index) error {
	if t := c.base; t != nil && c.order.Len() == 0 {
		err := x.AttachPlaces(t.vals)
		if !errors.Is(err, hnsw.ErrNoPlaces) {
			return err
		}
	}
	if err := graphMatches(c, i, x); err != nil {
		return err
	}
	return x.AttachVectors(docVectors(c.ascend, i, x.Config().Dim))
}

// docVectors yields each document ascend visits that holds a vector of
// dim numbers as its field i, with that vector where the document keeps
// it (vectorView), for a graph to read in place (hnsw.Index.AttachVectors).
func docVectors(ascend func(func(*doc) bool), i, dim int) iter.Seq2[int64, []float32] {
	return func(yield func(int64, []float32) bool) {
		ascend(func(d *doc) bool {
			v, ok := d.vectorView(i, dim)
			return !ok || yield(d.id, v)
		})
	}
}

// ascendDocs visits docs in order, as a collection's Ascend does.
func ascendDocs(docs []*doc) func(func(*doc) bool) {
	return func(f func(*doc) bool) {
		for _, d := range docs {
			if !f(d) {
				return
			}
		}
	}
}

// vectorOf looks up, in docs (ascending by id), the vector of dim numbers
// a document holds as its field i, as hnsw.Index.WriteSection asks for it.
func vectorOf(docs []*doc, i, dim int) func(int64) ([]float32, bool) {
	return func(id int64) ([]float32, bool) {
		k, ok := findDoc(docs, id)
		if !ok {
			return nil, false
		}
		return docs[k].vectorView(i, dim)
	}
}

// placeOf looks up, in docs (ascending by id) as a documents section lays
// them out (starts: where each one's values start among the section's),
// where the vector of dim numbers a document holds as its field i starts,
// as hnsw.Index.WriteSectionAt asks for it.
func placeOf(docs []*doc, starts []uint64, i, dim int) func(int64) (uint64, bool) {
	return func(id int64) (uint64, bool) {
		k, ok := findDoc(docs, id)
		if !ok {
			return 0, false
		}
		at, ok := docs[k].vectorAt(i, dim)
		return starts[k] + uint64(at), ok
	}
}

// docStarts is where each of docs' values start in the documents section
// of docs, counted from the start of the values (docTable.vals).
func docStarts(docs []*doc) []uint64 {
	starts := make([]uint64, len(docs))
	at := uint64(0)
	for k, d := range docs {
		starts[k] = at
		at += uint64(len(d.raw))
	}
	return starts
}

func findDoc(docs []*doc, id int64) (int, bool) {
	return slices.BinarySearchFunc(docs, id, func(d *doc, id int64) int { return cmp.Compare(d.id, id) })
}

// graphMatches checks that x, the graph of field i loaded whole, holds a
// node for exactly the documents of c with a vector there.
func graphMatches(c *collection, i int, x *hnsw.Index) error {
	n := 0
	var bad int64
	c.ascend(func(d *doc) bool {
		if !d.hasVector(i) {
			return true
		}
		n++
		if !x.Has(d.id) {
			bad = d.id
			return false
		}
		return true
	})
	switch {
	case bad != 0:
		return fmt.Errorf("document %d has no node", bad)
	case n != x.Len():
		return fmt.Errorf("%d nodes for %d documents with a vector", x.Len(), n)
	}
	return nil
}
