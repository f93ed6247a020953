package engine

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"

	"github.com/fenec-go/fenec/engine/hnsw"
	"github.com/fenec-go/fenec/engine/internal/hugemem"
	"github.com/fenec-go/fenec/engine/store"
)

// The state payload of an image, streamed:
//
//	"FNI3"
//	counters: uvarint n, n × (string name, varint last id)
//	collections: uvarint n, n × (uvarint len, schema;
//	    graphs: uvarint g, g × (uvarint field, uvarint len, head,
//	        uvarint len, uvarint pad, pad × 0, section);
//	    uvarint docs, docs × (uvarint len, varint id, uvarint values, values))
//
// Documents are written one at a time, so neither writing nor reading an
// image holds it whole in memory. Text indexes are rebuilt on load. Each
// HNSW graph travels as its head (levels, upper links, ids: hnsw's
// WriteHead, read into memory) and its section (every node's level-0
// list and vector, hnsw's WriteSection). A checkpoint writes each section
// in an image frame of its own starting at a multiple of
// store.SectionAlign in the file (pad says how far), so that an open
// serves the graph's lists and vectors from the mapped file where they lie
// rather than decoding them; a section not in a mapped file, or not
// aligned, is read into memory. Images streamed out (WriteImage: moves,
// backups, restores) are written as FNI2 (below), which carries each
// vector once. Graphs are rebuilt from the documents only if they fail to
// load.
//
// Images of "FNI2" carried each graph whole but for its live vectors
// (hnsw's WriteTo) ahead of its collection's documents, each document's
// vector put in its graph as it is read; "FNI1" carried the graphs after
// all the documents, as
//
//	graphs: uvarint n, n × (string coll, uvarint field, uvarint len, graph)
//
// Both are read still, into memory (FNI2 by a feed beside the reader:
// graphFeed), and the next checkpoint writes FNI3.
// An image of a later format is refused with ErrNewerImage.
const (
	imageMagic   = "FNI3"
	imageMagicV2 = "FNI2"
	imageMagicV1 = "FNI1"
)

// maxImageItem bounds one length-prefixed item of an image.
const maxImageItem = 1 << 30

// itemTrust is the longest item length the image reader allocates for
// before reading its bytes.
const itemTrust = 1 << 20

// snapshot is a still copy of the state an image writes: schemas copied,
// documents by pointer (a stored doc never changes), graphs pinned and
// serialised as the image is written (snapshotLocked).
type snapshot struct {
	counters map[string]int64
	colls    []collSnap
	// direct: the caller holds the read lock until the image is written,
	// and the writer serialises the graphs itself (a checkpoint, whose
	// sections land aligned in the file, to be mapped after).
	direct bool
	done   chan struct{} // closed once every graph is serialised
}

type collSnap struct {
	sch    *schema
	docs   []*doc
	graphs []*graphSnap
}

// graphSnap is a graph being serialised for an image, pinned until it is.
// Written by a goroutine of its own (FNI2), its bytes come through p,
// size of them (its SavedLen as the snapshot was taken); err is the
// serialisation's failure, set before p is closed. Written directly
// (FNI3), head keeps the head written, of headLen bytes, and at the offset
// in the file its section of secLen bytes went to (0: not in a file).
type graphSnap struct {
	field   int
	vi      *vectorIndex
	x       *hnsw.Index
	size    int64
	p       *piecePipe
	err     error
	headLen int64
	secLen  int64
	head    []byte
	at      int64
}

