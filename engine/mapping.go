package engine

import "github.com/fenec-go/fenec/engine/hnsw"

// What is served from the mapped tenant file: each @hnsw graph's level-0
// lists and vectors (its section), read where the last image holds them.
// An open maps the file (package store) and the image's graphs keep
// references on the mapping; a checkpoint writes the next image, maps the
// new file and swaps each graph for the same graph served from it
// (mapGraphs); the old mapping goes once no graph and no search holds it
// (hnsw.Index.Release, Pin: a reference count). Close releases them all.

// mapGraphs serves the graphs a direct snapshot just wrote to the file
// from the file's mapping. mu is held (read) since the snapshot was taken,
// so each graph is still what was written; a graph that cannot be mapped
// stays as it is.
func (db *DB) mapGraphs(snap *snapshot) {
	reg, err := db.log.Map()
	if err != nil {
		db.logger.Warn("graphs not mapped after the checkpoint; kept as they are", "err", err)
		return
	}
	defer reg.Release()
	data := reg.Bytes()
	for _, cs := range snap.colls {
		for _, g := range cs.graphs {
			if g.at <= 0 || g.at+g.secLen > int64(len(data)) || g.vi.graph() != g.x || !reg.Acquire() {
				continue
			}
			x, err := hnsw.LoadMapped(g.head, data[g.at:g.at+g.secLen], reg)
			if err == nil {
				err = x.AttachVectors(docVectors(ascendDocs(cs.docs), g.field, x.Config().Dim))
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
	reg.Drop() // the checks read it all: resident again as searches read it
}

// releaseGraphsLocked lets go of every graph's mapping as the tenant
// closes; mu is held.
func (db *DB) releaseGraphsLocked() { releaseGraphs(db.st) }

// releaseGraphs lets go of the mappings st's graphs hold.
func releaseGraphs(st *state) {
	for _, c := range st.colls {
		for _, x := range c.search {
			if g, ok := x.(*vectorIndex); ok {
				g.graph().Release()
			}
		}
	}
}
