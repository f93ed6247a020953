package hnsw

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"
)

// Slot states.
const (
	slotFree uint8 = iota // unused, on the free list
	slotLive              // a node search may return
	slotDead              // a tombstone: traversed, never returned
)

// maxLevel caps the level a node may draw.
const maxLevel = 31

// PurgeFraction is the share of tombstones among a graph's nodes past which
// a purge starts; it then runs a few nodes per write until done.
const PurgeFraction = 0.2

// noEntry marks an empty graph.
const noEntry = math.MaxUint32

// Index is an HNSW graph. Create one with New or Load.
type Index struct {
	cfg Config
	dim int
	m   int // links per level above 0
	m0  int // links at level 0
	ml  float64
	pcg *rand.PCG
	rnd *rand.Rand
	l2  bool // Metric is L2: distances are squared Euclidean

	vecs   []float32 // by slot from nmap on, dim each
	ids    []int64   // by slot
	state  []uint8   // by slot
	level  []uint8   // by slot: the node's top level
	l0     []uint32  // by slot from nmap on, m0+1 each: count, then neighbours at level 0
	up     [][]uint32
	slotOf map[int64]uint32 // live ids only
	// scratch holds one slot's links as a graph is read.
	scratch []uint32
	free    []uint32

	entry uint32 // a node of the top level, or noEntry
	top   int    // level of entry
	live  int
	dead  int

	// A purge under way (purge.go): the next slot to repair, and by slot
	// whether it was a tombstone when the purge began.
	purging bool
	cursor  int
	doomed  []bool

	visited sync.Pool                // *visitSet
	primed  atomic.Pointer[visitSet] // the next walk's, made as a graph loads

	mapped // the slots read in place from a mapped image (mapped.go)
}

// Hit is one search answer: a document id and its score (higher is better).
type Hit struct {
	ID    int64
	Score float64
}

