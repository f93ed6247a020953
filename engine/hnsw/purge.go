package hnsw

import "slices"

// purge takes every tombstone out of the graph. Each live node's list that
// names a tombstone is chosen again, by the neighbour heuristic, from its
// live neighbours and the live neighbours of the tombstones it named, so
// the paths that ran through a tombstone still run. The tombstones' slots
// are then freed for reuse.
func (x *Index) purge() {
	vs := x.getVisited()
	defer x.visited.Put(vs)
	var cands []item
	for s := range x.ids {
		if x.state[s] != slotLive {
			continue
		}
		for l := 0; l <= int(x.level[s]); l++ {
			cands = x.repair(uint32(s), l, vs, cands[:0])
		}
	}
	for s := range x.ids {
		if x.state[s] != slotDead {
			continue
		}
		x.state[s] = slotFree
		x.ids[s] = 0
		x.level[s] = 0
		x.up[s] = nil
		x.l0[s*(x.m0+1)] = 0
		x.free = append(x.free, uint32(s))
	}
	x.dead = 0
	if x.entry != noEntry && x.state[x.entry] != slotLive {
		x.newEntry()
	}
}

// repair rechooses slot s's list at level l if it names a tombstone. It
// uses vs to mark candidates and cands as scratch, which it returns.
func (x *Index) repair(s uint32, l int, vs *visitSet, cands []item) []item {
	cur := x.links(s, l)
	if !slices.ContainsFunc(cur, func(n uint32) bool { return x.state[n] != slotLive }) {
		return cands
	}
	vs.reset(len(x.ids))
	vs.seen(s)
	sv := x.vec(s)
	add := func(n uint32) {
		if x.state[n] != slotLive || vs.seen(n) {
			return
		}
		cands = append(cands, item{d: x.dist(sv, x.vec(n)), slot: n})
	}
	for _, n := range cur {
		if x.state[n] == slotLive {
			add(n)
			continue
		}
		if int(x.level[n]) >= l {
			for _, nn := range x.links(n, l) {
				add(nn)
			}
		}
	}
	slices.SortFunc(cands, byDist)
	// The heuristic compares each candidate with those kept; the nearest
	// few are where it keeps its links, and bounding them bounds a purge.
	m := x.maxLinks(l)
	x.setLinks(s, l, x.selectNeighbours(cands[:min(len(cands), 2*m)], m))
	return cands
}

// newEntry makes a live node of the highest level the entry point.
func (x *Index) newEntry() {
	x.entry, x.top = noEntry, 0
	for s := range x.ids {
		if x.state[s] == slotLive && (x.entry == noEntry || int(x.level[s]) > x.top) {
			x.entry, x.top = uint32(s), int(x.level[s])
		}
	}
}
