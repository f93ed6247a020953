package hnsw

import (
	"encoding/binary"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"math"
	"math/rand/v2"
	"runtime/debug"

	"github.com/fenec-go/fenec/engine/internal/hugemem"
)

// The saved graph:
//
//	header  magic "FNCHNSW\x00", version u32, body length u64
//	body    config: dim u32, metric u8, m u32, ef_construction u32,
//	        ef_search u32, seed i64
//	        level draw state: length u32, bytes
//	        slots u32, entry u32, top u32, live u32, dead u32
//	        per node, numbered densely from 0: state u8 (1 live,
//	        2 tombstone), id i64, level u8, then for each level 0..level
//	        a count u16 and that many node numbers u32; a tombstone then
//	        carries its vector, dim × f32
//	trailer CRC-32C u32 of header and body
//
// All integers are little-endian.
const (
	magic       = "FNCHNSW\x00"
	version     = 1
	headerBytes = len(magic) + 4 + 8
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// WriteTo writes the graph — configuration, levels, neighbour lists, entry
// point, tombstones (with their vectors) — but not the live vectors, which
// Load reads back through its callback. It returns the bytes written.
func (x *Index) WriteTo(w io.Writer) (n int64, err error) {
	if !x.enter() {
		return 0, x.gone()
	}
	defer x.leave()
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer x.guard(&err)
	return x.writeGraph(w, version)
}

// writeGraph writes the graph in the form of version ver: 1 whole but for
// the live vectors, headVersion without level 0's lists and any vector.
func (x *Index) writeGraph(w io.Writer, ver uint32) (int64, error) {
	pcg, err := x.pcg.MarshalBinary()
	if err != nil {
		return 0, fmt.Errorf("save level draw: %w", err)
	}
	bw := newBinWriter(w)
	bw.bytes([]byte(magic))
	bw.u32(ver)
	bw.u64(uint64(x.bodyLenV(len(pcg), ver)))
	c := x.cfg
	bw.u32(uint32(c.Dim))
	bw.u8(uint8(c.Metric))
	bw.u32(uint32(c.M))
	bw.u32(uint32(c.EfConstruction))
	bw.u32(uint32(c.EfSearch))
	bw.u64(uint64(c.Seed))
	bw.u32(uint32(len(pcg)))
	bw.bytes(pcg)
	// Free slots are left out: the saved graph numbers its nodes densely.
	remap, n := x.dense()
	bw.u32(n)
	entry := x.entry
	if entry != noEntry {
		entry = remap[entry]
	}
	bw.u32(entry)
	bw.u32(uint32(x.top))
	bw.u32(uint32(x.live))
	bw.u32(uint32(x.dead))
	for s := range x.ids {
		x.writeSlot(bw, uint32(s), remap, ver)
	}
	bw.u32(bw.sum())
	bw.spill()
	if bw.err != nil {
		return bw.n, fmt.Errorf("write graph: %w", bw.err)
	}
	return bw.n, nil
}

// dense numbers the slots in use in order, leaving free ones out.
func (x *Index) dense() (remap []uint32, n uint32) {
	remap = make([]uint32, len(x.ids))
	for s, st := range x.state {
		if st != slotFree {
			remap[s] = n
			n++
		}
	}
	return remap, n
}

func (x *Index) writeSlot(bw *binWriter, s uint32, remap []uint32, ver uint32) {
	st := x.state[s]
	if st == slotFree {
		return
	}
	bw.u8(st)
	bw.u64(uint64(x.ids[s]))
	bw.u8(x.level[s])
	for l := firstSaved(ver); l <= int(x.level[s]); l++ {
		ns := x.links(s, l)
		bw.u16(uint16(len(ns)))
		for _, n := range ns {
			bw.u32(remap[n])
		}
	}
	if st == slotDead && ver == version {
		for _, f := range x.vec(s) {
			bw.u32(math.Float32bits(f))
		}
	}
}

// firstSaved is the first level whose lists a graph of version ver
// carries in its body: level 0's are in the section from headVersion on.
func firstSaved(ver uint32) int {
	if ver == headVersion {
		return 1
	}
	return 0
}

// bodyLenV returns the length of the body writeGraph writes for ver.
func (x *Index) bodyLenV(pcgLen int, ver uint32) int64 {
	n := int64(4+1+4+4+4+8) + 4 + int64(pcgLen) + 5*4
	for s := range x.ids {
		if x.state[s] == slotFree {
			continue
		}
		n += 1 + 8 + 1
		for l := firstSaved(ver); l <= int(x.level[s]); l++ {
			n += 2 + 4*int64(len(x.links(uint32(s), l)))
		}
		if x.state[s] == slotDead && ver == version {
			n += 4 * int64(x.dim)
		}
	}
	return n
}

// binWriter writes little-endian values, summing and counting them, and
// keeps the first error. Values gather in buf and go on (summed, then
// written) a chunk at a time.
type binWriter struct {
	w   io.Writer
	crc hash.Hash32
	buf []byte
	n   int64
	err error
}

// binChunk is how much a binWriter gathers before it writes.
const binChunk = 64 << 10

func newBinWriter(w io.Writer) *binWriter {
	return &binWriter{w: w, crc: crc32.New(castagnoli), buf: make([]byte, 0, binChunk+64)}
}

// spill sums and writes what was gathered.
func (b *binWriter) spill() {
	if b.err != nil || len(b.buf) == 0 {
		return
	}
	b.crc.Write(b.buf)
	var k int
	k, b.err = b.w.Write(b.buf)
	b.n += int64(k)
	b.buf = b.buf[:0]
}

// sum spills what was gathered and returns the sum of all written.
func (b *binWriter) sum() uint32 {
	b.spill()
	return b.crc.Sum32()
}

func (b *binWriter) bytes(p []byte) {
	if len(b.buf)+len(p) > binChunk {
		b.spill()
	}
	if len(p) > binChunk {
		if b.err == nil {
			b.crc.Write(p)
			var k int
			k, b.err = b.w.Write(p)
			b.n += int64(k)
		}
		return
	}
	b.buf = append(b.buf, p...)
}

func (b *binWriter) room() {
	if len(b.buf) > binChunk {
		b.spill()
	}
}

func (b *binWriter) u8(v uint8)   { b.buf = append(b.buf, v); b.room() }
func (b *binWriter) u16(v uint16) { b.buf = binary.LittleEndian.AppendUint16(b.buf, v); b.room() }
func (b *binWriter) u32(v uint32) { b.buf = binary.LittleEndian.AppendUint32(b.buf, v); b.room() }
func (b *binWriter) u64(v uint64) { b.buf = binary.LittleEndian.AppendUint64(b.buf, v); b.room() }

// SavedLen is the number of bytes WriteTo would write now (0 if it would
// fail).
func (x *Index) SavedLen() int64 {
	pcg, err := x.pcg.MarshalBinary()
	if err != nil {
		return 0
	}
	return int64(headerBytes) + x.bodyLenV(len(pcg), version) + 4
}

// Load reads a graph written by WriteTo, restoring every link as it was,
// and takes each live node's vector from vector (normalised again for
// Cosine). It reads exactly the bytes WriteTo wrote. A graph damaged, cut
// short or of another version is ErrCorrupt; a live node vector has no
// vector for is ErrMissingVector; either way the caller rebuilds.
func Load(r io.Reader, vector func(id int64) ([]float32, bool)) (*Index, error) {
	var hdr [headerBytes]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, fmt.Errorf("%w: header: %w", ErrCorrupt, err)
	}
	body, err := checkHeader(hdr[:])
	if err != nil {
		return nil, err
	}
	// Read the body whole and check its sum before parsing: a damaged
	// graph is refused before anything is built from it.
	data, err := io.ReadAll(io.LimitReader(r, int64(body)+4))
	if err != nil {
		return nil, fmt.Errorf("read graph: %w", err)
	}
	if uint64(len(data)) != body+4 {
		return nil, fmt.Errorf("%w: cut short at %d of %d bytes", ErrCorrupt, len(data), body+4)
	}
	x, err := load(hdr[:], data)
	if err != nil {
		return nil, err
	}
	for s := range x.ids {
		if x.state[s] != slotLive {
			continue
		}
		v, ok := vector(x.ids[s])
		if !ok {
			return nil, fmt.Errorf("%w: id %d", ErrMissingVector, x.ids[s])
		}
		if len(v) != x.dim {
			return nil, fmt.Errorf("vector of id %d: %w: got %d, want %d", x.ids[s], ErrDimension, len(v), x.dim)
		}
		copy(x.vec(uint32(s)), v)
	}
	if err := x.checkVectors(); err != nil {
		return nil, err
	}
	x.primeVisited()
	return x, nil
}