// snapshotLocked copies what an image needs; called with mu held (read).
// With release nil the caller keeps the lock until the image is written
// and wait returns, and the image's writer serialises the graphs (direct).
// Else they are serialised on a goroutine of their own, still under that
// lock, while the image is written: the first bytes of an image go out as
// its graphs are read, not once the tens of megabytes of a large one are
// serialised, and the lock is held no longer than before. The goroutine
// calls release once it is done with the graphs (the read lock handed over
// to it). It never waits on the image's writer: a writer that stops early
// leaves it to finish on its own.
func (db *DB) snapshotLocked(release func()) *snapshot {
	s := &snapshot{counters: make(map[string]int64, len(db.st.counters)), done: make(chan struct{}), direct: release == nil}
	for k, v := range db.st.counters {
		s.counters[k] = v
	}
	names := make([]string, 0, len(db.st.colls))
	for n := range db.st.colls {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		c := db.st.colls[n]
		cs := collSnap{sch: &schema{Name: c.sch.Name, Fields: slices.Clone(c.sch.Fields)}}
		cs.docs = make([]*doc, 0, c.len())
		c.order.Ascend(func(d *doc) bool {
			cs.docs = append(cs.docs, d)
			return true
		})
		for i, x := range c.search {
			if vi, ok := x.(*vectorIndex); ok {
				g, ok := vi.pin()
				if !ok {
					continue // released: the tenant is closing
				}
				gs := &graphSnap{field: i, vi: vi, x: g}
				if s.direct {
					gs.headLen, gs.secLen = g.HeadLen(), g.SectionLen()
				} else {
					gs.size = g.SavedLen()
					gs.p = newPiecePipe(gs.size)
				}
				cs.graphs = append(cs.graphs, gs)
			}
		}
		s.colls = append(s.colls, cs)
	}
	if s.direct {
		close(s.done)
		return s
	}
	go func() {
		defer close(s.done)
		defer release()
		for _, cs := range s.colls {
			for _, g := range cs.graphs {
				if err := g.serialise(); err != nil {
					g.err = fmt.Errorf("write graph %s.%s: %w", cs.sch.Name, cs.sch.Fields[g.field].Name, err)
				}
				g.p.close()
				g.x.Unpin()
			}
		}
	}()
	return s
}

// serialise writes the graph to its pipe, as FNI2 carries it.
func (g *graphSnap) serialise() error {
	_, err := g.x.WriteTo(g.p)
	return err
}

// wait returns once the snapshot's graphs are serialised; a direct
// snapshot's graphs are unpinned.
func (s *snapshot) wait() {
	<-s.done
	if s.direct {
		for _, cs := range s.colls {
			for _, g := range cs.graphs {
				g.x.Unpin()
			}
		}
	}
}

// copyTo writes the next n of the graph's bytes to w as they are
// serialised.
func (g *graphSnap) copyTo(w io.Writer, n int64) error {
	k, err := io.CopyN(w, g.p, n)
	switch {
	case g.err != nil && (err != nil || k < n): // set before the pipe closed
		return g.err
	case err != nil:
		return err
	}
	return nil
}

