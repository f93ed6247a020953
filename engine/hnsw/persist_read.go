package hnsw

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"math/rand/v2"

	"github.com/fenec-go/fenec/engine/internal/hugemem"
)

// checkHeader checks a graph's header, of version 1, and returns its
// body's length.
func checkHeader(hdr []byte) (uint64, error) { return checkHeaderVersion(hdr, version) }

// checkHeaderVersion checks a graph's header is of version ver and
// returns its body's length.
func checkHeaderVersion(hdr []byte, ver uint32) (uint64, error) {
	if string(hdr[:len(magic)]) != magic {
		return 0, fmt.Errorf("%w: not a graph", ErrCorrupt)
	}
	if v := binary.LittleEndian.Uint32(hdr[len(magic):]); v != ver {
		return 0, fmt.Errorf("%w: version %d, want %d", ErrCorrupt, v, ver)
	}
	body := binary.LittleEndian.Uint64(hdr[len(magic)+4:])
	if body > math.MaxInt64-4 {
		return 0, fmt.Errorf("%w: body length %d", ErrCorrupt, body)
	}
	return body, nil
}

// load builds the graph of header hdr from data, its body and checksum,
// all but the live nodes' vectors.
func load(hdr, data []byte) (*Index, error) {
	body := len(data) - 4
	crc := crc32.Update(crc32.Checksum(hdr, castagnoli), castagnoli, data[:body])
	if crc != binary.LittleEndian.Uint32(data[body:]) {
		return nil, fmt.Errorf("%w: checksum", ErrCorrupt)
	}
	x, tomb, err := readBody(&binReader{p: data[:body]})
	if err != nil {
		return nil, err
	}
	x.placeVectors(tomb)
	return x, nil
}

// placeVectors makes the array of a graph just read's vectors and puts
// its tombstones' in it; the live nodes' come later.
func (x *Index) placeVectors(tomb []tombVec) {
	x.vecs = hugemem.Make[float32](len(x.ids)*x.dim, len(x.ids)*x.dim)
	for _, t := range tomb {
		copy(x.vec(t.slot), t.v)
	}
}

// tombVec is a tombstone's vector as read, placed once the graph checks.
type tombVec struct {
	slot uint32
	v    []float32
}

// readBody parses and checks the body of a graph of version 1.
func readBody(br *binReader) (*Index, []tombVec, error) {
	x, tomb, live, dead, err := readBodyV(br, version)
	if err != nil {
		return nil, nil, err
	}
	if err := x.check(live, dead); err != nil {
		return nil, nil, err
	}
	return x, tomb, nil
}

// readBodyV parses the body of a graph of version ver and returns the
// counts it says, for the caller to check once the graph is whole (one
// of headVersion has no level-0 lists yet).
func readBodyV(br *binReader, ver uint32) (*Index, []tombVec, uint32, uint32, error) {
	cfg := Config{
		Dim:            int(br.u32()),
		Metric:         Metric(br.u8()),
		M:              int(br.u32()),
		EfConstruction: int(br.u32()),
		EfSearch:       int(br.u32()),
		Seed:           int64(br.u64()),
	}
	if br.err != nil {
		return nil, nil, 0, 0, br.fail("config")
	}
	if err := cfg.Validate(); err != nil || cfg != cfg.withDefaults() {
		return nil, nil, 0, 0, fmt.Errorf("%w: config: %v", ErrCorrupt, err)
	}
	pcgState := br.bytes(int(br.u32()))
	pcg := new(rand.PCG)
	if br.err != nil {
		return nil, nil, 0, 0, br.fail("level draw")
	}
	if err := pcg.UnmarshalBinary(pcgState); err != nil {
		return nil, nil, 0, 0, fmt.Errorf("%w: level draw: %v", ErrCorrupt, err)
	}
	x := newIndex(cfg, pcg)
	slots := br.u32()
	x.entry, x.top = br.u32(), int(br.u32())
	live, dead := br.u32(), br.u32()
	if br.err != nil {
		return nil, nil, 0, 0, br.fail("counts")
	}
	if uint64(slots) > uint64(br.remaining()/slotBytes(ver)) {
		return nil, nil, 0, 0, fmt.Errorf("%w: %d slots in a body of %d bytes", ErrCorrupt, slots, br.remaining())
	}
	var tomb []tombVec
	for s := uint32(0); s < slots; s++ {
		if len(x.ids) == cap(x.ids) {
			x.grow(x.roomFor(slots-s, br, ver), ver == version)
		}
		t, err := x.readSlot(br, s, ver)
		if err != nil {
			return nil, nil, 0, 0, err
		}
		if t.v != nil {
			tomb = append(tomb, t)
		}
	}
	if n := br.remaining(); n != 0 {
		return nil, nil, 0, 0, fmt.Errorf("%w: %d bytes left in body", ErrCorrupt, n)
	}
	return x, tomb, live, dead, nil
}