// LoadBytes is Load of a graph held whole in data, exactly the bytes
// WriteTo wrote, which it only reads (nothing of the graph refers to data
// once it returns). The live nodes' vectors come from fill, called once:
// for each vector it holds it calls put with its id, which returns where
// that vector goes (Dim numbers), or nil if no live node has the id or
// it was given already; fill writes it there, and returns false if a
// vector could not be read. A live node left without one is
// ErrMissingVector.
func LoadBytes(data []byte, fill func(put func(id int64) []float32) bool) (*Index, error) {
	l, err := NewLoader(data)
	if err != nil {
		return nil, err
	}
	if !fill(l.Put) {
		l.Fail()
	}
	return l.Finish()
}

// A Loader is a graph read back but for its live nodes' vectors, which are
// put in one at a time as they come (Put) — say, as the documents holding
// them arrive — and checked as they are; Finish returns the graph.
type Loader struct {
	x       *Index
	given   []bool
	n       int   // vectors given
	pending int   // the slot whose vector was given last, to check (-1: none)
	next    int   // the slot after the last given, likely the next asked
	bad     error // the first vector refused
	failed  bool  // a vector could not be read
}

// NewLoader reads the graph held whole in data, exactly the bytes WriteTo
// wrote, which it only reads. A graph damaged, cut short or of another
// version is ErrCorrupt.
func NewLoader(data []byte) (*Loader, error) {
	if len(data) < headerBytes {
		return nil, fmt.Errorf("%w: header: %w", ErrCorrupt, io.ErrUnexpectedEOF)
	}
	body, err := checkHeader(data[:headerBytes])
	if err != nil {
		return nil, err
	}
	if rest := uint64(len(data) - headerBytes); rest != body+4 {
		if rest < body+4 {
			return nil, fmt.Errorf("%w: cut short at %d of %d bytes", ErrCorrupt, rest, body+4)
		}
		return nil, fmt.Errorf("%w: %d bytes after the graph", ErrCorrupt, rest-body-4)
	}
	x, err := load(data[:headerBytes], data[headerBytes:])
	if err != nil {
		return nil, err
	}
	return &Loader{x: x, given: make([]bool, len(x.ids)), pending: -1}, nil
}

