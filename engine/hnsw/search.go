package hnsw

import (
	"math/rand/v2"
	"runtime/debug"
	"slices"
)

// Query adjusts one search.
type Query struct {
	// K is how many hits to return at most; required (> 0).
	K int
	// Ef is the candidate list length; 0 uses Config.EfSearch. It is
	// raised to K when smaller.
	Ef int
	// Exact scores every live vector instead of walking the graph.
	Exact bool
	// Filter, when not nil, keeps only ids for which it returns true. The
	// answer still holds min(K, rows passing) hits.
	Filter func(id int64) bool
	// Candidates, when not nil, is the set to score (the engine already
	// knows which rows qualify); they are scored exhaustively. Ids not in
	// the index are skipped, as are ids Filter refuses.
	Candidates []int64
	// Stop, when not nil, is asked every stopEvery nodes expanded or
	// vectors scored; once it says true the search ends with what it
	// found so far, which its caller is to throw away.
	Stop func() bool
}

// stopEvery is how many nodes a walk expands, or vectors a scan scores,
// between two calls of Query.Stop.
const stopEvery = 64

// stopCheck calls stop every stopEvery calls; it says whether to stop.
type stopCheck struct {
	stop func() bool
	n    int
	done bool
}

func (s *stopCheck) now() bool {
	if s.stop == nil || s.done {
		return s.done
	}
	if s.n++; s.n >= stopEvery {
		s.n = 0
		s.done = s.stop()
	}
	return s.done
}

// sampleSize is how many slots a filtered search tries the filter on to
// estimate how many rows pass.
const sampleSize = 512

// flatLimit is the estimated number of rows passing a filter at or below
// which a filtered search scores them all instead of walking the graph:
// that many distance computations cost less than a graph walk that must
// pass through the many rows the filter refuses, and the answer is exact.
const flatLimit = 2048

// Search returns the K live vectors nearest q, best first (highest score,
// ties by id ascending). Without Exact or Candidates it walks the graph,
// an approximation whose quality grows with Ef. It never returns fewer
// than min(K, rows passing Filter) hits: a filter passing few rows (by an
// estimate from a sample) is answered by scoring those rows, exactly, and
// a graph walk that comes back short falls back to scoring every row. A q
// of the wrong length is ErrDimension; K <= 0 is ErrK.
func (x *Index) Search(q []float32, opts Query) (_ []Hit, err error) {
	qv, err := x.prepare(q)
	if err != nil {
		return nil, err
	}
	if opts.K <= 0 {
		return nil, ErrK
	}
	if !x.enter() {
		return nil, x.gone()
	}
	defer x.leave()
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer x.guard(&err)
	sc := &stopCheck{stop: opts.Stop}
	if opts.Candidates != nil {
		return x.scoreIDs(qv, opts.Candidates, opts.K, opts.Filter, sc), nil
	}
	if x.live == 0 {
		return nil, nil
	}
	ef := opts.Ef
	if ef <= 0 {
		ef = x.cfg.EfSearch
	}
	ef = max(ef, opts.K)
	if opts.Exact || (opts.Filter != nil && x.fewPass(opts.Filter, ef)) {
		return x.exact(qv, opts.K, opts.Filter, sc), nil
	}
	hits := x.graph(qv, opts.K, ef, opts.Filter, sc)
	if len(hits) < opts.K && len(hits) < x.live && !sc.done {
		// The walk stops early only once it holds ef hits, so a short
		// answer means the live nodes passing the filter that it could
		// reach are all in it; widening ef would walk the same nodes. Only
		// scoring every row can find what the graph cannot reach.
		return x.exact(qv, opts.K, opts.Filter, sc), nil
	}
	return hits, nil
}

// fewPass estimates, by trying filter on a sample of live rows, whether
// scoring just the rows it passes costs less than walking the graph with
// candidate list length ef. Scoring them costs about p·N distances for a
// share p of N rows; a walk that must collect ef passing rows expands
// about ef/p nodes of some M0/2 new neighbours each. So it scores them
// when p·N <= flatLimit or p·N·p <= ef·M0/2.
func (x *Index) fewPass(filter func(int64) bool, ef int) bool {
	if x.live <= flatLimit {
		return true
	}
	// Sample positions are drawn at random (from a fixed seed, so the same
	// query plans the same way): an even stride could beat in step with a
	// filter on id patterns and misjudge it.
	r := rand.New(rand.NewPCG(uint64(x.live), uint64(len(x.ids))))
	tried, passed := 0, 0
	for range 4 * sampleSize {
		if tried == sampleSize {
			break
		}
		s := r.IntN(len(x.ids))
		if x.state[s] != slotLive {
			continue
		}
		tried++
		if filter(x.ids[s]) {
			passed++
		}
	}
	if tried == 0 {
		return true
	}
	p := float64(passed) / float64(tried)
	rows := p * float64(x.live)
	return rows <= flatLimit || rows*p <= float64(ef*x.m0)/2
}

// graph walks the graph with candidate list length ef and returns up to k
// hits passing filter.
func (x *Index) graph(q []float32, k, ef int, filter func(int64) bool, sc *stopCheck) []Hit {
	ep := x.greedy(q, x.entry, x.top, 0)
	vs := x.getVisited()
	defer x.visited.Put(vs)
	accept := x.isLive
	if filter != nil {
		accept = func(s uint32) bool { return x.state[s] == slotLive && filter(x.ids[s]) }
	}
	found := x.searchLayer(q, []item{ep}, ef, 0, accept, vs, sc)
	// Rank all ef found before cutting to k, so ties at the cut go by id.
	hits := x.hits(q, found)
	return hits[:min(k, len(hits))]
}

