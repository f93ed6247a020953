package store

import (
	"bufio"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"

	"github.com/fenec-go/fenec/engine/internal/fmap"
)

// An image is one or more frames at one seq (First = seq+1, Last = seq):
// KindImage frames that continue in the next, then one KindImageEnd. The
// first frame's body starts with the image header (seq, lineage); the rest
// of the bodies, concatenated, is the engine's state. The state is cut into
// frames as it is written, so it is never held whole in memory.

// defaultImageChunk is the most state one image frame carries.
const defaultImageChunk = 1 << 20

// encodeImageHeader appends seq and lineage.
func encodeImageHeader(dst []byte, pos Position) []byte {
	dst = binary.AppendUvarint(dst, pos.Seq)
	dst = binary.AppendUvarint(dst, uint64(len(pos.Lineage)))
	for _, e := range pos.Lineage {
		dst = binary.LittleEndian.AppendUint64(dst, e.History)
		dst = binary.AppendUvarint(dst, e.From)
	}
	return dst
}

// decodeImageHeader reads an image header from the start of the first
// frame's body and returns the position and the state bytes after it.
func decodeImageHeader(b []byte) (Position, []byte, error) {
	var pos Position
	seq, n := binary.Uvarint(b)
	if n <= 0 {
		return pos, nil, errors.New("image header: bad seq")
	}
	b = b[n:]
	count, n := binary.Uvarint(b)
	if n <= 0 || count > uint64(len(b)) {
		return pos, nil, errors.New("image header: bad lineage length")
	}
	b = b[n:]
	pos.Seq = seq
	pos.Lineage = make([]LineageEntry, 0, count)
	for range count {
		if len(b) < 8 {
			return pos, nil, errors.New("image header: lineage cut short")
		}
		h := binary.LittleEndian.Uint64(b)
		from, n := binary.Uvarint(b[8:])
		if n <= 0 {
			return pos, nil, errors.New("image header: bad lineage seq")
		}
		if from > seq || (len(pos.Lineage) > 0 && from < pos.Lineage[len(pos.Lineage)-1].From) {
			return pos, nil, errors.New("image header: lineage out of order")
		}
		pos.Lineage = append(pos.Lineage, LineageEntry{History: h, From: from})
		b = b[8+n:]
	}
	if len(pos.Lineage) == 0 {
		return pos, nil, errors.New("image header: no lineage")
	}
	return pos, b, nil
}

// imageWriter cuts what is written to it into image frames on w.
type imageWriter struct {
	w     io.Writer
	seq   uint64
	chunk int
	buf   []byte
	n     int64 // bytes written to w
	at    int64 // where in the file the next byte written to w lands
	err   error
}

// newImageWriter starts an image written to w, whose first byte lands at
// offset at of the file.
func newImageWriter(w io.Writer, pos Position, chunk int, at int64) *imageWriter {
	if chunk <= 0 {
		chunk = defaultImageChunk
	}
	iw := &imageWriter{w: w, seq: pos.Seq, chunk: chunk, at: at}
	iw.buf = encodeImageHeader(make([]byte, 0, chunk), pos)
	return iw
}

func (iw *imageWriter) Write(p []byte) (int, error) {
	if iw.err != nil {
		return 0, iw.err
	}
	written := 0
	for len(p) > 0 {
		room := iw.chunk - len(iw.buf)
		if room <= 0 {
			if err := iw.emit(KindImage); err != nil {
				return written, err
			}
			continue
		}
		k := min(room, len(p))
		iw.buf = append(iw.buf, p[:k]...)
		p = p[k:]
		written += k
	}
	return written, nil
}

// close writes the last frame.
func (iw *imageWriter) close() error {
	if iw.err != nil {
		return iw.err
	}
	return iw.emit(KindImageEnd)
}

func (iw *imageWriter) emit(kind Kind) error {
	var pre [frameHead + 1 + 2*binary.MaxVarintLen64]byte
	p := payloadPrefix(pre[:frameHead], kind, iw.seq+1, iw.seq)
	plen := len(p) - frameHead + len(iw.buf)
	if plen > maxPayload {
		iw.err = ErrTooLarge
		return iw.err
	}
	crc := crc32.Update(checksum(p[frameHead:]), castagnoli, iw.buf)
	binary.LittleEndian.PutUint32(p[0:], uint32(plen))
	binary.LittleEndian.PutUint32(p[4:], crc)
	if _, err := iw.w.Write(p); err != nil {
		iw.err = err
		return err
	}
	if _, err := iw.w.Write(iw.buf); err != nil {
		iw.err = err
		return err
	}
	iw.n += int64(len(p) + len(iw.buf))
	iw.at += int64(len(p) + len(iw.buf))
	iw.buf = iw.buf[:0]
	return nil
}

// writeImageFrames streams one image at pos to w, starting at offset at
// of the file, and returns its bytes.
func writeImageFrames(w io.Writer, pos Position, chunk int, at int64, writeState WriteStateFunc) (int64, error) {
	iw := newImageWriter(w, pos, chunk, at)
	if err := writeState(iw); err != nil {
		return iw.n, err
	}
	if err := iw.close(); err != nil {
		return iw.n, err
	}
	return iw.n, nil
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

func writeImage(w io.Writer, pos Position, chunk int, writeState WriteStateFunc) (int64, error) {
	if len(pos.Lineage) == 0 {
		return 0, errors.New("write image: position has no lineage")
	}
	cw := &countingWriter{w: w}
	bw := bufio.NewWriterSize(cw, 256<<10)
	if _, err := bw.Write(encodeHeader(pos.Seq)); err != nil {
		return cw.n, err
	}
	if _, err := writeImageFrames(bw, pos, chunk, headerSize, writeState); err != nil {
		return cw.n, err
	}
	if err := bw.Flush(); err != nil {
		return cw.n, err
	}
	return cw.n, nil
}

// imageReader reads the state of an image whose frames' bodies are given,
// views of the mapping reg (nil: not mapped, no spans).
func imageReader(bodies [][]byte, reg *fmap.Region) *stateReader {
	return &stateReader{bodies: bodies, reg: reg}
}
