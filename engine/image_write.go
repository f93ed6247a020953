package engine

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"runtime/debug"
	"slices"

	"github.com/fenec-go/fenec/engine/hnsw"
	"github.com/fenec-go/fenec/engine/store"
)

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
	// docsAt is where in the file a direct snapshot's documents section
	// went (0: not in a file), docsLen its bytes.
	docsAt, docsLen int64
}

// graphSnap is a graph being serialised for an image, pinned until it is.
// Written by a goroutine of its own (FNI2), its bytes come through p,
// size of them (its SavedLen as the snapshot was taken); err is the
// serialisation's failure, set before p is closed. Written directly
// (FNI4), head keeps the head written, of headLen bytes, and at the offset
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
//
// A fault reading the mapped table (fault.go) is ErrFault: the graphs
// pinned so far are unpinned, release is not called and no goroutine
// started.
func (db *DB) snapshotLocked(release func()) (*snapshot, error) {
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
		var err error
		if cs.docs, err = c.all(); err != nil {
			for _, cs := range s.colls {
				for _, g := range cs.graphs {
					g.x.Unpin()
				}
			}
			return nil, err
		}
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
		return s, nil
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
	return s, nil
}

// all is c's documents in id order, a fault reading the mapped table
// ErrFault.
func (c *collection) all() (docs []*doc, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer catchFault(&err)
	docs = make([]*doc, 0, c.len())
	c.ascend(func(d *doc) bool {
		docs = append(docs, d)
		return true
	})
	return docs, nil
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
// bytes, for FNI4 its head and section. bw writes to w; a direct snapshot
// written to a store.SectionWriter puts the section in a frame of its own
// and notes where.
func (s *snapshot) writeGraph(bw *bufio.Writer, w io.Writer, g *graphSnap, docs []*doc, starts []uint64) error {
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
		dim := g.x.Config().Dim
		_, err := g.x.WriteSectionAt(w, vectorOf(docs, g.field, dim), placeOf(docs, starts, g.field, dim))
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

// writeDocs writes a collection's documents as an FNI5 image carries
// them: one section (doctable.go), in a frame of its own where w is a
// store.SectionWriter, and noted where.
func (s *snapshot) writeDocs(bw *bufio.Writer, w io.Writer, cs *collSnap) error {
	cs.docsLen = docSectionLen(cs.docs)
	if _, err := bw.Write(appendUvarint(nil, uint64(cs.docsLen))); err != nil {
		return err
	}
	section := func(w io.Writer) error {
		return writeDocSection(func(b []byte) error {
			_, err := w.Write(b)
			return err
		}, cs.docs)
	}
	sw, ok := w.(store.SectionWriter)
	if !ok || len(cs.docs) == 0 { // no documents: in line (two bytes), not a frame of its own
		if err := bw.WriteByte(0); err != nil {
			return err
		}
		return section(bw)
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	at, err := sw.WriteSection(cs.docsLen, section)
	cs.docsAt = at
	return err
}

// write streams the snapshot as an image's state payload.
//
// A direct snapshot (a checkpoint's) writes FNI6, whose sections the file
// serves mapped. Any other (an image streamed out: a move, a backup, a
// restore) writes FNI2: its graphs without their live vectors, which the
// receiver takes from the documents, so a moved image carries each vector
// once; its file is written as FNI4 by its first checkpoint.
func (s *snapshot) write(w io.Writer) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer catchFault(&err)
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
	for i := range s.colls {
		cs := &s.colls[i]
		item = appendSchema(item[:0], cs.sch)
		b = appendUvarint(b[:0], uint64(len(item)))
		b = append(b, item...)
		b = appendUvarint(b, uint64(len(cs.graphs)))
		if _, err := bw.Write(b); err != nil {
			return err
		}
		b = b[:0]
		var starts []uint64 // where each document lies in the documents section, for the graphs to say
		if s.direct && len(cs.graphs) > 0 {
			starts = docStarts(cs.docs)
		}
		for _, g := range cs.graphs {
			if err := s.writeGraph(bw, w, g, cs.docs, starts); err != nil {
				return err
			}
		}
		b = appendUvarint(b, uint64(len(cs.docs)))
		if _, err := bw.Write(b); err != nil {
			return err
		}
		if s.direct {
			if err := s.writeDocs(bw, w, cs); err != nil {
				return err
			}
			continue
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
