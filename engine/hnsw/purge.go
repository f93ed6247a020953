package hnsw

import (
	"math"
	"slices"
)

// purgeStepNodes is how many live nodes each Add or Remove repairs while a
// purge runs: a purge is spread over writes instead of stalling one.
const purgeStepNodes = 32

// A purge takes the tombstones out of the graph. It starts when tombstones
// pass PurgeFraction of the nodes, dooming those present then, and walks
// the slots in order a few nodes per write: each live node's list that
// names a tombstone is chosen again, by the neighbour heuristic, from its
// live neighbours and the live neighbours of the tombstones it named, so
// the paths that ran through a tombstone still run. New links only ever
// name live nodes, so once the walk has passed every slot no live node
// names a doomed one; the tombstones made since have their links to doomed
// slots struck, and the doomed slots are freed for reuse.

// Purge finishes any purge under way, or runs one now, so that no tombstone
// is left. Writes purge on their own; Purge is for a caller that wants a
// clean graph at once (say, before saving it).
func (x *Index) Purge() {
	if !x.purging && x.dead > 0 {
		x.startPurge()
	}
	if x.purging {
		x.purgeStep(math.MaxInt)
	}
}

// startPurge dooms every tombstone present and starts the walk.
func (x *Index) startPurge() {
	x.purging, x.cursor, x.doomed = true, 0, make([]bool, len(x.ids))
	for s, st := range x.state {
		x.doomed[s] = st == slotDead
	}
}

// isDoomed reports whether slot s is freed when the running purge ends.
func (x *Index) isDoomed(s uint32) bool { return int(s) < len(x.doomed) && x.doomed[s] }

// purgeStep repairs up to n more live nodes and ends the purge when the
// walk has passed every slot.
func (x *Index) purgeStep(n int) {
	vs := x.getVisited()
	defer x.visited.Put(vs)
	var cands []item
	for n > 0 && x.cursor < len(x.ids) {
		s := uint32(x.cursor)
		x.cursor++
		if x.state[s] != slotLive {
			continue
		}
		for l := 0; l <= int(x.level[s]); l++ {
			cands = x.repair(s, l, vs, cands[:0])
		}
		n--
	}
	if x.cursor >= len(x.ids) {
		x.endPurge()
	}
}

// endPurge strikes doomed slots from the remaining tombstones' lists and
// frees them.
func (x *Index) endPurge() {
	for s := range x.ids {
		if x.state[s] != slotDead || x.isDoomed(uint32(s)) {
			continue
		}
		for l := 0; l <= int(x.level[s]); l++ {
			ns := x.links(uint32(s), l)
			if slices.ContainsFunc(ns, x.isDoomed) {
				x.setLinks(uint32(s), l, slices.DeleteFunc(slices.Clone(ns), x.isDoomed))
			}
		}
	}
	for s, d := range x.doomed {
		if !d {
			continue
		}
		x.state[s] = slotFree
		x.ids[s] = 0
		x.level[s] = 0
		x.up[s] = nil
		x.dead--
		if uint32(s) < x.nmap {
			// A mapped slot's vector cannot be written: it is left
			// unused (no list names it) until the next image drops it.
			continue
		}
		x.list0Mut(uint32(s))[0] = 0
		x.free = append(x.free, uint32(s))
	}
	x.purging, x.cursor, x.doomed = false, 0, nil
	if x.entry != noEntry && x.state[x.entry] == slotFree {
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
	sv := x.unit(s, x.ubuf(1))
	add := func(n uint32) {
		if x.state[n] != slotLive || vs.seen(n) {
			return
		}
		cands = append(cands, item{d: x.distTo(sv, n), slot: n})
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
