package hnsw

import (
	"encoding/binary"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
)

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