// ReadLoader is NewLoader of a graph read from r as it comes: exactly n
// bytes, what WriteTo wrote, parsed a piece at a time rather than held
// whole first, so a graph of tens of megabytes arriving in an image costs
// no buffer of its size and is read by the time its last byte is. Its sum
// is checked once the last byte is read: a damaged graph is built, then
// refused (ErrCorrupt), and nothing of it is kept. A failure of r itself
// comes back wrapped too (as ErrCorrupt, r's error within); the caller
// tells the two apart by what is left of r. ReadLoader never reads past
// the n bytes, and stops at the first error.
func ReadLoader(r io.Reader, n int64) (*Loader, error) {
	return readLoader(r, n, readPiece)
}

// readLoader is ReadLoader reading piece bytes at a time.
func readLoader(r io.Reader, n int64, piece int) (*Loader, error) {
	var hdr [headerBytes]byte
	if n < int64(headerBytes)+4 {
		return nil, fmt.Errorf("%w: %d bytes is shorter than a graph", ErrCorrupt, n)
	}
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, fmt.Errorf("%w: header: %w", ErrCorrupt, err)
	}
	body, err := checkHeader(hdr[:])
	if err != nil {
		return nil, err
	}
	if rest := uint64(n) - uint64(headerBytes); rest != body+4 {
		return nil, fmt.Errorf("%w: a body of %d bytes in a graph of %d", ErrCorrupt, body, n)
	}
	br := &binReader{src: r, left: int64(body), buf: make([]byte, min(uint64(piece), body)),
		crc: crc32.Checksum(hdr[:], castagnoli)}
	x, tomb, err := readBody(br)
	if err != nil {
		return nil, err
	}
	var sum [4]byte
	if _, err := io.ReadFull(r, sum[:]); err != nil {
		return nil, fmt.Errorf("%w: checksum: %w", ErrCorrupt, err)
	}
	if br.crc != binary.LittleEndian.Uint32(sum[:]) {
		return nil, fmt.Errorf("%w: checksum", ErrCorrupt)
	}
	x.placeVectors(tomb)
	return &Loader{x: x, given: make([]bool, len(x.ids)), pending: -1}, nil
}