// readSlot reads slot s (the next slot) into x; for a tombstone it
// returns its vector too.
func (x *Index) readSlot(br *binReader, s uint32, ver uint32) (tombVec, error) {
	st := br.u8()
	id := int64(br.u64())
	lvl := int(br.u8())
	if br.err != nil {
		return tombVec{}, br.fail("slot")
	}
	if st != slotLive && st != slotDead {
		return tombVec{}, fmt.Errorf("%w: slot %d state %d", ErrCorrupt, s, st)
	}
	if lvl > maxLevel {
		return tombVec{}, fmt.Errorf("%w: slot %d level %d", ErrCorrupt, s, lvl)
	}
	x.allocEmpty(ver == version)
	x.ids[s], x.state[s], x.level[s] = id, st, uint8(lvl)
	if lvl > 0 {
		x.up[s] = make([]uint32, lvl*(x.m+1))
	}
	ns := x.scratch[:0]
	for l := firstSaved(ver); l <= lvl; l++ {
		k := int(br.u16())
		if br.err != nil {
			return tombVec{}, br.fail("links")
		}
		if k > x.maxLinks(l) {
			return tombVec{}, fmt.Errorf("%w: slot %d has %d links at level %d", ErrCorrupt, s, k, l)
		}
		ns = ns[:0]
		for range k {
			ns = append(ns, br.u32())
		}
		if br.err != nil {
			return tombVec{}, br.fail("links")
		}
		x.setLinks(s, l, ns)
	}
	if st == slotDead && ver != version {
		x.dead++
		return tombVec{}, nil
	}
	if st == slotDead {
		if br.remaining() < 4*int64(x.dim) {
			return tombVec{}, fmt.Errorf("%w: slot %d tombstone vector cut short", ErrCorrupt, s)
		}
		v := make([]float32, x.dim)
		for i := range v {
			v[i] = math.Float32frombits(br.u32())
		}
		if !finite(v) {
			return tombVec{}, fmt.Errorf("%w: slot %d vector not finite", ErrCorrupt, s)
		}
		x.dead++
		return tombVec{slot: s, v: v}, nil
	}
	if _, dup := x.slotOf[id]; dup {
		return tombVec{}, fmt.Errorf("%w: id %d twice", ErrCorrupt, id)
	}
	x.slotOf[id] = s
	x.live++
	return tombVec{}, nil
}

// minSlotBytes is the least a slot takes in a graph's body: state, id,
// level and one link count.
const minSlotBytes = 1 + 8 + 1 + 2

// slotBytes is the least a slot takes in the body of a graph of version
// ver: one of headVersion carries no level-0 count.
func slotBytes(ver uint32) int64 {
	if ver == version {
		return minSlotBytes
	}
	return minSlotBytes - 2
}

// roomFor is how many more slots to make room for, of the left still to
// read: all of them when the bytes at hand could hold them (a graph held
// whole: one allocation), else as many as those bytes could hold or seven
// times those made already, whichever is more. A slot takes at least
// minSlotBytes, so a damaged count never makes a graph allocate for more
// slots than eight times what the bytes read so far could hold, or 1024.
func (x *Index) roomFor(left uint32, br *binReader, ver uint32) int {
	held := max(int64(len(br.p))/slotBytes(ver), 7*int64(len(x.ids)), 1024)
	return int(min(int64(left), held))
}