// writeGraph writes graph g of an image: its field and, for FNI2, its
// bytes, for FNI3 its head and section. bw writes to w; a direct snapshot
// written to a store.SectionWriter puts the section in a frame of its own
// and notes where.
func (s *snapshot) writeGraph(bw *bufio.Writer, w io.Writer, g *graphSnap) error {
	b := appendUvarint(nil, uint64(g.field))
	if !s.direct {
		b = appendUvarint(b, uint64(g.size))
		if _, err := bw.Write(b); err != nil {
			return err
		}
		if err := g.copyTo(bw, g.size); err != nil {
			return err
		}
		return g.err
	}
	b = appendUvarint(b, uint64(g.headLen))
	if _, err := bw.Write(b); err != nil {
		return err
	}
	var head bytes.Buffer
	if _, err := g.x.WriteHead(&head); err != nil {
		return err
	}
	if int64(head.Len()) != g.headLen {
		return fmt.Errorf("graph head of %d bytes written as %d", g.headLen, head.Len())
	}
	g.head = head.Bytes()
	if _, err := bw.Write(g.head); err != nil {
		return err
	}
	if _, err := bw.Write(appendUvarint(nil, uint64(g.secLen))); err != nil {
		return err
	}
	section := func(w io.Writer) error {
		_, err := g.x.WriteSection(w)
		return err
	}
	sw, ok := w.(store.SectionWriter)
	if !ok {
		if err := bw.WriteByte(0); err != nil {
			return err
		}
		return section(bw)
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	at, err := sw.WriteSection(g.secLen, section)
	g.at = at
	return err
}

// write streams the snapshot as an image's state payload.
//
// A direct snapshot (a checkpoint's) writes FNI3, whose sections the file
// serves mapped. Any other (an image streamed out: a move, a backup, a
// restore) writes FNI2: its graphs without their live vectors, which the
// receiver takes from the documents, so a moved image carries each vector
// once; its file is written as FNI3 by its first checkpoint.
func (s *snapshot) write(w io.Writer) error {
	bw := bufio.NewWriterSize(w, 256<<10)
	b := []byte(imageMagicV2)
	if s.direct {
		b = []byte(imageMagic)
	}
	names := make([]string, 0, len(s.counters))
	for n := range s.counters {
		names = append(names, n)
	}
	slices.Sort(names)
	b = appendUvarint(b, uint64(len(names)))
	for _, n := range names {
		b = appendString(b, n)
		b = appendVarint(b, s.counters[n])
	}
	b = appendUvarint(b, uint64(len(s.colls)))
	if _, err := bw.Write(b); err != nil {
		return err
	}
	var item []byte
	for _, cs := range s.colls {
		item = appendSchema(item[:0], cs.sch)
		b = appendUvarint(b[:0], uint64(len(item)))
		b = append(b, item...)
		b = appendUvarint(b, uint64(len(cs.graphs)))
		if _, err := bw.Write(b); err != nil {
			return err
		}
		b = b[:0]
		for _, g := range cs.graphs {
			if err := s.writeGraph(bw, w, g); err != nil {
				return err
			}
		}
		b = appendUvarint(b, uint64(len(cs.docs)))
		if _, err := bw.Write(b); err != nil {
			return err
		}
		for _, d := range cs.docs {
			item = appendVarint(item[:0], d.id)
			item = appendUvarint(item, uint64(len(cs.sch.Fields)))
			item = append(item, d.raw...)
			b = appendUvarint(b[:0], uint64(len(item)))
			if _, err := bw.Write(b); err != nil {
				return err
			}
			if _, err := bw.Write(item); err != nil {
				return err
			}
		}
	}
	return bw.Flush()
}

// imageReader reads an image's state payload.
type imageReader struct {
	br  *bufio.Reader
	src io.Reader // what br reads: a store.MappedState when the file is mapped
	buf []byte
}

func (ir *imageReader) uvarint() (uint64, error) {
	x, err := binary.ReadUvarint(ir.br)
	if err != nil {
		return 0, fmt.Errorf("%w: %v", errShort, err)
	}
	return x, nil
}

// item reads a uvarint length and that many bytes (valid until the next call).
func (ir *imageReader) item() ([]byte, error) {
	n, err := ir.uvarint()
	if err != nil {
		return nil, err
	}
	if n > maxImageItem {
		return nil, fmt.Errorf("image item of %d bytes", n)
	}
	if n > itemTrust && uint64(cap(ir.buf)) < n {
		return ir.longItem(int(n))
	}
	if uint64(cap(ir.buf)) < n {
		ir.buf = make([]byte, n)
	}
	ir.buf = ir.buf[:n]
	if _, err := io.ReadFull(ir.br, ir.buf); err != nil {
		return nil, fmt.Errorf("%w: %v", errShort, err)
	}
	return ir.buf, nil
}

// itemGrowth bounds how far ahead of the bytes read the buffer of a long
// item grows.
const itemGrowth = 8

// longItem reads an item of n bytes, past itemTrust, into ir.buf. Its
// length is believed only as its bytes arrive: a damaged or cut-short
// image cannot make the reader allocate more than itemGrowth times what
// it holds. The buffer grows by that factor, not by doubling, and is made
// rather than appended to: memory fresh from the system is not cleared on
// allocation, so a graph's tens of megabytes are touched about once, as
// they are read (in huge pages where the system gives them), rather than
// cleared and copied at every doubling.
func (ir *imageReader) longItem(n int) ([]byte, error) {
	b := ir.buf[:0]
	for len(b) < n {
		if len(b) == cap(b) {
			nb := hugemem.Make[byte](len(b), min(n, max(itemTrust, itemGrowth*len(b))))
			copy(nb, b)
			b = nb
		}
		k, err := io.ReadFull(ir.br, b[len(b):min(n, cap(b))])
		b = b[:len(b)+k]
		if err != nil {
			return nil, fmt.Errorf("%w: an item of %d bytes ends after %d (%v)", errShort, n, len(b), err)
		}
	}
	ir.buf = b
	return b, nil
}

// readImage rebuilds a state from an image's payload. A state refused
// lets go of the mappings its graphs held.
func readImage(r io.Reader, logger *slog.Logger) (st *state, err error) {
	defer func() {
		if err != nil && st != nil {
			releaseGraphs(st)
			st = nil
		}
	}()
	return readImageState(r, logger)
}

// readImageState is readImage, returning with an error what it read so
// far, for readImage to let go of.
func readImageState(r io.Reader, logger *slog.Logger) (*state, error) {
	ir := &imageReader{br: bufio.NewReaderSize(r, 256<<10), src: r}
	magic := make([]byte, len(imageMagic))
	if _, err := io.ReadFull(ir.br, magic); err != nil {
		return nil, errors.New("image state: bad magic")
	}
	form, err := imageForm(string(magic))
	if err != nil {
		return nil, err
	}
	v1 := form == imageMagicV1
	st := newState()
	n, err := ir.uvarint()
	if err != nil {
		return st, err
	}
	for range n {
		name, err := ir.item()
		if err != nil {
			return st, err
		}
		key := string(name)
		id, err := binary.ReadVarint(ir.br)
		if err != nil {
			return st, fmt.Errorf("%w: counter", errShort)
		}
		st.counters[key] = id
	}
	if n, err = ir.uvarint(); err != nil {
		return st, err
	}
	for range n {
		if err := ir.readColl(st, form, logger); err != nil {
			return st, err
		}
	}
	if v1 {
		if err := ir.readGraphs(st, logger); err != nil {
			return st, err
		}
	}
	// Any graph missing or refused is built from the documents.
	for _, c := range st.colls {
		for i := range c.sch.Fields {
			if c.sch.Fields[i].HNSW != nil && c.search[i] == nil {
				c.search[i] = newSearchIndex(&c.sch.Fields[i])
				fillSearch(c, i)
			}
		}
	}
	return st, nil
}

// imageForm says which image format magic names: this one, an earlier
// one still read, or a later one (ErrNewerImage), or none.
func imageForm(magic string) (string, error) {
	switch {
	case magic == imageMagic || magic == imageMagicV2 || magic == imageMagicV1:
		return magic, nil
	case len(magic) == 4 && magic[:3] == "FNI" && magic[3] > imageMagic[3]:
		return "", fmt.Errorf("%w: image format %s, this fenec reads up to %s", ErrNewerImage, magic, imageMagic)
	}
	return "", errors.New("image state: bad magic")
}

// readColl reads a collection; of FNI2, its graphs first, the documents'
// vectors put in them as the documents come; of FNI3, its graphs first,
// whole.
func (ir *imageReader) readColl(st *state, form string, logger *slog.Logger) error {
	graphs := form != imageMagicV1
	raw, err := ir.item()
	if err != nil {
		return err
	}
	sch, err := (&decoder{b: raw}).schema()
	if err != nil {
		return fmt.Errorf("image schema: %w", err)
	}
	c := newCollection(sch)
	// Graphs are loaded, not built link by link as documents are set:
	// keep them aside (a field left without one is built at the end).
	for i, x := range c.search {
		if _, ok := x.(*vectorIndex); ok {
			c.search[i] = nil
		}
	}
	st.colls[sch.Name] = c
	var feed *graphFeed
	var mapped []loadedGraph // graphs that came whole (FNI3), set once the documents are in
	if form == imageMagic {
		var err error
		if mapped, err = ir.readCollSections(c, logger); err != nil {
			return err
		}
		defer func() {
			for _, g := range mapped { // not set: the documents failed
				g.x.Release()
			}
		}()
	} else if graphs {
		f, err := ir.readCollGraphs(c, logger)
		if f != nil {
			feed = f
			defer feed.stop()
		}
		if err != nil {
			return err
		}
	}
	docs, err := ir.uvarint()
	if err != nil {
		return err
	}
	// Ids come ascending, none past the collection's counter: a doc past
	// it would be overwritten by the next id handed out.
	prev, last := int64(0), st.counters[sch.Name]
	for range docs {
		raw, err := ir.item()
		if err != nil {
			return err
		}
		d := &decoder{b: raw}
		id := d.varint()
		nv := d.count(1)
		if d.err != nil {
			return fmt.Errorf("image doc of %s: %w", sch.Name, d.err)
		}
		if nv != len(sch.Fields) {
			return fmt.Errorf("image doc %d of %s: %d values for %d fields", id, sch.Name, nv, len(sch.Fields))
		}
		if id <= prev || id > last {
			return fmt.Errorf("image doc %d of %s: not after %d and within the last id given, %d", id, sch.Name, prev, last)
		}
		prev = id
		vals, rest, ok := rawSpan(d.b, nv)
		if !ok || len(rest) != 0 {
			return fmt.Errorf("image doc %d of %s: %w", id, sch.Name, errShort)
		}
		if err := conforms(sch, vals); err != nil {
			return fmt.Errorf("image doc %d of %s: %w", id, sch.Name, err)
		}
		kept := &doc{id: id, raw: slices.Clone(vals)}
		c.set(kept, nil)
		if !serverColl(sch.Name) {
			st.rows++
		}
		if feed != nil {
			feed.add(kept)
		}
	}
	for _, g := range mapped {
		if err := graphMatches(c, g.field, g.x); err != nil {
			logger.Warn("graph did not load; rebuilding it", "collection", sch.Name,
				"field", sch.Fields[g.field].Name, "err", err)
			g.x.Release()
			continue
		}
		c.search[g.field] = newVectorIndex(g.x)
	}
	mapped = nil // each set or released
	if feed == nil {
		return nil
	}
	for _, g := range feed.finish() {
		x, err := g.l.Finish()
		if err != nil {
			logger.Warn("graph did not load; rebuilding it", "collection", sch.Name,
				"field", sch.Fields[g.field].Name, "err", err)
			continue
		}
		c.search[g.field] = newVectorIndex(x)
	}
	return nil
}

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

// loadedGraph is a graph of an FNI3 image, loaded whole, for field.
type loadedGraph struct {
	field int
	x     *hnsw.Index
}

// readCollSections reads collection c's graphs of an FNI3 image, which
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

// graphMatches checks that x, the graph of field i loaded whole, holds a
// node for exactly the documents of c with a vector there.
func graphMatches(c *collection, i int, x *hnsw.Index) error {
	n := 0
	var bad int64
	c.order.Ascend(func(d *doc) bool {
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

// graphPiece is the most a piece of a graph handed on holds.
const graphPiece = 256 << 10

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

// piecePipe carries bytes from one goroutine to another in pieces of at
// most graphPiece, queued so the writer never waits: its queue holds all
// the pieces the bytes it was made for take. Each piece read goes back to
// be filled again, so a reader keeping up holds a few pieces, not all.
type piecePipe struct {
	full  chan []byte // closed by the writer after its last piece
	free  chan []byte
	piece int    // the room of a piece: graphPiece, or all the bytes if fewer
	room  int64  // bytes the writer may queue still
	fill  []byte // the piece Write is filling
	cur   []byte // what is left of the piece being read
	held  []byte // that piece, whole
	n     int64  // bytes read
}

// newPiecePipe makes a pipe for size bytes.
func newPiecePipe(size int64) *piecePipe {
	k := size/graphPiece + 1
	return &piecePipe{full: make(chan []byte, k), free: make(chan []byte, k), piece: int(min(size, graphPiece)), room: size}
}

// errPipeFull refuses bytes past those a piecePipe was made for: queued,
// they could fill its queue and hold the writer.
var errPipeFull = errors.New("more bytes than the pipe was made for")

// Write queues b's bytes, a piece queued as it fills (close queues the
// last); past the bytes the pipe was made for, it queues none.
func (p *piecePipe) Write(b []byte) (int, error) {
	if int64(len(b)) > p.room {
		return 0, errPipeFull
	}
	p.room -= int64(len(b))
	n := len(b)
	for len(b) > 0 {
		if p.fill == nil {
			p.fill = p.get(p.piece)[:0]
		}
		k := copy(p.fill[len(p.fill):p.piece], b)
		p.fill, b = p.fill[:len(p.fill)+k], b[k:]
		if len(p.fill) == p.piece {
			p.put(p.fill)
			p.fill = nil
		}
	}
	return n, nil
}

// get returns a piece of n bytes (at most p.piece) to fill, one read
// already if there is.
func (p *piecePipe) get(n int) []byte {
	select {
	case b := <-p.free:
		return b[:n]
	default:
		return make([]byte, n, p.piece)
	}
}

// put queues b.
func (p *piecePipe) put(b []byte) { p.full <- b }

// close queues what Write was filling and says it was the last.
func (p *piecePipe) close() {
	if len(p.fill) > 0 {
		p.put(p.fill)
		p.fill = nil
	}
	close(p.full)
}

// Read reads what was queued, in order; io.EOF once the writer closed the
// pipe and all was read.
func (p *piecePipe) Read(b []byte) (int, error) {
	for len(p.cur) == 0 {
		if p.held != nil {
			p.free <- p.held // never more pieces than the queue holds
			p.held = nil
		}
		piece, ok := <-p.full
		if !ok {
			return 0, io.EOF
		}
		p.cur, p.held = piece, piece
	}
	k := copy(b, p.cur)
	p.cur = p.cur[k:]
	p.n += int64(k)
	return k, nil
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
			c.order.Ascend(func(d *doc) bool {
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

// Checkpoint writes the whole state, index graphs included, to a side file
// with the recent records kept for change cursors, and renames it into
// place.
func (db *DB) Checkpoint() error { return db.rewrite(false) }

// Compact is Checkpoint keeping no records from before the image.
func (db *DB) Compact() error { return db.rewrite(true) }

func (db *DB) rewrite(compact bool) error {
	// The read lock keeps the state still (no block lands) while reads go on.
	db.mu.RLock()
	defer db.mu.RUnlock()
	if db.closed {
		return ErrClosed
	}
	snap := db.snapshotLocked(nil)
	defer snap.wait()
	var err error
	if compact {
		err = db.log.Compact(snap.write)
	} else {
		err = db.log.Checkpoint(snap.write)
	}
	if err != nil {
		return fmt.Errorf("checkpoint: %w", storeErr(err))
	}
	db.mapGraphs(snap)
	return nil
}

// WriteImage streams a compact image of the whole tenant to w (what a move
// or a backup copies; Install takes it). Writes go on meanwhile.
func (db *DB) WriteImage(w io.Writer) (int64, error) {
	db.mu.RLock()
	if db.closed {
		db.mu.RUnlock()
		return 0, ErrClosed
	}
	pos := db.log.Position()
	snap := db.snapshotLocked(db.mu.RUnlock) // the read lock is the snapshot's now
	n, err := store.WriteImage(w, pos, snap.write)
	if err != nil {
		return n, fmt.Errorf("write image: %w", storeErr(err))
	}
	return n, nil
}

// Install reads a whole image from r, verifies it by replaying it into a
// side file next to path, and renames it into place. path must not exist.
// A cut-short or damaged image is refused and leaves nothing behind.
func Install(path string, r io.Reader) error {
	_, err := store.Install(path, r, func(tmp string) error {
		db, err := Open(tmp, Options{NoSweep: true, Sync: SyncOff, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			return fmt.Errorf("%w: %v", ErrBadImage, err)
		}
		return db.Close()
	})
	if err != nil {
		return fmt.Errorf("install image: %w", storeErr(err))
	}
	return nil
}

// InstallOpen installs an image read from r as a new file at path, as
// Install does, and returns it open with opts: the image is read once —
// every frame's checksum checked, the documents and graphs loaded — rather
// than opened to verify it, closed, and opened again. A damaged image is
// ErrBadImage and leaves no file.
func InstallOpen(path string, r io.Reader, opts Options) (*DB, error) {
	db := newDB(opts)
	l, _, err := store.InstallOpen(path, r, opts.storeOptions(), db.replayer())
	if err != nil {
		return nil, fmt.Errorf("install image: %w", storeErr(err))
	}
	db.log = l
	db.start()
	return db, nil
}