// readPiece is how much of a graph ReadLoader reads at a time.
const readPiece = 256 << 10

// Put returns where the vector of id goes (Dim numbers), for the caller
// to write it there before the next Put or Finish; nil if no live node has
// the id or it was given already. The vector given before is checked now,
// while its numbers are still at hand.
func (l *Loader) Put(id int64) []float32 {
	l.check()
	x := l.x
	var s uint32
	if l.next < len(x.ids) && x.ids[l.next] == id && x.state[l.next] == slotLive {
		// Documents come in id order, as a graph never purged numbers
		// its slots: no map to look the id up in.
		s = uint32(l.next)
	} else {
		var live bool
		if s, live = x.slotOf[id]; !live {
			return nil
		}
	}
	if l.given[s] {
		return nil
	}
	l.given[s] = true
	l.n++
	l.pending, l.next = int(s), int(s)+1
	return x.vec(s)
}

// Fail says a vector could not be read: Finish refuses the graph.
func (l *Loader) Fail() { l.failed = true }

func (l *Loader) check() {
	if l.pending >= 0 && l.bad == nil {
		l.bad = l.x.checkVector(uint32(l.pending))
	}
	l.pending = -1
}

// Finish checks the last vector given and returns the graph; a live node
// left without a vector is ErrMissingVector, and a vector refused its
// error.
func (l *Loader) Finish() (*Index, error) {
	l.check()
	if l.bad != nil {
		return nil, l.bad
	}
	x := l.x
	if l.failed || l.n != x.live {
		for s := range x.ids {
			if x.state[s] == slotLive && !l.given[s] {
				return nil, fmt.Errorf("%w: id %d", ErrMissingVector, x.ids[s])
			}
		}
		return nil, fmt.Errorf("%w: a vector could not be read", ErrMissingVector)
	}
	x.primeVisited()
	return x, nil
}

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

// binReader reads little-endian values and keeps the first error: from p,
// and, reading a stream (src), from the pieces read into buf as p runs
// out, each summed into crc as it comes.
type binReader struct {
	p   []byte
	err error

	src  io.Reader // nil: p is all there is
	left int64     // bytes src holds still
	buf  []byte    // what p is a part of, reading src
	crc  uint32    // of all read from src
}

// remaining is the bytes not read yet, at hand or still in src.
func (b *binReader) remaining() int64 { return int64(len(b.p)) + b.left }

// fill reads from src until p holds n bytes, keeping what p held; false
// if src does not hold them (err set), or n is more than a piece.
func (b *binReader) fill(n int) bool {
	if b.src == nil || int64(n) > b.remaining() || n > len(b.buf) {
		b.err = io.ErrUnexpectedEOF
		return false
	}
	k := copy(b.buf, b.p)
	m, err := io.ReadFull(b.src, b.buf[k:k+int(min(int64(len(b.buf)-k), b.left))])
	b.crc = crc32.Update(b.crc, castagnoli, b.buf[k:k+m])
	b.left -= int64(m)
	b.p = b.buf[:k+m]
	if err != nil {
		b.err = err
		return false
	}
	return true
}

func (b *binReader) fail(what string) error {
	return fmt.Errorf("%w: %s: %w", ErrCorrupt, what, b.err)
}

// take returns the next n bytes, or nil (and sets err) past the end.
func (b *binReader) take(n int) []byte {
	if b.err != nil {
		return nil
	}
	if n < 0 {
		b.err = io.ErrUnexpectedEOF
		return nil
	}
	if n > len(b.p) && !b.fill(n) {
		return nil
	}
	out := b.p[:n:n]
	b.p = b.p[n:]
	return out
}

// bytes reads n bytes (a view of the body).
func (b *binReader) bytes(n int) []byte { return b.take(n) }

func (b *binReader) u8() uint8 {
	if p := b.take(1); p != nil {
		return p[0]
	}
	return 0
}

func (b *binReader) u16() uint16 {
	if p := b.take(2); p != nil {
		return binary.LittleEndian.Uint16(p)
	}
	return 0
}

func (b *binReader) u32() uint32 {
	if p := b.take(4); p != nil {
		return binary.LittleEndian.Uint32(p)
	}
	return 0
}

func (b *binReader) u64() uint64 {
	if p := b.take(8); p != nil {
		return binary.LittleEndian.Uint64(p)
	}
	return 0
}