// grow makes room for n more slots in the arrays allocEmpty appends to,
// and in the map of live ids; with l0, in the level-0 lists too.
func (x *Index) grow(n int, l0 bool) {
	x.ids = reserve(x.ids, n)
	x.state = reserve(x.state, n)
	x.level = reserve(x.level, n)
	x.up = reserve(x.up, n)
	if l0 {
		x.l0 = reserve(x.l0, n*(x.m0+1))
	}
	if len(x.slotOf) == 0 {
		x.slotOf = make(map[int64]uint32, n)
	}
	x.scratch = make([]uint32, 0, x.m0)
}

// reserve returns s with room for n more elements. It makes the new array
// rather than growing s by append (slices.Grow), which clears all of it
// first: memory fresh from the system is not cleared on allocation, so a
// loaded graph's arrays are touched once, as their slots are read, and a
// large one in huge pages.
func reserve[E any](s []E, n int) []E {
	if cap(s)-len(s) >= n {
		return s
	}
	r := hugemem.Make[E](len(s), len(s)+n)
	copy(r, s)
	return r
}

// allocEmpty grows the arrays, all but the vectors (and with l0 false
// the level-0 lists), by one free slot with no links.
func (x *Index) allocEmpty(l0 bool) {
	x.ids = append(x.ids, 0)
	x.state = append(x.state, slotFree)
	x.level = append(x.level, 0)
	x.up = append(x.up, nil)
	if l0 {
		x.l0 = append(x.l0, make([]uint32, x.m0+1)...)
	}
}

// check verifies what the slots say against the counts and entry point
// read, and that every link names a node of that level other than itself.
func (x *Index) check(live, dead uint32) error {
	if uint32(x.live) != live || uint32(x.dead) != dead {
		return fmt.Errorf("%w: counts %d/%d, slots hold %d/%d", ErrCorrupt, live, dead, x.live, x.dead)
	}
	n := uint32(len(x.ids))
	if x.live == 0 {
		if x.dead != 0 || x.entry != noEntry || x.top != 0 {
			return fmt.Errorf("%w: empty graph with an entry or tombstones", ErrCorrupt)
		}
		return nil
	}
	if x.entry >= n || x.state[x.entry] == slotFree || int(x.level[x.entry]) != x.top {
		return fmt.Errorf("%w: entry point", ErrCorrupt)
	}
	for s := range n {
		if x.state[s] == slotFree {
			continue
		}
		// A tombstone may stand above a new entry point chosen when the
		// old one was purged; a live node never does.
		if x.state[s] == slotLive && int(x.level[s]) > x.top {
			return fmt.Errorf("%w: slot %d above the entry point", ErrCorrupt, s)
		}
		for l := 0; l <= int(x.level[s]); l++ {
			for _, t := range x.links(s, l) {
				if t >= n || t == s || x.state[t] == slotFree || int(x.level[t]) < l {
					return fmt.Errorf("%w: slot %d links to %d at level %d", ErrCorrupt, s, t, l)
				}
			}
		}
	}
	return nil
}

// checkVectors checks every live slot's vector (checkVector).
func (x *Index) checkVectors() error {
	for s := range x.ids {
		if x.state[s] != slotLive {
			continue
		}
		if err := x.checkVector(uint32(s)); err != nil {
			return err
		}
	}
	return nil
}

// checkVector checks slot s's vector as prepare does (finite) and
// normalises it for Cosine, in one pass over it for Cosine: the sum of
// the squares is finite exactly when every number is (a float32 squared
// cannot overflow a float64).
func (x *Index) checkVector(s uint32) error {
	v := x.vec(s)
	ok := true
	if x.cfg.Metric == Cosine {
		ok = normalizeFinite(v)
	} else {
		ok = finite(v)
	}
	if !ok {
		return fmt.Errorf("vector of id %d: %w", x.ids[s], ErrNotFinite)
	}
	return nil
}
