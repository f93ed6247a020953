package engine

import (
	"errors"

	"github.com/fenec-go/fenec/engine/hnsw"
)

// What is served from the mapped tenant file: each collection's documents
// as the last image holds them (its documents section: doctable.go) and
// each @hnsw graph's level-0 lists and vectors (its section), read where
// the last image holds them. An open maps the file (package store); the
// image's tables and graphs keep references on the mapping. A checkpoint
// writes the next image, maps the new file, swaps each graph for the same
// graph served from it and, under the write lock, each collection's table
// and changes for the new table, if no write landed since its snapshot
// (mapImage, foldDocs). The old mapping goes once no graph, no search, no
// table and no document read from one holds it (hnsw.Index.Release, Pin
// and the tables' cleanups: one reference count, fmap.Region's). Close
// releases the graphs and lets go of the tables.
//
// The mapped file never shrinks under the mapping: a checkpoint, a
// compaction and an install write a new file and rename it over the old
// one, and the only cuts of a file open (a torn tail at open, a refused
// block's spills, an append that failed) cut past the last image, which
// is all the engine reads of it. The store's flock keeps any other fenec
// from writing the file meanwhile.

// mapImage serves what a direct snapshot just wrote to the file from the
// file's mapping: each graph is swapped at once, read from the new
// mapping, its vectors where the new documents section holds them; each
// collection's new table is returned (by name), for foldDocs to serve once
// the write lock is held. mu is held (read) since the snapshot was taken,
// so each graph is still what was written; a graph that cannot be mapped
// stays as it is, and a table that cannot is left out.
func (db *DB) mapImage(snap *snapshot) map[string]*docTable {
	reg, err := db.log.Map()
	if err != nil {
		db.logger.Warn("image not mapped after the checkpoint; kept as it is", "err", err)
		return nil
	}
	defer reg.Release()
	data := reg.Bytes()
	tabs := make(map[string]*docTable, len(snap.colls))
	for i := range snap.colls {
		cs := &snap.colls[i]
		ascend, vals := ascendDocs(cs.docs), []byte(nil)
		if len(cs.docs) == 0 { // written in line: an empty table, so the old one and its tombstones go
			if t, err := newDocTable(nil, 0, 0, nil); err == nil {
				tabs[cs.sch.Name] = t
			}
			continue
		}
		if cs.docsAt > 0 && cs.docsAt+cs.docsLen <= int64(len(data)) && reg.Acquire() {
			t, err := newDocTable(data[cs.docsAt:cs.docsAt+cs.docsLen], uint64(len(cs.docs)), snap.counters[cs.sch.Name], reg)
			if err != nil {
				db.logger.Warn("documents not mapped after the checkpoint; kept as they are", "collection", cs.sch.Name, "err", err)
			} else {
				tabs[cs.sch.Name] = t
				ascend, vals = t.ascend, t.vals
			}
		}
		for _, g := range cs.graphs {
			if g.at <= 0 || g.at+g.secLen > int64(len(data)) || g.vi.graph() != g.x || !reg.Acquire() {
				continue
			}
			x, err := hnsw.LoadMapped(g.head, data[g.at:g.at+g.secLen], reg)
			if err == nil {
				err = attachMapped(x, vals, ascend, g.field)
				if err != nil {
					x.Release()
				}
			}
			if err != nil {
				db.logger.Warn("graph not mapped after the checkpoint; kept as it is", "collection", cs.sch.Name,
					"field", cs.sch.Fields[g.field].Name, "err", err)
				continue
			}
			g.vi.swap(x)
		}
	}
	reg.Drop() // the checks read it all: resident again as reads read it
	return tabs
}

// attachMapped gives x, a graph the checkpoint just wrote and mapped, its
// vectors where the new documents section places them (vals, nil when
// the table was not mapped), else each document's, by id.
func attachMapped(x *hnsw.Index, vals []byte, ascend func(func(*doc) bool), field int) error {
	if vals != nil {
		if err := x.AttachPlaces(vals); !errors.Is(err, hnsw.ErrNoPlaces) {
			return err
		}
	}
	return x.AttachVectors(docVectors(ascend, field, x.Config().Dim))
}

// foldDocs serves each collection's documents from tabs, the tables of
// the image a snapshot of st at seq wrote, in place of the table and the
// changes before it: the image holds them all. If anything landed since
// (the seq moved, or the state was replaced) the tables are let go of and
// the collections stay as they are, to be folded by a later checkpoint.
func (db *DB) foldDocs(st *state, seq uint64, tabs map[string]*docTable) {
	if len(tabs) == 0 {
		return
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.closed || db.st != st || db.log.Seq() != seq {
		for _, t := range tabs {
			t.release()
		}
		return
	}
	for name, t := range tabs {
		c := st.colls[name]
		if c == nil || c.n != t.n {
			t.release()
			continue
		}
		if c.base != nil {
			c.base.release()
		}
		c.base = t
		c.order.Clear(false)
		c.mem = 0 // only changes count there: the table counts as its size
	}
	releaseDropped(st)
}

// ascend visits the table's documents in id order until fn says stop.
func (t *docTable) ascend(fn func(*doc) bool) {
	for k := range t.n {
		if !fn(t.doc(k)) {
			return
		}
	}
}

// releaseMappingsLocked lets go of every graph's and table's mapping as
// the tenant closes; mu is held. A table goes once no document read from
// it is held either (a read's rows still being encoded).
func (db *DB) releaseMappingsLocked() { releaseMappings(db.st) }

// releaseMappings lets go of the mappings st's graphs and tables hold.
func releaseMappings(st *state) {
	for _, c := range st.colls {
		c.releaseMappings()
	}
	releaseDropped(st)
}

// releaseDropped lets go of the mappings of the collections dropped.
func releaseDropped(st *state) {
	for _, c := range st.dropped {
		c.releaseMappings()
	}
	st.dropped = nil
}

// releaseMappings lets go of c's table and graphs.
func (c *collection) releaseMappings() {
	if c.base != nil {
		c.base.release()
	}
	for _, x := range c.search {
		if g, ok := x.(*vectorIndex); ok {
			g.graph().Release()
		}
	}
}
