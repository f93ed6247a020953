package engine

import (
	"fmt"
	"io"
	"log/slog"

	"github.com/fenec-go/fenec/engine/hnsw"
)

// readCollGraphs hands collection c's graphs, which come before its
// documents, to a feed (startGraphs) that reads each as its bytes come
// (hnsw.ReadLoader), and returns it, the bytes handed on; nil if c has no
// graph. The feed is returned with an error too, for the caller to stop.
func (ir *imageReader) readCollGraphs(c *collection, logger *slog.Logger) (*graphFeed, error) {
	n, err := ir.uvarint()
	if err != nil || n == 0 {
		return nil, err
	}
	if n > uint64(len(c.sch.Fields)) {
		return nil, fmt.Errorf("image of %s: %d graphs for %d fields", c.sch.Name, n, len(c.sch.Fields))
	}
	f := startGraphs(c, int(n), logger)
	seen := make([]bool, len(c.sch.Fields))
	for range n {
		fi, err := ir.uvarint()
		if err != nil {
			return f, err
		}
		size, err := ir.uvarint()
		if err != nil {
			return f, err
		}
		if size > maxImageItem {
			return f, fmt.Errorf("image item of %d bytes", size)
		}
		if fi >= uint64(len(c.sch.Fields)) || c.sch.Fields[fi].HNSW == nil || seen[fi] {
			return f, fmt.Errorf("image graph for %s field %d that has none", c.sch.Name, fi)
		}
		seen[fi] = true
		if err := f.graph(ir.br, int(fi), int64(size)); err != nil {
			return f, err
		}
	}
	f.graphsDone()
	return f, nil
}

// graphLoad is a collection's graph being loaded as its documents come.
type graphLoad struct {
	field int
	l     *hnsw.Loader
}

// graphFeed reads a collection's graphs, then puts each document's
// vectors in them, on a goroutine of its own while the image's reader
// goes on: it hands the graphs' bytes on as they come, pieces queued so it
// never waits, and then the documents as it decodes them, in batches.
// Reading the links of a graph of 100 000 nodes takes about as long as its
// bytes take to come, and checking and placing its vectors about as long
// as decoding the documents: an install does each beside the other rather
// than one after the other. The reader owns the goroutine: finish or stop
// ends it and waits for it.
type graphFeed struct {
	graphs     chan graphBytes // one a graph, closed once the documents come
	graphsShut bool            // graphs is closed
	batch      []*doc
	docs       chan []*doc
	closed     bool // docs is
	done       chan struct{}
	loads      []graphLoad // the goroutine's until done is closed
}

// graphBytes is one graph of an image, handed on as its bytes come.
type graphBytes struct {
	field int
	size  int64
	p     *piecePipe
}

// graphBatch is how many documents go to the feed at once.
const graphBatch = 256

// graphDocsAhead is how many batches of documents the reader may hand on
// before the feed takes them: enough for the documents that come while
// the last of a graph is read.
const graphDocsAhead = 512

// startGraphs starts the feed of collection c's n graphs.
func startGraphs(c *collection, n int, logger *slog.Logger) *graphFeed {
	f := &graphFeed{graphs: make(chan graphBytes, n), docs: make(chan []*doc, graphDocsAhead), done: make(chan struct{})}
	go func() {
		defer close(f.done)
		for g := range f.graphs {
			l, err := hnsw.ReadLoader(g.p, g.size)
			io.Copy(io.Discard, g.p) // what a graph refused left: the pipe never fails
			if err != nil && g.p.n == g.size {
				// Whole, yet refused (an image cut short is the reader's
				// error to report).
				logger.Warn("graph did not load; rebuilding it", "collection", c.sch.Name,
					"field", c.sch.Fields[g.field].Name, "err", err)
			}
			if err == nil {
				f.loads = append(f.loads, graphLoad{field: g.field, l: l})
			}
		}
		for batch := range f.docs {
			for _, d := range batch {
				for _, g := range f.loads {
					if dst := g.l.Put(d.id); dst != nil && !d.vectorInto(g.field, dst) {
						g.l.Fail()
					}
				}
			}
		}
	}()
	return f
}

// add hands d on to have its vectors put in the graphs.
func (f *graphFeed) add(d *doc) {
	if f.batch == nil {
		f.batch = make([]*doc, 0, graphBatch)
	}
	f.batch = append(f.batch, d)
	if len(f.batch) == graphBatch {
		f.docs <- f.batch
		f.batch = nil
	}
}

// graph hands on field's graph, the next size bytes of r, piece by piece.
func (f *graphFeed) graph(r io.Reader, field int, size int64) error {
	p := newPiecePipe(size)
	f.graphs <- graphBytes{field: field, size: size, p: p} // room for every graph
	defer p.close()
	for left := size; left > 0; {
		b := p.get(int(min(left, int64(p.piece))))
		k, err := io.ReadFull(r, b)
		if k > 0 {
			p.put(b[:k])
		}
		left -= int64(k)
		if err != nil {
			return fmt.Errorf("%w: a graph of %d bytes ends after %d (%v)", errShort, size, size-left, err)
		}
	}
	return nil
}

// graphsDone says every graph was handed on: the documents come next.
func (f *graphFeed) graphsDone() {
	if !f.graphsShut {
		close(f.graphs)
		f.graphsShut = true
	}
}

// finish hands on the last documents, waits for the goroutine, and
// returns the graphs that loaded, every document's vectors put.
func (f *graphFeed) finish() []graphLoad {
	if len(f.batch) > 0 {
		f.docs <- f.batch
		f.batch = nil
	}
	f.stop()
	return f.loads
}

// stop ends the goroutine and waits for it; once is enough, more is
// harmless.
func (f *graphFeed) stop() {
	f.graphsDone()
	if !f.closed {
		close(f.docs)
		f.closed = true
	}
	<-f.done
}

// readGraphs reads the graphs of an FNI1 image, after all the documents.
func (ir *imageReader) readGraphs(st *state, logger *slog.Logger) error {
	n, err := ir.uvarint()
	if err != nil {
		return err
	}
	for range n {
		name, err := ir.item()
		if err != nil {
			return err
		}
		c := st.colls[string(name)]
		fi, err := ir.uvarint()
		if err != nil {
			return err
		}
		data, err := ir.item()
		if err != nil {
			return err
		}
		if c == nil || fi >= uint64(len(c.sch.Fields)) || c.sch.Fields[fi].HNSW == nil {
			return fmt.Errorf("image graph for %s field %d that has none", string(name), fi)
		}
		i := int(fi)
		g, err := hnsw.LoadBytes(data, func(put func(id int64) []float32) bool {
			ok := true
			c.ascend(func(d *doc) bool {
				if dst := put(d.id); dst != nil {
					ok = d.vectorInto(i, dst)
				}
				return ok
			})
			return ok
		})
		if err != nil {
			logger.Warn("graph did not load; rebuilding it", "collection", c.sch.Name,
				"field", c.sch.Fields[i].Name, "err", err)
			continue
		}
		c.search[i] = newVectorIndex(g)
	}
	return nil
}
