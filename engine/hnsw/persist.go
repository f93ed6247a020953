package hnsw

import (
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"runtime/debug"
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
	buf := make([]float32, x.dim) // a tombstone's vector, normalised (mapped.go)
	for s := range x.ids {
		x.writeSlot(bw, uint32(s), remap, ver, buf)
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

func (x *Index) writeSlot(bw *binWriter, s uint32, remap []uint32, ver uint32, buf []float32) {
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
		for _, f := range x.unit(s, buf) {
			bw.u32(math.Float32bits(f))
		}
	}
}

// firstSaved is the first level whose lists a graph of version ver
// carries in its body: level 0's are in the section from headVersion on.
func firstSaved(ver uint32) int {
	if ver != version {
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

// SavedLen is the number of bytes WriteTo would write now (0 if it would
// fail).
func (x *Index) SavedLen() int64 {
	pcg, err := x.pcg.MarshalBinary()
	if err != nil {
		return 0
	}
	return int64(headerBytes) + x.bodyLenV(len(pcg), version) + 4
}
