package hnsw

import (
	"encoding/binary"
	"fmt"
	"io"
	"iter"
	"math"
	"runtime/debug"
	"unsafe"
)

// A graph saved as a head of version 4 (or 3) keeps no live node's
// vector: each is its document's, held once, which the graph reads where
// the document keeps it (AttachPlaces, AttachVectors). Its section
// (WriteSection) holds the rest, numbered as the head numbers the slots:
//
//	norms    slots × f64 (Cosine only): a live node's inverse norm, 1/‖v‖
//	         of its document's v (1 for a zero vector); 1 for a tombstone
//	places   slots × u64 (version 4 only): where a live node's vector's
//	         numbers start among its documents' bytes (0: not said; 0
//	         for a tombstone)
//	lists    slots × (m0+1) u32: count, then m0 neighbours (unused ones 0)
//	tombs    tombstones × dim f32, in slot order, as the graph keeps them
//	         (normalised for Cosine: their documents are gone)
//	trailer  CRC-32C u32 of all before it
//
// For Cosine the graph measures a document's vector v scaled by its
// inverse norm, float32(float64(v[i])*inv) for each number, which is, to
// the bit, the unit vector the graph made of v when it was put
// (scaleUnit): distTo scales it as it sums (dotScaled), unit into a
// buffer. Every answer, score and link is the same as the graph's kept in
// memory gives.

// sectionLenV3 is the length of a section of version 3 of n slots, dead
// of them tombstones, or of version 4 (places) with its places.
func (x *Index) sectionLenV3(n, dead int64, places bool) int64 {
	b := 4*n*int64(x.m0+1) + 4*dead*int64(x.dim) + 4
	if x.cfg.Metric == Cosine {
		b += 8 * n
	}
	if places {
		b += 8 * n
	}
	return b
}

// SectionLen is the number of bytes WriteSection writes now.
func (x *Index) SectionLen() int64 { return x.sectionLenV3(x.sectionSlots(), int64(x.dead), true) }

// WriteSection writes every slot's level-0 list, numbered as WriteHead
// numbers them, the live nodes' inverse norms (Cosine) and the
// tombstones' vectors, and their sum. vector gives each live node's
// vector as its document holds it (read only, not kept): that vector,
// scaled by its norm, must be the graph's to the bit, or the section is
// refused (the document and the graph disagree: a graph that read it
// back would not answer as this one). It returns the bytes written.
func (x *Index) WriteSection(w io.Writer, vector func(id int64) ([]float32, bool)) (int64, error) {
	return x.WriteSectionAt(w, vector, nil)
}

// WriteSectionAt is WriteSection that writes, for each live node, where
// its vector's numbers lie among the documents' bytes the graph will read
// them from (place: counted from their start; 0, or place nil, says
// nothing, and AttachPlaces then refuses the graph, which AttachVectors
// takes instead). A graph given its places attaches to its vectors
// without reading a document (AttachPlaces).
func (x *Index) WriteSectionAt(w io.Writer, vector func(id int64) ([]float32, bool), place func(id int64) (uint64, bool)) (_ int64, err error) {
	if !x.enter() {
		return 0, x.gone()
	}
	defer x.leave()
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer x.guard(&err)
	remap, n := x.dense()
	bw := newBinWriter(w)
	unit, kept := make([]float32, x.dim), make([]float32, x.dim)
	for s := range x.ids {
		st := x.state[s]
		if st == slotFree {
			continue
		}
		inv := 1.0
		if st == slotLive {
			v, ok := vector(x.ids[s])
			if !ok || len(v) != x.dim {
				return bw.n, fmt.Errorf("write graph section: %w: id %d", ErrMissingVector, x.ids[s])
			}
			if x.cfg.Metric == Cosine {
				inv = invNorm(sumSquares(v))
			}
			scaleBy(unit, v, inv)
			if !bitsEqual(unit, x.unit(uint32(s), kept)) {
				return bw.n, fmt.Errorf("write graph section: the vector of id %d is not its document's", x.ids[s])
			}
		}
		if x.cfg.Metric == Cosine {
			bw.u64(math.Float64bits(inv))
		}
	}
	for s := range x.ids {
		if x.state[s] == slotFree {
			continue
		}
		var at uint64
		if x.state[s] == slotLive && place != nil {
			if p, ok := place(x.ids[s]); ok {
				at = p
			}
		}
		bw.u64(at)
	}
	words := make([]uint32, x.m0+1)
	raw := make([]byte, 4*max(x.m0+1, x.dim))
	for s := range x.ids {
		if x.state[s] == slotFree {
			continue
		}
		clear(words)
		ns := x.links(uint32(s), 0)
		words[0] = uint32(len(ns))
		for i, t := range ns {
			words[1+i] = remap[t]
		}
		for i, v := range words {
			binary.LittleEndian.PutUint32(raw[4*i:], v)
		}
		bw.bytes(raw[:4*len(words)])
	}
	for s := range x.ids {
		if x.state[s] != slotDead {
			continue
		}
		for i, f := range x.unit(uint32(s), unit) {
			binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(f))
		}
		bw.bytes(raw[:4*x.dim])
	}
	bw.u32(bw.sum())
	bw.spill()
	if bw.err != nil {
		return bw.n, fmt.Errorf("write graph section: %w", bw.err)
	}
	if want := x.sectionLenV3(int64(n), int64(x.dead), true); bw.n != want {
		return bw.n, fmt.Errorf("write graph section: wrote %d bytes, want %d", bw.n, want)
	}
	return bw.n, nil
}

