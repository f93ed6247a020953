package store

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
)

// The file starts with a header: magic, format version, the seq the file's
// first record continues from (its base), and a CRC32C of those 20 bytes.
// Frames follow: u32 length | u32 CRC32C(payload) | payload, little endian,
// where payload = kind byte | uvarint first | uvarint last | body.

const (
	headerSize    = 24
	frameHead     = 8
	formatVersion = 1
	// maxPayload is the most a frame's u32 length can say.
	maxPayload = math.MaxUint32
	// minPayload is a kind byte and two one-byte uvarints.
	minPayload = 3
)

var magic = [8]byte{0x8a, 'F', 'E', 'N', 'E', 'C', '\r', '\n'}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func checksum(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// encodeHeader returns the file header for a file whose first record
// continues from seq base.
func encodeHeader(base uint64) []byte {
	h := make([]byte, headerSize)
	copy(h, magic[:])
	binary.LittleEndian.PutUint32(h[8:], formatVersion)
	binary.LittleEndian.PutUint64(h[12:], base)
	binary.LittleEndian.PutUint32(h[20:], checksum(h[:20]))
	return h
}

// decodeHeader checks a file header and returns its base seq.
func decodeHeader(h []byte) (uint64, error) {
	if len(h) < headerSize {
		return 0, errors.New("header cut short")
	}
	if [8]byte(h[:8]) != magic {
		return 0, errors.New("not a fenec tenant file")
	}
	if binary.LittleEndian.Uint32(h[20:]) != checksum(h[:20]) {
		return 0, errors.New("header checksum does not match")
	}
	if v := binary.LittleEndian.Uint32(h[8:]); v != formatVersion {
		return 0, errors.New("unknown format version")
	}
	return binary.LittleEndian.Uint64(h[12:]), nil
}

// knownKind reports whether k may appear in a file.
func knownKind(k Kind) bool {
	return (k >= KindImage && k <= KindBound) || k >= KindEngine
}

func isImage(k Kind) bool { return k == KindImage || k == KindImageEnd }

// payloadPrefix is the kind and seqs that start a payload.
func payloadPrefix(dst []byte, kind Kind, first, last uint64) []byte {
	dst = append(dst, byte(kind))
	dst = binary.AppendUvarint(dst, first)
	return binary.AppendUvarint(dst, last)
}

// frameSize is the framed size of a record.
func frameSize(kind Kind, first, last uint64, bodyLen int) int64 {
	return int64(frameHead + 1 + uvarintLen(first) + uvarintLen(last) + bodyLen)
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// encodeFrame builds one whole frame.
func encodeFrame(kind Kind, first, last uint64, body []byte) ([]byte, error) {
	size := frameSize(kind, first, last, len(body))
	if size-frameHead > maxPayload {
		return nil, ErrTooLarge
	}
	f := make([]byte, frameHead, size)
	f = payloadPrefix(f, kind, first, last)
	f = append(f, body...)
	binary.LittleEndian.PutUint32(f[0:], uint32(len(f)-frameHead))
	binary.LittleEndian.PutUint32(f[4:], checksum(f[frameHead:]))
	return f, nil
}

// decodePayload splits a payload (CRC already checked) into a record whose
// Body aliases p.
func decodePayload(p []byte) (Record, error) {
	if len(p) < minPayload {
		return Record{}, errors.New("payload too short")
	}
	rec := Record{Kind: Kind(p[0])}
	if !knownKind(rec.Kind) {
		return Record{}, errors.New("unknown record kind")
	}
	first, n := binary.Uvarint(p[1:])
	if n <= 0 {
		return Record{}, errors.New("bad first seq")
	}
	last, m := binary.Uvarint(p[1+n:])
	if m <= 0 {
		return Record{}, errors.New("bad last seq")
	}
	if first == 0 || last+1 < first {
		return Record{}, errors.New("seq range runs backwards")
	}
	rec.First, rec.Last = first, last
	rec.Body = p[1+n+m:]
	switch {
	case rec.Kind == KindFork && len(rec.Body) != 8:
		return Record{}, errors.New("fork record is not 8 bytes")
	case rec.Kind < KindEngine && first != last+1:
		return Record{}, errors.New("store record holds writes")
	case rec.Kind == KindSpill:
		if _, n := binary.Uvarint(rec.Body); n <= 0 {
			return Record{}, errors.New("spill without its index")
		}
	}
	return rec, nil
}

// DecodeFrame checks a whole frame (as ReadFrom gives it) and decodes it;
// Body and Frame alias frame. It returns an error wrapping ErrBadRecord.
func DecodeFrame(frame []byte) (Record, error) {
	if len(frame) < frameHead+minPayload {
		return Record{}, errBad("frame too short")
	}
	if int64(binary.LittleEndian.Uint32(frame)) != int64(len(frame)-frameHead) {
		return Record{}, errBad("length does not match")
	}
	p := frame[frameHead:]
	if binary.LittleEndian.Uint32(frame[4:]) != checksum(p) {
		return Record{}, errBad("checksum does not match")
	}
	rec, err := decodePayload(p)
	if err != nil {
		return Record{}, errBad(err.Error())
	}
	rec.Frame = frame
	return rec, nil
}

type badError struct {
	why  string
	base error
}

func (e *badError) Error() string { return e.base.Error() + ": " + e.why }
func (e *badError) Unwrap() error { return e.base }

func errBad(why string) error { return &badError{why: why, base: ErrBadRecord} }

// forkHistory reads a fork record's history.
func forkHistory(body []byte) uint64 { return binary.LittleEndian.Uint64(body) }

func forkBody(h uint64) []byte { return binary.LittleEndian.AppendUint64(nil, h) }

// spillPiece splits a spill record's body into its index and piece.
func spillPiece(body []byte) (uint64, []byte) {
	i, n := binary.Uvarint(body)
	return i, body[n:]
}

// joinPieces is a spilled block's whole body: its spills' pieces, then
// the body of its own record.
func joinPieces(pieces [][]byte, last []byte) []byte {
	n := len(last)
	for _, p := range pieces {
		n += len(p)
	}
	out := make([]byte, 0, n)
	for _, p := range pieces {
		out = append(out, p...)
	}
	return append(out, last...)
}
