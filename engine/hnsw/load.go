package hnsw

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
)

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
