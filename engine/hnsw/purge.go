package hnsw

import "slices"

// purge takes every tombstone out of the graph. Each live node's list that
// names a tombstone is chosen again, by the neighbour heuristic, from its
// live neighbours and the live neighbours of the tombstones it named, so
// the paths that ran through a tombstone still run. The tombstones' slots
// are then freed for reuse.
func (x *Index) purge() {
	for s := range x.ids {
		if x.state[s] != slotLive {
			continue
		}
		for l := 0; l <= int(x.level[s]); l++ {
			x.repair(uint32(s), l)
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

// repair rechooses slot s's list at level l if it names a tombstone.
func (x *Index) repair(s uint32, l int) {
	cur := x.links(s, l)
	if !slices.ContainsFunc(cur, func(n uint32) bool { return x.state[n] != slotLive }) {
		return
	}
	seen := map[uint32]bool{s: true}
	var cands []item
	sv := x.vec(s)
	add := func(n uint32) {
		if seen[n] || x.state[n] != slotLive {
			return
		}
		seen[n] = true
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
	x.setLinks(s, l, x.selectNeighbours(cands, x.maxLinks(l)))
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
