package hnsw

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"runtime"
	"runtime/debug"
	"slices"
	"sync/atomic"
	"unsafe"

	"github.com/fenec-go/fenec/engine/internal/hugemem"
)

// A graph saved for mapping comes in two parts. The head (WriteHead) is
// the saved graph of version 3: as version 1 (persist.go), but each slot
// carries its lists from level 1 up only, and a tombstone no vector. The
// section (WriteSection, docvec.go) is what a mapped image serves in
// place: every slot's fixed-size level-0 list, numbered as the head
// numbers them, each live node's inverse norm (Cosine) and the
// tombstones' vectors; the live nodes' vectors are not in it, but in the
// documents that hold them, which the graph reads where they lie
// (AttachVectors).
//
// A head of version 2 (written before) comes with a section that holds
// every slot's vector, as the graph keeps them:
//
//	lists    slots × (m0+1) u32: count, then m0 neighbours (unused ones 0)
//	vectors  slots × dim f32, normalised for Cosine as the graph keeps them
//	trailer  CRC-32C u32 of lists and vectors
//
// LoadMapped reads the head into memory and uses the section where it
// lies, checking its sum first: the lists and vectors are neither copied
// nor decoded. All integers are little-endian; a section must start at a
// multiple of 8 in memory to be used in place (else it is copied).
const (
	headVersion   = 4
	headVersionV3 = 3
	headVersionV2 = 2
)

// A Holder keeps the bytes of a section readable: Acquire takes a
// reference (false once the bytes are gone), Release gives it back.
type Holder interface {
	Acquire() bool
	Release()
}

// mapped is the part of an Index read in place from a mapped section:
// slots below nmap keep their level-0 lists in ml0; a list changed since
// is copied out first into l0cow (cow[s] is 1 + its place there, or 0).
// Their vectors are in mvecs (a section of version 2), or where mv points
// (version 3): a live node's in its document, a tombstone's in mvecs;
// minv (Cosine, version 3) is each one's inverse norm, by which it is
// scaled to the unit vector the graph measures (unit, distTo). A mapped
// slot is never reused: its vector cannot be written. hold keeps the
// bytes mapped; own is the graph's own reference on it, given back by
// Release or, should the graph be dropped without, once the garbage
// collector finds it unreachable.
type mapped struct {
	nmap  uint32
	mvecs []float32
	mv    []docVec
	minv  []float64
	// mplace (version 4): where each live node's vector lies among the
	// documents' bytes (AttachPlaces); 0 for a tombstone.
	mplace []uint64
	// scaled: mv's vectors are documents' (Cosine, version 3), each
	// measured scaled by its inverse norm.
	scaled bool
	ml0    []uint32
	cow    []uint32
	l0cow  []uint32
	// awaiting: the live nodes' vectors are not given yet (AttachVectors).
	awaiting bool
	// scratch: two vectors normalised by writes (ubuf).
	scratch2 []float32

	hold    Holder
	own     *ownRef
	pins    atomic.Int32 // Pins not undone: their holders read on past Release
	faulted atomic.Bool  // a read of the mapping faulted (guard)
}

// ownRef is a graph's own reference on its mapping, given back once.
type ownRef struct {
	hold Holder
	done atomic.Bool
}

func (o *ownRef) release() {
	if o != nil && !o.done.Swap(true) {
		o.hold.Release()
	}
}

// list0Mut returns slot s's level-0 list to write, copying a mapped one
// out first.
func (x *Index) list0Mut(s uint32) []uint32 {
	if s < x.nmap && x.cow[s] == 0 {
		x.l0cow = append(x.l0cow, x.list0(s)...)
		x.cow[s] = uint32(len(x.l0cow) / (x.m0 + 1))
	}
	return x.list0(s)
}

// mappedBytes is what the index reads in place, and the lists copied out.
func (x *Index) mappedBytes() int64 {
	return x.MappedBytes() + 4*int64(cap(x.cow)+cap(x.l0cow)+cap(x.scratch2)) + 16*int64(cap(x.mv))
}

// MappedBytes is how many of MemoryBytes are read in place from a mapped
// image rather than held on the heap (the documents' vectors a graph
// reads are counted with the documents).
func (x *Index) MappedBytes() int64 {
	return 4*int64(len(x.mvecs)+len(x.ml0)) + 8*int64(len(x.minv)+len(x.mplace))
}

