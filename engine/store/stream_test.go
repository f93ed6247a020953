package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// gateReader gives the first half of an image, then waits for the replayer
// to start on it before giving the rest (or gives up after a while, which
// the test then reports).
type gateReader struct {
	data    []byte
	off     int
	started <-chan struct{}
	waited  bool
	late    bool
}

func (g *gateReader) Read(p []byte) (int, error) {
	half := len(g.data) / 2
	if g.off >= half && !g.waited {
		g.waited = true
		select {
		case <-g.started:
		case <-time.After(10 * time.Second):
			g.late = true
		}
	}
	if g.off >= len(g.data) {
		return 0, io.EOF
	}
	end := len(g.data)
	if g.off < half {
		end = half
	}
	n := copy(p, g.data[g.off:end])
	g.off += n
	return n, nil
}

// signalling is a Replayer that says when the image starts to arrive.
type signalling struct {
	collected
	started chan struct{}
}

func (s *signalling) Image(seq uint64, r io.Reader) error {
	close(s.started)
	return s.collected.Image(seq, r)
}

// An image is decoded as it arrives: the replayer has begun on it while
// half the image has still to come, and the Log it opens is the image's.
func TestInstallOpenDecodesAsItArrives(t *testing.T) {
	src := tenantPath(t)
	opts := testOptions()
	opts.imageChunk = 1000
	l := mustCreate(t, src, opts)
	appendN(t, l, 5, 2, 40)
	state := bytes.Repeat([]byte("abcdefghij"), 5000) // 50 frames
	var img bytes.Buffer
	if _, err := l.WriteImage(&img, stateWriter(state)); err != nil {
		t.Fatal(err)
	}
	h := &signalling{started: make(chan struct{})}
	g := &gateReader{data: img.Bytes(), started: h.started}
	dst := filepath.Join(t.TempDir(), "in.fenec")
	got, n, err := InstallOpen(dst, g, testOptions(), h)
	if err != nil {
		t.Fatal(err)
	}
	defer mustClose(t, got)
	if g.late {
		t.Fatal("the image was decoded only once it had all arrived")
	}
	if n != int64(img.Len()) || !bytes.Equal(h.image, state) || len(h.recs) != 0 {
		t.Fatalf("installed %d of %d bytes, state %d bytes (want %d), %d records", n, img.Len(), len(h.image), len(state), len(h.recs))
	}
	if got.Seq() != l.Seq() || got.History() != l.History() {
		t.Fatalf("installed seq %d history %d, want %d %d", got.Seq(), got.History(), l.Seq(), l.History())
	}
	// It is the file at dst: it takes appends and reopens with them.
	appendN(t, got, 2, 1, 10)
	mustClose(t, got)
	again, c := mustOpen(t, dst, testOptions())
	defer mustClose(t, again)
	if !bytes.Equal(c.image, state) || len(c.recs) != 2 {
		t.Fatalf("reopened: state %d bytes, %d records", len(c.image), len(c.recs))
	}
}

// A file that does not start with its image (a tenant file as a Log
// keeps it: a store record first, the image, records after it)
// is installed from the whole file, its image given once, and refused if
// its image is damaged; a damaged stream is refused whatever byte was
// hit, nothing left behind.
func TestInstallOpenOtherShapesAndDamage(t *testing.T) {
	src := tenantPath(t)
	l := mustCreate(t, src, func() Options { o := testOptions(); o.imageChunk = 500; return o }())
	appendN(t, l, 3, 1, 20)
	state := bytes.Repeat([]byte("s"), 3000)
	if err := l.Checkpoint(stateWriter(state)); err != nil {
		t.Fatal(err)
	}
	appendN(t, l, 2, 1, 20)
	mustClose(t, l)
	file, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	var c collected
	got, _, err := InstallOpen(filepath.Join(t.TempDir(), "raw.fenec"), bytes.NewReader(file), testOptions(), &c)
	if err != nil {
		t.Fatalf("a checkpointed file: %v", err)
	}
	mustClose(t, got)
	if !bytes.Equal(c.image, state) || len(c.recs) != 2 {
		t.Fatalf("a checkpointed file: state %d bytes, %d records", len(c.image), len(c.recs))
	}
	// Its image was not decoded as it came, so its checksums and those of
	// the records before it are checked once it is in: a byte flipped in
	// the first record or in the image is refused.
	first := headerSize + frameHead + int(binary.LittleEndian.Uint32(file[headerSize:])) - 2
	for what, at := range map[string]int{"first record": first, "image": bytes.LastIndex(file, state[:100]) + 50} {
		bad := bytes.Clone(file)
		bad[at] ^= 0x20
		dir := t.TempDir()
		if l, _, err := InstallOpen(filepath.Join(dir, "bad.fenec"), bytes.NewReader(bad), testOptions(), &collected{}); err == nil {
			mustClose(t, l)
			t.Fatalf("a checkpointed file damaged in its %s was installed", what)
		} else if !errors.Is(err, ErrBadImage) {
			t.Fatalf("a checkpointed file damaged in its %s: %v, want ErrBadImage", what, err)
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 0 {
			t.Fatalf("a checkpointed file damaged in its %s left %d files", what, len(ents))
		}
	}

	l2 := mustCreate(t, tenantPath(t), func() Options { o := testOptions(); o.imageChunk = 500; return o }())
	appendN(t, l2, 3, 1, 20)
	var img bytes.Buffer
	if _, err := l2.WriteImage(&img, stateWriter(bytes.Repeat([]byte("x"), 4000))); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(7, 8))
	for range 60 {
		b := bytes.Clone(img.Bytes())
		at := rng.IntN(len(b))
		if rng.IntN(3) == 0 {
			b = b[:at]
		} else {
			b[at] ^= byte(1 + rng.IntN(255))
		}
		dir := t.TempDir()
		var c collected
		if l, _, err := InstallOpen(filepath.Join(dir, "bad.fenec"), bytes.NewReader(b), testOptions(), &c); err == nil {
			mustClose(t, l)
			t.Fatalf("damaged at byte %d of %d: installed", at, img.Len())
		} else if !errors.Is(err, ErrBadImage) {
			t.Fatalf("damaged at byte %d of %d: %v, want ErrBadImage", at, img.Len(), err)
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 0 {
			t.Fatalf("damaged at byte %d: %d files left", at, len(ents))
		}
	}
}
