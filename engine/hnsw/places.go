package hnsw

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"
)

// ErrNoPlaces is AttachPlaces' answer for a graph whose section does not
// say where each live vector lies (version 3, or written without them),
// or on a machine that cannot read a vector where it lies: the caller
// gives it its vectors by id instead (AttachVectors).
var ErrNoPlaces = errors.New("hnsw: the section does not place every vector")

// unalignedReads is whether this machine reads a float32 at any address
// (a vector's numbers lie where the document's encoding puts them).
const unalignedReads = runtime.GOARCH == "amd64" || runtime.GOARCH == "arm64" || runtime.GOARCH == "386"

// AttachPlaces gives a graph loaded from a head of version 4 its live
// nodes' vectors where its section places them in docs, the bytes of the
// documents they were written with (the same image's documents section),
// which must stay as they are while the graph lives. It reads the places
// and nothing of docs: an open attaches the graph without faulting in a
// document. What it cannot check there (that a place holds its node's
// document's vector, finite, of the norm the section says) the image's
// checksums stand for: the section and the documents were written
// together, and each is checked before it is trusted. A place past docs
// is ErrCorrupt; a section without places, ErrNoPlaces (nothing taken
// either way). A graph that waits for no vector takes none.
func (x *Index) AttachPlaces(docs []byte) error {
	if !x.awaiting {
		return nil
	}
	if x.mplace == nil || !littleEndian {
		return ErrNoPlaces
	}
	need := uint64(4 * x.dim)
	for s := range x.nmap {
		if x.state[s] != slotLive {
			continue
		}
		p := x.mplace[s]
		switch {
		case p == 0:
			return ErrNoPlaces
		case p > uint64(len(docs)) || uint64(len(docs))-p < need:
			return fmt.Errorf("%w: the vector of id %d placed at %d, past %d bytes", ErrCorrupt, x.ids[s], p, len(docs))
		case !unalignedReads && p%4 != 0:
			return ErrNoPlaces
		}
	}
	base := unsafe.Pointer(unsafe.SliceData(docs))
	for s := range x.nmap {
		if x.state[s] != slotLive {
			continue
		}
		x.mv[s].v = (*float32)(unsafe.Add(base, x.mplace[s]))
		if x.minv != nil {
			x.mv[s].inv = x.minv[s]
		}
	}
	x.awaiting = false
	return nil
}