// enter takes a reference on the mapped bytes for a reader; false once
// the graph is released (a reader arriving after is turned away even
// while others still read, so the last of them lets the bytes go). Every
// enter is paired with a leave. A graph held in memory alone is always
// readable.
func (x *Index) enter() bool {
	switch {
	case x.awaiting:
		return false
	case x.hold == nil:
		return true
	case x.faulted.Load():
		return false
	case x.own.done.Load() && x.pins.Load() == 0:
		return false // released, and no pin holds it: turned away
	}
	return x.hold.Acquire()
}

func (x *Index) leave() {
	if x.hold != nil {
		x.hold.Release()
	}
}

// guard turns a fault reading the mapped bytes — the file shortened
// under the mapping by someone other than fenec, which flock cannot
// refuse — into ErrFault in *err, rather than a crash of the process
// (runtime/debug.SetPanicOnFault); the graph answers ErrFault from then
// on. Deferred by every method that reads a mapped graph's bytes, with
// the restore of the goroutine's setting deferred before it:
//
//	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
//	defer x.guard(&err)
func (x *Index) guard(err *error) {
	r := recover()
	if r == nil {
		return
	}
	if _, ok := r.(interface{ Addr() uintptr }); !ok {
		panic(r)
	}
	x.faulted.Store(true)
	if err != nil {
		*err = ErrFault
	}
}

// Pin keeps the bytes the graph reads mapped for the caller, who may go
// on reading (searching, saving) past Release, until Unpin; false if it
// was released already. A reader that found the graph where another may
// Release it pins it first.
func (x *Index) Pin() bool {
	if !x.enter() {
		return false
	}
	x.pins.Add(1)
	return true
}

// Unpin undoes a Pin.
func (x *Index) Unpin() {
	if x.hold != nil {
		x.pins.Add(-1)
	}
	x.leave()
}

// Release gives back the graph's own reference on the mapped image it
// reads: the bytes go once the searches and pins on it end, and Search
// answers ErrReleased after. A graph held in memory alone is unchanged.
// The caller stops writing to it first (writes are never concurrent with
// anything on an Index). Safe to call twice.
func (x *Index) Release() { x.own.release() }

// sectionSlots is how many slots a saved graph numbers: those in use.
func (x *Index) sectionSlots() int64 { return int64(x.live + x.dead) }

// HeadLen is the number of bytes WriteHead writes now (0 if it would
// fail).
func (x *Index) HeadLen() int64 {
	pcg, err := x.pcg.MarshalBinary()
	if err != nil {
		return 0
	}
	return int64(headerBytes) + x.bodyLenV(len(pcg), headVersion) + 4
}

// WriteHead writes the graph but for what WriteSection writes. It returns
// the bytes written.
func (x *Index) WriteHead(w io.Writer) (n int64, err error) {
	if !x.enter() {
		return 0, x.gone()
	}
	defer x.leave()
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer x.guard(&err)
	return x.writeGraph(w, headVersion)
}

// gone is why enter turned a reader away.
func (x *Index) gone() error {
	switch {
	case x.faulted.Load():
		return ErrFault
	case x.awaiting:
		return fmt.Errorf("%w: the live nodes' vectors were not given", ErrMissingVector)
	}
	return ErrReleased
}

// LoadMapped reads a graph saved as head (WriteHead) and section
// (WriteSection), each exactly the bytes written. The head is read into
// memory; the section's sum is checked and what it holds is used where it
// lies, read only, for as long as the graph lives: hold (nil for bytes
// the garbage collector keeps) is the reference that keeps them, which
// the graph owns from now on, failing or not, and gives back on Release.
// A section not aligned for reading in place is copied (and hold given
// back at once). A graph damaged, cut short or of another version is
// ErrCorrupt.
//
// A graph of version 3 (what WriteHead writes) waits for its live nodes'
// vectors (AttachVectors) before it serves anything; one of version 2
// (its section holding them) is whole.
func LoadMapped(head, section []byte, hold Holder) (x *Index, err error) {
	defer func() {
		if err != nil && hold != nil {
			hold.Release()
		}
	}()
	if len(head) < headerBytes {
		return nil, fmt.Errorf("%w: header: %w", ErrCorrupt, io.ErrUnexpectedEOF)
	}
	ver := uint32(headVersion)
	if v := binary.LittleEndian.Uint32(head[len(magic):]); v == headVersionV2 || v == headVersionV3 {
		ver = v
	}
	body, err := checkHeaderVersion(head[:headerBytes], ver)
	if err != nil {
		return nil, err
	}
	if rest := uint64(len(head) - headerBytes); rest != body+4 {
		return nil, fmt.Errorf("%w: a head of %d bytes for a body of %d", ErrCorrupt, rest, body)
	}
	hdr, data := head[:headerBytes], head[headerBytes:]
	crc := crc32.Update(crc32.Checksum(hdr, castagnoli), castagnoli, data[:body])
	if crc != binary.LittleEndian.Uint32(data[body:]) {
		return nil, fmt.Errorf("%w: checksum", ErrCorrupt)
	}
	x, _, live, dead, err := readBodyV(&binReader{p: data[:body]}, ver)
	if err != nil {
		return nil, err
	}
	if err := x.placeSection(section, ver); err != nil {
		return nil, err
	}
	if uintptr(unsafe.Pointer(unsafe.SliceData(section)))%8 != 0 || !littleEndian {
		// Not where (or as) a uint32 or a float64 may be read: copied,
		// the mapping not kept.
		c := hugemem.Make[byte](len(section), len(section))
		copy(c, section)
		if !littleEndian {
			swapSection(c, x.sectionEights(ver))
		}
		section = c
		if hold != nil {
			hold.Release()
			hold = nil
		}
	}
	if ver == headVersionV2 {
		x.viewSection(section)
		err = x.checkMapped(live, dead)
	} else {
		x.viewSectionV3(section, ver == headVersion)
		err = x.checkMappedV3(live, dead)
	}
	if err != nil {
		return nil, err // hold released by the defer
	}
	if hold != nil {
		x.hold, x.own = hold, &ownRef{hold: hold}
		runtime.AddCleanup(x, (*ownRef).release, x.own)
	}
	x.primeVisited()
	return x, nil
}

