package store

import (
	"bytes"
	"io"
	"testing"

	"github.com/fenec-go/fenec/engine/internal/fmap"
)

// A section lands at a multiple of SectionAlign in the file, in a frame of
// its own whose checksum covers it; the state reads the same with or
// without the span, and a span is refused across frames.
func TestSectionAlignedAndSpanned(t *testing.T) {
	section := bytes.Repeat([]byte("0123456789abcdef"), 1000)
	var file bytes.Buffer
	file.Write(encodeHeader(0))
	pos := Position{Seq: 0, Lineage: []LineageEntry{{History: 7}}}
	var at int64
	if _, err := writeImageFrames(&file, pos, 4096, headerSize, func(w io.Writer) error {
		w.Write([]byte("before"))
		var err error
		at, err = w.(SectionWriter).WriteSection(int64(len(section)), func(w io.Writer) error {
			_, err := w.Write(section)
			return err
		})
		w.Write([]byte("after"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	data := file.Bytes()
	if at%SectionAlign != 0 || !bytes.Equal(data[at:at+int64(len(section))], section) {
		t.Fatalf("section at %d: not aligned or not there", at)
	}
	s, err := scan(data, 0, true)
	if err != nil || len(s.images) != 1 {
		t.Fatalf("scan: %v, %d images", err, len(s.images))
	}
	var bodies [][]byte
	for o := s.images[0].start; o < s.images[0].end; {
		rec, size, err := frameTrusted(data, o)
		if err != nil {
			t.Fatal(err)
		}
		body := rec.Body
		if o == s.images[0].start {
			_, body, _ = decodeImageHeader(body)
		}
		bodies = append(bodies, body)
		o += size
	}
	reg := fmap.Hold(data, nil)
	sr := imageReader(bodies, reg)
	head := make([]byte, len("before")+1)
	if _, err := io.ReadFull(sr, head); err != nil || string(head[:6]) != "before" {
		t.Fatalf("read %q, %v", head, err)
	}
	pad := int(head[6])
	if _, err := io.ReadFull(sr, make([]byte, pad)); err != nil {
		t.Fatal(err)
	}
	got, held, ok := sr.Span(0, len(section))
	if !ok || !bytes.Equal(got, section) || held != reg {
		t.Fatalf("span: %v", ok)
	}
	held.Release()
	rest, _ := io.ReadAll(sr)
	if string(rest) != "after" {
		t.Fatalf("after the span %q, want %q", rest, "after")
	}
	if _, _, ok := imageReader(bodies, reg).Span(0, 1<<20); ok {
		t.Fatal("a span past its frame was given")
	}
}
