package engine

import (
	"encoding/binary"
	"runtime"
	"unsafe"
)

// A document's vectors: whether it holds one, a copy of it, and a view
// of it where the document keeps it (what a graph served from the mapped
// file reads: each vector held once).

// hasVector reports whether value i of d is a vector.
func (d *doc) hasVector(i int) bool {
	b := d.raw
	for range i {
		k := skipValue(b, 0)
		if k < 0 {
			return false
		}
		b = b[k:]
	}
	return len(b) > 0 && b[0] == vVector
}

// vectorInto decodes d's i-th value, a vector of len(dst) numbers, into
// dst; false if it is not one.
func (d *doc) vectorInto(i int, dst []float32) bool {
	b := d.raw
	for range i {
		k := skipValue(b, 0)
		if k < 0 {
			return false
		}
		b = b[k:]
	}
	if len(b) == 0 || b[0] != vVector {
		return false
	}
	n, k := binary.Uvarint(b[1:])
	if k <= 0 || n != uint64(len(dst)) || uint64(len(b)-1-k) < 4*n {
		return false
	}
	getFloat32s(dst, b[1+k:])
	return true
}

// vectorView returns d's i-th value, a vector of dim numbers, where d
// keeps it: a view of its encoded bytes, read only, which stay as they
// are while anything refers to them (a stored document never changes).
// Where this machine cannot read the numbers in place (another byte
// order, or a misaligned float32 on a machine that faults on one) it
// returns a copy. False if the value is no vector of dim numbers.
func (d *doc) vectorView(i, dim int) ([]float32, bool) {
	at, ok := d.vectorAt(i, dim)
	if !ok {
		return nil, false
	}
	p := d.raw[at : at+4*dim]
	if littleEndian && (unalignedReads || uintptr(unsafe.Pointer(&p[0]))%4 == 0) {
		return unsafe.Slice((*float32)(unsafe.Pointer(&p[0])), dim), true
	}
	v := make([]float32, dim)
	getFloat32s(v, p)
	return v, true
}

// vectorAt is where in d.raw the numbers of d's i-th value, a vector of
// dim numbers, start; false if it is no such vector.
func (d *doc) vectorAt(i, dim int) (int, bool) {
	b := d.raw
	for range i {
		k := skipValue(b, 0)
		if k < 0 {
			return 0, false
		}
		b = b[k:]
	}
	if dim <= 0 || len(b) == 0 || b[0] != vVector {
		return 0, false
	}
	n, k := binary.Uvarint(b[1:])
	if k <= 0 || n != uint64(dim) || uint64(len(b)-1-k) < 4*n {
		return 0, false
	}
	return len(d.raw) - len(b) + 1 + k, true
}

// unalignedReads is whether this machine reads a float32 at any address
// (a vector's numbers lie where its encoding puts them).
const unalignedReads = runtime.GOARCH == "amd64" || runtime.GOARCH == "arm64" || runtime.GOARCH == "386"