// swapSection turns a section's numbers to this machine's order: eights
// 8-byte numbers, then 4-byte ones to the end.
func swapSection(c []byte, eights int) {
	for i := 0; i < 8*eights; i += 8 {
		slices.Reverse(c[i : i+8])
	}
	for i := 8 * eights; i+4 <= len(c); i += 4 {
		c[i], c[i+1], c[i+2], c[i+3] = c[i+3], c[i+2], c[i+1], c[i]
	}
}

// littleEndian is whether this machine stores a uint32 as a section does.
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// placeSection checks section's length and sum against the slots read,
// for a head of version ver.
func (x *Index) placeSection(section []byte, ver uint32) error {
	n := int64(len(x.ids))
	want := 4*n*int64(x.m0+1) + 4*n*int64(x.dim) + 4
	if ver != headVersionV2 {
		want = x.sectionLenV3(n, int64(x.dead), ver == headVersion)
	}
	if int64(len(section)) != want {
		return fmt.Errorf("%w: a section of %d bytes for %d slots, want %d", ErrCorrupt, len(section), n, want)
	}
	body := len(section) - 4
	if crc32.Checksum(section[:body], castagnoli) != binary.LittleEndian.Uint32(section[body:]) {
		return fmt.Errorf("%w: section checksum", ErrCorrupt)
	}
	return nil
}

// sectionEights is how many 8-byte numbers a section of version ver
// starts with: the inverse norms, and the places (version 4).
func (x *Index) sectionEights(ver uint32) int {
	n := 0
	if ver != headVersionV2 && x.cfg.Metric == Cosine {
		n += len(x.ids)
	}
	if ver == headVersion {
		n += len(x.ids)
	}
	return n
}

// viewSection makes a section of version 2's lists and vectors the mapped
// slots'.
func (x *Index) viewSection(section []byte) {
	n := len(x.ids)
	words := n * (x.m0 + 1)
	if n == 0 {
		return
	}
	x.nmap = uint32(n)
	x.ml0 = unsafe.Slice((*uint32)(unsafe.Pointer(&section[0])), words)
	x.mvecs = unsafe.Slice((*float32)(unsafe.Pointer(&section[4*words])), n*x.dim)
	x.cow = make([]uint32, n)
	x.l0 = nil
	x.vecs = nil
}

// checkMapped checks what check does, each level-0 count first (a list
// is sliced by it), and that every vector is finite. It only reads.
func (x *Index) checkMapped(live, dead uint32) error {
	if err := x.checkLists(live, dead); err != nil {
		return err
	}
	for s := range x.nmap {
		if !finite(x.vec(s)) {
			return fmt.Errorf("%w: slot %d vector not finite", ErrCorrupt, s)
		}
	}
	return nil
}

// checkLists checks what check does, each level-0 count first.
func (x *Index) checkLists(live, dead uint32) error {
	for s := range x.nmap {
		if c := x.list0(s)[0]; c > uint32(x.m0) {
			return fmt.Errorf("%w: slot %d has %d links at level 0", ErrCorrupt, s, c)
		}
	}
	return x.check(live, dead)
}
