package store

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
)

// maxImageHead bounds the first frame of an image ReadImageHead takes in
// memory: images are written in frames of defaultImageChunk, and sixteen
// of them is more than any writer makes.
const maxImageHead = 16 * defaultImageChunk

// ReadImageHead reads the first bytes of an image from r — the file
// header and the first frame, whose checksum it checks — and says the
// position the image is at. It returns a reader that gives those bytes
// again and then the rest of r, so the whole image can be installed from
// it. A stream that is not a fenec tenant file, or does not start with
// an image, is refused (an error wrapping ErrBadImage) having read at most
// the header and one frame: nothing past the first bytes of a wrong file
// is taken.
func ReadImageHead(r io.Reader) (io.Reader, Position, error) {
	head := make([]byte, headerSize+frameHead)
	if _, err := io.ReadFull(r, head[:headerSize]); err != nil {
		return nil, Position{}, badHead("header cut short", err)
	}
	base, err := decodeHeader(head[:headerSize])
	if err != nil {
		return nil, Position{}, badHead(err.Error(), nil)
	}
	if _, err := io.ReadFull(r, head[headerSize:]); err != nil {
		return nil, Position{}, badHead("no frame after the header", err)
	}
	size := binary.LittleEndian.Uint32(head[headerSize:])
	if size < minPayload || size > maxImageHead {
		return nil, Position{}, badHead(fmt.Sprintf("first frame of %d bytes: not an image's", size), nil)
	}
	frame := make([]byte, frameHead+int(size))
	copy(frame, head[headerSize:])
	if _, err := io.ReadFull(r, frame[frameHead:]); err != nil {
		return nil, Position{}, badHead("first frame cut short", err)
	}
	rec, err := DecodeFrame(frame)
	if err != nil {
		return nil, Position{}, badHead(err.Error(), nil)
	}
	if !isImage(rec.Kind) || rec.First != base+1 || rec.Last != base {
		return nil, Position{}, badHead("it does not start with an image", nil)
	}
	pos, _, err := decodeImageHeader(rec.Body)
	if err != nil {
		return nil, Position{}, badHead(err.Error(), nil)
	}
	if pos.Seq != base {
		return nil, Position{}, badHead("image seq does not match the header", nil)
	}
	read := append(head[:headerSize:headerSize], frame...)
	return io.MultiReader(bytes.NewReader(read), r), pos, nil
}

// badHead is ReadImageHead's refusal: why; a read that failed other
// than by ending is the reader's error, not the image's.
func badHead(why string, err error) error {
	if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
		return fmt.Errorf("read image: %w", err)
	}
	return fmt.Errorf("%w: %s", ErrBadImage, why)
}