// New returns an empty index. Zero M, EfConstruction and EfSearch take
// their defaults.
func New(cfg Config) (*Index, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	seed := uint64(cfg.Seed)
	x := newIndex(cfg, rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	return x, nil
}

func newIndex(cfg Config, pcg *rand.PCG) *Index {
	x := &Index{
		cfg:    cfg,
		dim:    cfg.Dim,
		m:      cfg.M,
		m0:     2 * cfg.M,
		ml:     1 / math.Log(float64(cfg.M)),
		pcg:    pcg,
		l2:     cfg.Metric == L2,
		slotOf: make(map[int64]uint32),
		entry:  noEntry,
	}
	x.rnd = rand.New(x.pcg)
	return x
}

// Config returns the index's configuration, defaults applied.
func (x *Index) Config() Config { return x.cfg }

// Len returns the number of live vectors.
func (x *Index) Len() int { return x.live }

// Tombstones returns the number of removed or replaced nodes still in the
// graph.
func (x *Index) Tombstones() int { return x.dead }

// Has reports whether id has a live vector.
func (x *Index) Has(id int64) bool {
	_, ok := x.slotOf[id]
	return ok
}

// MemoryBytes estimates the memory the index holds, for memory accounting:
// its heap, and the mapped bytes it reads in place counted whole (they are
// all read, and so resident, as the graph loads).
func (x *Index) MemoryBytes() int64 {
	n := int64(cap(x.vecs))*4 + int64(cap(x.ids))*8 + int64(cap(x.state)+cap(x.level))
	n += int64(cap(x.l0))*4 + int64(cap(x.up))*24 + int64(cap(x.free))*4
	for _, u := range x.up {
		n += int64(cap(u)) * 4
	}
	n += int64(len(x.slotOf)) * 48
	return n + x.mappedBytes()
}

// prepare checks v and returns the copy the index stores or searches with.
func (x *Index) prepare(v []float32) ([]float32, error) {
	if len(v) != x.dim {
		return nil, fmt.Errorf("%w: got %d, want %d", ErrDimension, len(v), x.dim)
	}
	if !finite(v) {
		return nil, ErrNotFinite
	}
	c := slices.Clone(v)
	if x.cfg.Metric == Cosine {
		normalize(c)
	}
	return c, nil
}

// vec returns the stored vector of slot s.
func (x *Index) vec(s uint32) []float32 {
	if s < x.nmap {
		if x.mv != nil {
			return unsafe.Slice(x.mv[s].v, x.dim)
		}
		o := int(s) * x.dim
		return x.mvecs[o : o+x.dim : o+x.dim]
	}
	o := int(s-x.nmap) * x.dim
	return x.vecs[o : o+x.dim : o+x.dim]
}

// list0 returns slot s's level-0 list as stored: its count, then room for
// m0 neighbours (read only: setLinks writes through list0Mut).
func (x *Index) list0(s uint32) []uint32 {
	w := x.m0 + 1
	if s < x.nmap {
		if k := x.cow[s]; k != 0 {
			o := int(k-1) * w
			return x.l0cow[o : o+w : o+w]
		}
		o := int(s) * w
		return x.ml0[o : o+w : o+w]
	}
	o := int(s-x.nmap) * w
	return x.l0[o : o+w : o+w]
}

// links returns the neighbours of slot s at level l (a view).
func (x *Index) links(s uint32, l int) []uint32 {
	if l == 0 {
		w := x.list0(s)
		return w[1 : 1+w[0]]
	}
	o := (l - 1) * (x.m + 1)
	u := x.up[s]
	return u[o+1 : o+1+int(u[o])]
}

// setLinks replaces the neighbours of slot s at level l.
func (x *Index) setLinks(s uint32, l int, ns []uint32) {
	var dst []uint32
	if l == 0 {
		dst = x.list0Mut(s)
	} else {
		o := (l - 1) * (x.m + 1)
		dst = x.up[s][o : o+1+x.m]
	}
	dst[0] = uint32(copy(dst[1:], ns))
}

// maxLinks returns how many neighbours a node keeps at level l.
func (x *Index) maxLinks(l int) int {
	if l == 0 {
		return x.m0
	}
	return x.m
}

// drawLevel draws a new node's top level.
func (x *Index) drawLevel() int {
	u := 1 - x.rnd.Float64() // in (0, 1]
	l := int(-math.Log(u) * x.ml)
	return min(l, maxLevel)
}

// allocSlot takes a free slot or grows the arrays by one, and gives it the
// vector v, id and level lvl with no links.
func (x *Index) allocSlot(id int64, v []float32, lvl int) uint32 {
	var s uint32
	if n := len(x.free); n > 0 {
		s = x.free[n-1]
		x.free = x.free[:n-1]
		copy(x.vec(s), v) // never a mapped slot: those are not freed for reuse
		x.list0Mut(s)[0] = 0
	} else {
		s = uint32(len(x.ids))
		x.vecs = append(x.vecs, v...)
		x.ids = append(x.ids, 0)
		x.state = append(x.state, slotFree)
		x.level = append(x.level, 0)
		x.up = append(x.up, nil)
		x.l0 = append(x.l0, make([]uint32, x.m0+1)...)
	}
	x.ids[s] = id
	x.level[s] = uint8(lvl)
	if lvl > 0 {
		x.up[s] = make([]uint32, lvl*(x.m+1))
	} else {
		x.up[s] = nil
	}
	return s
}

// Add inserts v under id, or, for an id already present, replaces its
// vector: the old node becomes a tombstone and the new vector is linked in
// afresh (the same vector again changes nothing). v is copied (and
// normalised for Cosine).
func (x *Index) Add(id int64, v []float32) (err error) {
	c, err := x.prepare(v)
	if err != nil {
		return err
	}
	if x.faulted.Load() {
		return ErrFault
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer x.guard(&err)
	if old, ok := x.slotOf[id]; ok {
		if slices.Equal(x.unit(old, x.ubuf(0)), c) {
			return nil
		}
		x.retire(old)
	}
	lvl := x.drawLevel()
	s := x.allocSlot(id, c, lvl)
	x.link(s, lvl)
	x.state[s] = slotLive
	x.slotOf[id] = s
	x.live++
	x.maybePurge()
	return nil
}

// Remove takes id out of the index; it never comes back in results.
// Removing an id not present does nothing.
func (x *Index) Remove(id int64) {
	s, ok := x.slotOf[id]
	if !ok || x.faulted.Load() {
		return
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer x.guard(nil)
	x.retire(s)
	x.maybePurge()
}

// retire turns live slot s into a tombstone.
func (x *Index) retire(s uint32) {
	delete(x.slotOf, x.ids[s])
	x.state[s] = slotDead
	x.live--
	x.dead++
}

// maybePurge, after each write, empties a graph left with no live node,
// moves a running purge on, or starts one once tombstones pass
// PurgeFraction of the nodes.
func (x *Index) maybePurge() {
	switch {
	case x.live == 0:
		x.reset()
	case x.purging:
		x.purgeStep(purgeStepNodes)
	case float64(x.dead) > PurgeFraction*float64(x.live+x.dead):
		x.startPurge()
		x.purgeStep(purgeStepNodes)
	}
}

// reset empties the graph, keeping the configuration and the level draw.
func (x *Index) reset() {
	// The mapping stays held (its reference and pins are the holders'),
	// though the emptied graph reads none of it.
	pins, faulted := x.pins.Load(), x.faulted.Load()
	*x = Index{
		cfg: x.cfg, dim: x.dim, m: x.m, m0: x.m0, ml: x.ml,
		pcg: x.pcg, rnd: x.rnd, l2: x.l2,
		slotOf: make(map[int64]uint32), entry: noEntry,
		mapped: mapped{hold: x.hold, own: x.own},
	}
	x.pins.Store(pins)
	x.faulted.Store(faulted)
}

// link connects new slot s, of top level lvl, into the graph.
func (x *Index) link(s uint32, lvl int) {
	if x.entry == noEntry {
		x.entry, x.top = s, lvl
		return
	}
	q := x.vec(s)
	ep := x.greedy(q, x.entry, x.top, lvl)
	eps := []item{ep}
	vs := x.getVisited()
	defer x.visited.Put(vs)
	for l := min(lvl, x.top); l >= 0; l-- {
		found := x.searchLayer(q, eps, x.cfg.EfConstruction, l, x.isLive, vs, &stopCheck{})
		if len(found) == 0 {
			continue
		}
		slices.SortFunc(found, byDist)
		// A new node takes M links at every level, as in the HNSW paper;
		// level 0 lists grow to 2·M as later nodes link back.
		ns := x.selectNeighbours(found, x.m)
		x.setLinks(s, l, ns)
		for _, n := range ns {
			x.addLink(n, s, l)
		}
		eps = append(eps[:0], found...) // found lives in vs, reused below
	}
	if lvl > x.top {
		x.entry, x.top = s, lvl
	}
}

func (x *Index) isLive(s uint32) bool { return x.state[s] == slotLive }

func byDist(a, b item) int {
	switch {
	case a.d < b.d:
		return -1
	case a.d > b.d:
		return 1
	}
	return int(a.slot) - int(b.slot)
}

// greedy walks from ep on level from down to level to+1, each time to the
// nearest neighbour of q, and returns where it ends.
func (x *Index) greedy(q []float32, ep uint32, from, to int) item {
	cur := item{d: x.distTo(q, ep), slot: ep}
	for l := from; l > to; l-- {
		for changed := true; changed; {
			changed = false
			for _, n := range x.links(cur.slot, l) {
				if d := x.distTo(q, n); d < cur.d {
					cur = item{d: d, slot: n}
					changed = true
				}
			}
		}
	}
	return cur
}

// selectNeighbours picks up to m of cands (sorted nearest first) by the
// HNSW heuristic: a candidate is kept only if it is nearer to the base than
// to every candidate already kept, which spreads links in all directions.
func (x *Index) selectNeighbours(cands []item, m int) []uint32 {
	if len(cands) <= m {
		out := make([]uint32, len(cands))
		for i, c := range cands {
			out[i] = c.slot
		}
		return out
	}
	out := make([]uint32, 0, m)
	for _, c := range cands {
		cv := x.unit(c.slot, x.ubuf(0))
		good := true
		for _, k := range out {
			if x.distTo(cv, k) < c.d {
				good = false
				break
			}
		}
		if good {
			out = append(out, c.slot)
			if len(out) == m {
				break
			}
		}
	}
	return out
}

// addLink adds s to n's neighbours at level l, re-selecting n's list by the
// heuristic when it is full.
func (x *Index) addLink(n, s uint32, l int) {
	cur := x.links(n, l)
	if slices.Contains(cur, s) {
		return
	}
	if len(cur) < x.maxLinks(l) {
		ns := append(slices.Clone(cur), s)
		x.setLinks(n, l, ns)
		return
	}
	nv := x.unit(n, x.ubuf(1))
	cands := make([]item, 0, len(cur)+1)
	cands = append(cands, item{d: x.distTo(nv, s), slot: s})
	for _, c := range cur {
		if x.state[c] == slotLive {
			cands = append(cands, item{d: x.distTo(nv, c), slot: c})
		}
	}
	slices.SortFunc(cands, byDist)
	x.setLinks(n, l, x.selectNeighbours(cands, x.maxLinks(l)))
}