// bitsEqual reports whether a and b hold the same numbers, bit for bit.
func bitsEqual(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

// viewSectionV3 makes a section of version 3's (or, with places, 4's)
// norms, places, lists and tombstones' vectors the mapped slots'; the
// live ones' vectors come with AttachPlaces or AttachVectors.
func (x *Index) viewSectionV3(section []byte, places bool) {
	n := len(x.ids)
	if n == 0 {
		return
	}
	off := 0
	if x.cfg.Metric == Cosine {
		x.minv = unsafe.Slice((*float64)(unsafe.Pointer(&section[0])), n)
		off = 8 * n
	}
	if places {
		x.mplace = unsafe.Slice((*uint64)(unsafe.Pointer(&section[off])), n)
		off += 8 * n
	}
	words := n * (x.m0 + 1)
	x.nmap = uint32(n)
	x.ml0 = unsafe.Slice((*uint32)(unsafe.Pointer(&section[off])), words)
	off += 4 * words
	if x.dead > 0 {
		x.mvecs = unsafe.Slice((*float32)(unsafe.Pointer(&section[off])), x.dead*x.dim)
	}
	x.mv = make([]docVec, n)
	t := 0
	for s := range n {
		x.mv[s].inv = 1
		if x.state[s] == slotDead {
			x.mv[s].v = &x.mvecs[t*x.dim]
			t++
		}
	}
	x.scaled = x.minv != nil
	x.cow = make([]uint32, n)
	x.l0 = nil
	x.vecs = nil
	x.awaiting = x.live > 0
}

// checkMappedV3 checks what checkMapped does of a section of version 3:
// the lists, the tombstones' vectors finite and their norms 1, and every
// live node's norm a number (its vector is checked as it is given).
func (x *Index) checkMappedV3(live, dead uint32) error {
	if err := x.checkLists(live, dead); err != nil {
		return err
	}
	for s := range x.nmap {
		switch {
		case x.state[s] == slotDead && !finite(x.vec(s)):
			return fmt.Errorf("%w: slot %d vector not finite", ErrCorrupt, s)
		case x.minv == nil:
		case x.state[s] == slotDead && x.minv[s] != 1,
			x.state[s] == slotLive && !(x.minv[s] > 0 && x.minv[s] <= math.MaxFloat64):
			return fmt.Errorf("%w: slot %d inverse norm %v", ErrCorrupt, s, x.minv[s])
		}
	}
	return nil
}

// AttachVectors gives a graph loaded from a head of version 3 its live
// nodes' vectors: vectors yields ids with their vectors, as their
// documents hold them, and the graph reads each where it lies from then
// on, read only — it must never change while the graph lives (a stored
// document never does; the graph's reference keeps it). Ids the graph
// has no live mapped node for are passed over. A vector of another
// length, not finite, or not the one the section's norm was taken of is
// ErrCorrupt; a live node given none is ErrMissingVector; either way the
// graph serves nothing, and the caller rebuilds it. A graph that waits
// for no vector (of version 2, or kept in memory) takes none.
func (x *Index) AttachVectors(vectors iter.Seq2[int64, []float32]) error {
	if !x.awaiting {
		return nil
	}
	n := 0
	for id, v := range vectors {
		s, ok := x.slotOf[id]
		if !ok || s >= x.nmap || x.mv[s].v != nil {
			continue
		}
		if len(v) != x.dim {
			return fmt.Errorf("%w: the vector of id %d has %d numbers, want %d", ErrCorrupt, id, len(v), x.dim)
		}
		ss := sumSquares(v)
		if math.IsNaN(ss) || math.IsInf(ss, 0) {
			return fmt.Errorf("%w: the vector of id %d is not finite", ErrCorrupt, id)
		}
		if x.minv != nil && invNorm(ss) != x.minv[s] {
			return fmt.Errorf("%w: the vector of id %d is not the one its graph was saved with", ErrCorrupt, id)
		}
		x.mv[s].v = unsafe.SliceData(v)
		if x.minv != nil {
			x.mv[s].inv = x.minv[s]
		}
		n++
	}
	if n != x.live {
		for s := range x.nmap {
			if x.state[s] == slotLive && x.mv[s].v == nil {
				return fmt.Errorf("%w: id %d", ErrMissingVector, x.ids[s])
			}
		}
	}
	x.awaiting = false
	return nil
}

// unit returns slot s's vector as the graph measures it: a document's
// vector (Cosine) scaled by its inverse norm into buf (dim numbers), any
// other a view of the vector as kept.
func (x *Index) unit(s uint32, buf []float32) []float32 {
	if s < x.nmap && x.scaled {
		scaleBy(buf, x.vec(s), x.mv[s].inv)
		return buf[:x.dim]
	}
	return x.vec(s)
}

// distTo is the graph's distance from q to slot s's vector as the graph
// measures it (unit), scaled as it is summed rather than first.
func (x *Index) distTo(q []float32, s uint32) float32 {
	if s < x.nmap && x.scaled {
		e := x.mv[s] // the vector's place and its norm: one read
		return -dotScaled(q, unsafe.Slice(e.v, x.dim), e.inv)
	}
	return x.dist(q, x.vec(s))
}

// docVec is where a mapped slot's vector lies and, for a document's
// vector of a Cosine graph, its inverse norm (else 1): kept side by side
// so that a distance reads both at once.
type docVec struct {
	v   *float32
	inv float64
}

// ubuf is the i-th (0 or 1) of two buffers of dim numbers a write
// normalises vectors into (unit); only writes use them, and writes are
// never concurrent with anything on an Index.
func (x *Index) ubuf(i int) []float32 {
	if x.scratch2 == nil {
		x.scratch2 = make([]float32, 2*x.dim)
	}
	return x.scratch2[i*x.dim : (i+1)*x.dim]
}

// slotAt is a slot and where its vector lies (a document's, in a graph
// that reads them: its place and norm read ahead; else nil).
type slotAt struct {
	slot uint32
	at   docVec
}

// place returns slot s with where its vector lies read now: a walk reads
// the places of a node's neighbours together, before it measures any, so
// that their reads overlap rather than each wait on the one before.
func (x *Index) place(s uint32) slotAt {
	if s < x.nmap && x.scaled {
		return slotAt{slot: s, at: x.mv[s]}
	}
	return slotAt{slot: s}
}

// distToAt is distTo of a slot placed (place).
func (x *Index) distToAt(q []float32, p slotAt) float32 {
	if p.at.v != nil {
		return -dotScaled(q, unsafe.Slice(p.at.v, x.dim), p.at.inv)
	}
	return x.distTo(q, p.slot)
}
