package store

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/fenec-go/fenec/engine/internal/fmap"
)

// A section is bytes of an image's state the engine reads in place from
// the mapped file rather than decoding them (an HNSW graph's level-0
// lists and vectors). The image writer gives each a KindImage frame of its
// own, so its bytes lie together in the file, and starts them at a
// multiple of SectionAlign from the start of the file (so of the
// mapping): the frame's body is a uvarint pad, pad zero bytes, then the
// section. The engine's state reads the same way with or without
// alignment (a writer that is not a SectionWriter writes pad 0 inline),
// and the frame's checksum covers the pad and the section as any other.

// SectionAlign is where a section starts: a multiple of it in the file.
const SectionAlign = 64

// A SectionWriter is what the state writer of a checkpoint writes to: it
// can write a section (WriteSection) as well as the state's other bytes.
type SectionWriter interface {
	io.Writer
	// WriteSection writes the pad and the n bytes write writes, which it
	// calls twice, and which must write the same n bytes each time (the
	// first to sum them: a frame's checksum comes before its body). It
	// returns the offset in the file where the section starts.
	WriteSection(n int64, write func(io.Writer) error) (int64, error)
}

// A MappedState is the state reader Image is given when the store replays
// a mapped file.
type MappedState interface {
	io.Reader
	// Span returns the n bytes of the state that start back bytes before
	// those the next Read gives (back: what the caller's buffer holds
	// still), as a view of the mapped file, and a reference on the
	// mapping for the caller to release; false if they do not lie in one
	// frame's body (nothing taken then). The next Read gives what follows
	// them, unless the caller's buffer held them all.
	Span(back, n int) ([]byte, *fmap.Region, bool)
}

// WriteSection implements SectionWriter.
func (iw *imageWriter) WriteSection(n int64, write func(io.Writer) error) (int64, error) {
	if iw.err != nil {
		return 0, iw.err
	}
	if len(iw.buf) > 0 {
		if err := iw.emit(KindImage); err != nil {
			return 0, err
		}
	}
	var pre [frameHead + 1 + 2*10]byte
	p := payloadPrefix(pre[:frameHead], KindImage, iw.seq+1, iw.seq)
	bodyAt := iw.at + int64(len(p))
	pad := (SectionAlign - (bodyAt+1)%SectionAlign) % SectionAlign
	lead := make([]byte, 1+pad)
	lead[0] = byte(pad) // under 128: one byte of uvarint
	plen := int64(len(p)-frameHead) + int64(len(lead)) + n
	if plen > maxPayload {
		iw.err = ErrTooLarge
		return 0, iw.err
	}
	h := crc32.New(castagnoli)
	h.Write(p[frameHead:])
	h.Write(lead)
	if err := writeExactly(h, n, write); err != nil {
		iw.err = err
		return 0, err
	}
	binary.LittleEndian.PutUint32(p[0:], uint32(plen))
	binary.LittleEndian.PutUint32(p[4:], h.Sum32())
	if _, err := iw.w.Write(p); err != nil {
		iw.err = err
		return 0, err
	}
	if _, err := iw.w.Write(lead); err != nil {
		iw.err = err
		return 0, err
	}
	if err := writeExactly(iw.w, n, write); err != nil {
		iw.err = err
		return 0, err
	}
	size := int64(len(p)+len(lead)) + n
	iw.n += size
	iw.at += size
	return bodyAt + 1 + pad, nil
}

// writeExactly runs write on w and checks it wrote n bytes.
func writeExactly(w io.Writer, n int64, write func(io.Writer) error) error {
	cw := &countingWriter{w: w}
	if err := write(cw); err != nil {
		return err
	}
	if cw.n != n {
		return fmt.Errorf("section of %d bytes written as %d", n, cw.n)
	}
	return nil
}

// stateReader reads an image's state from the frames' bodies, views of a
// mapped file, and can hand out spans of it (MappedState).
type stateReader struct {
	bodies [][]byte
	i      int // the body being read: one Read reads from one body only
	off    int // bytes read of bodies[i]
	reg    *fmap.Region
}

func (r *stateReader) Read(p []byte) (int, error) {
	for r.i < len(r.bodies) && r.off == len(r.bodies[r.i]) {
		r.i, r.off = r.i+1, 0
	}
	if r.i == len(r.bodies) {
		return 0, io.EOF
	}
	n := copy(p, r.bodies[r.i][r.off:])
	r.off += n
	return n, nil
}

// Span implements MappedState. A caller's buffer filled by Read holds
// bytes of one body, the last read, so back counts back into it.
func (r *stateReader) Span(back, n int) ([]byte, *fmap.Region, bool) {
	if back == 0 {
		for r.i < len(r.bodies) && r.off == len(r.bodies[r.i]) {
			r.i, r.off = r.i+1, 0
		}
	}
	if r.reg == nil || r.i >= len(r.bodies) || back < 0 || n < 0 {
		return nil, nil, false
	}
	b, start := r.bodies[r.i], r.off-back
	if start < 0 || start+n > len(b) || !r.reg.Acquire() {
		return nil, nil, false
	}
	r.off = max(r.off, start+n)
	return b[start : start+n : start+n], r.reg, true
}

// Map maps the Log's current file read-only, for the engine to read in
// place what the last checkpoint wrote (the offsets WriteSection gave).
// The caller releases the Region. The file is never shortened while
// mapped: checkpoints write a new file and rename it over.
func (l *Log) Map() (*fmap.Region, error) {
	l.mu.Lock()
	if err := l.usableLocked(); err != nil {
		l.mu.Unlock()
		return nil, err
	}
	ref, size := l.file.acquire(), l.size
	l.mu.Unlock()
	defer ref.release()
	r, err := fmap.Map(ref.f, size)
	if err != nil {
		return nil, err
	}
	return r, nil
}