// exact scores every live slot passing filter and returns the best k.
func (x *Index) exact(q []float32, k int, filter func(int64) bool, sc *stopCheck) []Hit {
	top := rankHeap{ids: x.ids}
	for s := range x.ids {
		if sc.now() {
			break
		}
		if x.state[s] != slotLive || (filter != nil && !filter(x.ids[s])) {
			continue
		}
		top.keep(item{d: x.distTo(q, uint32(s)), slot: uint32(s)}, k)
	}
	return x.hits(q, top.items)
}

// scoreIDs scores the given ids (those live and passing filter) and
// returns the best k.
func (x *Index) scoreIDs(q []float32, ids []int64, k int, filter func(int64) bool, sc *stopCheck) []Hit {
	top := rankHeap{ids: x.ids}
	seen := make(map[uint32]struct{}, len(ids))
	for _, id := range ids {
		if sc.now() {
			break
		}
		s, ok := x.slotOf[id]
		if !ok || (filter != nil && !filter(id)) {
			continue
		}
		if _, dup := seen[s]; dup {
			continue
		}
		seen[s] = struct{}{}
		top.keep(item{d: x.distTo(q, s), slot: s}, k)
	}
	return x.hits(q, top.items)
}

// keep pushes it onto top, holding at most k items, the nearest.
func keep(top *maxHeap, it item, k int) {
	if len(*top) < k {
		top.push(it)
		return
	}
	if it.d < (*top)[0].d {
		top.pop()
		top.push(it)
	}
}

// hits turns found slots into hits scored in float64, ordered by score
// descending then id ascending.
func (x *Index) hits(q []float32, found []item) []Hit {
	out := make([]Hit, len(found))
	var buf []float32 // a document's vector normalised (mapped.go)
	if x.scaled {
		buf = make([]float32, x.dim)
	}
	for i, f := range found {
		out[i] = Hit{ID: x.ids[f.slot], Score: score64(x.cfg.Metric, q, x.unit(f.slot, buf))}
	}
	slices.SortFunc(out, func(a, b Hit) int {
		switch {
		case a.Score > b.Score:
			return -1
		case a.Score < b.Score:
			return 1
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	return out
}

// searchLayer walks level l from eps and returns up to ef nearest slots
// that accept takes, in vs's memory: valid until vs's next walk. Every node is traversed (tombstones and rows accept
// refuses included) so they keep the graph navigable; the walk stops once
// it holds ef accepted slots and no candidate left is nearer than the
// farthest of them.
func (x *Index) searchLayer(q []float32, eps []item, ef, l int, accept func(uint32) bool, vs *visitSet, sc *stopCheck) []item {
	vs.reset(len(x.ids))
	cand, res := vs.cand[:0], vs.res[:0]
	defer func() { vs.cand, vs.res = cand[:0], res[:0] }()
	for _, ep := range eps {
		if vs.seen(ep.slot) {
			continue
		}
		d := x.distTo(q, ep.slot)
		cand.push(item{d: d, slot: ep.slot})
		if accept(ep.slot) {
			keep(&res, item{d: d, slot: ep.slot}, ef)
		}
	}
	for len(cand) > 0 && !sc.now() {
		c := cand.pop()
		if len(res) >= ef && c.d > res[0].d {
			break
		}
		next := vs.next[:0]
		var touch float32
		for _, n := range x.links(c.slot, l) {
			if !vs.seen(n) {
				p := x.place(n)
				if p.at.v != nil {
					touch += *p.at.v // its first line on its way
				}
				next = append(next, p)
			}
		}
		vs.next, vs.touch = next, touch
		for _, p := range next {
			n := p.slot
			d := x.distToAt(q, p)
			if len(res) < ef || d < res[0].d {
				cand.push(item{d: d, slot: n})
				if accept(n) {
					keep(&res, item{d: d, slot: n}, ef)
				}
			}
		}
	}
	return []item(res)
}

// visitSet is one walk's scratch: the marks of slots seen (an epoch
// counter clears them) and the walk's two heaps, kept between walks.
type visitSet struct {
	marks []uint32
	epoch uint32
	cand  minHeap
	res   maxHeap
	next  []slotAt // the neighbours of a node to measure, found first
	touch float32  // what reading their vectors' first numbers ahead summed
}

func (x *Index) getVisited() *visitSet {
	// Loaded before swapped: once the primed set is taken, searches only
	// read the pointer, and concurrent ones do not contend for its line.
	if x.primed.Load() != nil {
		if v := x.primed.Swap(nil); v != nil {
			return v
		}
	}
	if v, ok := x.visited.Get().(*visitSet); ok {
		return v
	}
	return &visitSet{}
}

// primeVisited makes the visit set the next walk takes, sized for the
// graph and its marks written once: the first search after a load then
// marks memory already in place rather than faulting in fresh pages one
// by one as its walk lands on them (a page fault is dear on a virtual
// machine). It is held aside, not put in the pool, which hands a set put
// by one thread to another only sometimes.
func (x *Index) primeVisited() {
	vs := &visitSet{}
	vs.reset(len(x.ids))
	clear(vs.marks)
	x.primed.Store(vs)
}

// reset readies the set for a walk over n slots.
func (v *visitSet) reset(n int) {
	if len(v.marks) < n {
		v.marks = make([]uint32, n+n/4)
		v.epoch = 0
	}
	v.epoch++
	if v.epoch == 0 {
		clear(v.marks)
		v.epoch = 1
	}
}

// seen marks s and reports whether it was already marked.
func (v *visitSet) seen(s uint32) bool {
	if v.marks[s] == v.epoch {
		return true
	}
	v.marks[s] = v.epoch
	return false
}
