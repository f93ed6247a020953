package store

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// An image being installed is decoded as it arrives: its frames are read
// off the stream as the side file takes the same bytes, each frame's
// checksum checked before its body goes on, and the bodies given to the
// replayer as one state stream. The whole file is scanned again once it is
// in, for the Log's index: the image's frames are trusted then (their
// checksums were checked as they came, in the very bytes the file took),
// and only what follows the image is checked. A file that does not start
// with an image was not decoded as it came, and is checked whole.

// errNotStreamed: the file does not start with an image; nothing was
// given to the replayer, and it is replayed from the file once in.
var errNotStreamed = errors.New("the file does not start with an image")

// streamImage reads the header and the leading image off r, giving the
// image to h. It returns errNotStreamed, having called nothing, if the
// first frame is no image. It reads no further than the image's end.
func streamImage(r *bufio.Reader, h Replayer) error {
	var head [headerSize]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return fmt.Errorf("header: %w", err)
	}
	if _, err := decodeHeader(head[:]); err != nil {
		return err
	}
	sb := &streamBodies{r: r}
	kind, err := sb.peekKind()
	if err != nil {
		return err
	}
	if !isImage(kind) {
		return errNotStreamed
	}
	if err := sb.next(); err != nil {
		return err
	}
	pos, state, err := decodeImageHeader(sb.body)
	if err != nil {
		return err
	}
	sb.body = state
	if err := h.Image(pos.Seq, sb); err != nil {
		return fmt.Errorf("image: %w", err)
	}
	if !sb.done || len(sb.body) > 0 {
		return errors.New("image: state ends before its last frame")
	}
	return nil
}

// streamBodies reads an image's frames off a stream and reads as their
// bodies one after the other, up to the image's end frame.
type streamBodies struct {
	r    *bufio.Reader
	buf  bytes.Buffer // the current frame's payload
	body []byte       // what is left of its body
	done bool         // the end frame was read
}

// peekKind looks at the next frame's kind without reading it.
func (s *streamBodies) peekKind() (Kind, error) {
	b, err := s.r.Peek(frameHead + 1)
	if err != nil {
		return 0, fmt.Errorf("first frame: %w", err)
	}
	return Kind(b[frameHead]), nil
}

// next reads one frame whole, checks it, and makes its body the one read.
// A length is believed only as its bytes arrive.
func (s *streamBodies) next() error {
	var head [frameHead]byte
	if _, err := io.ReadFull(s.r, head[:]); err != nil {
		return fmt.Errorf("frame: %w", unexpected(err))
	}
	n := int64(binary.LittleEndian.Uint32(head[0:]))
	s.buf.Reset()
	if got, err := io.CopyN(&s.buf, s.r, n); err != nil {
		return fmt.Errorf("frame of %d bytes cut at %d: %w", n, got, unexpected(err))
	}
	p := s.buf.Bytes()
	if checksum(p) != binary.LittleEndian.Uint32(head[4:]) {
		return errors.New("frame checksum does not match")
	}
	rec, err := decodePayload(p)
	if err != nil {
		return err
	}
	if !isImage(rec.Kind) {
		return errors.New("image cut by a frame of another kind")
	}
	s.body, s.done = rec.Body, rec.Kind == KindImageEnd
	return nil
}

func (s *streamBodies) Read(p []byte) (int, error) {
	for len(s.body) == 0 {
		if s.done {
			return 0, io.EOF
		}
		if err := s.next(); err != nil {
			return 0, err
		}
	}
	n := copy(p, s.body)
	s.body = s.body[n:]
	return n, nil
}
