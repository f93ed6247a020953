package engine

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"time"

	"github.com/fenec-go/fenec/engine/store"
)

// cosineTenant is a tenant with a cosine graph whose vectors are not unit
// length (the graph holds them normalised, the documents as given), some
// deleted and some replaced, and its image.
func cosineTenant(t *testing.T) (*DB, []byte) {
	t.Helper()
	db, _ := newTestDB(t, Options{NoSweep: true})
	mustExec(t, db, "create collection v (e vector<3> @hnsw(cosine), n int)")
	for i := range 200 {
		mustExec(t, db, "put v {e: $1, n: $2}", []any{float64(i%7) + 1, float64(i%5) - 2, 3.5}, i)
	}
	mustExec(t, db, "del v where n < 20")
	mustExec(t, db, "set v {e: [9, -1, 0.5]} where n = 100")
	var img bytes.Buffer
	if _, err := db.WriteImage(&img); err != nil {
		t.Fatal(err)
	}
	return db, img.Bytes()
}

var cosineProbes = []string{
	"get v select id, n near e [1, 0, 3] limit 7",
	"get v select id near e [9, -1, 0.5] limit 3",
	"get v select id, e where n = 100",
	"get v count",
}

func cosineAnswers(t *testing.T, db *DB) []string {
	t.Helper()
	var out []string
	for _, q := range cosineProbes {
		out = append(out, mustExec(t, db, q))
	}
	return out
}

// An image's graph comes before its documents and takes each vector as
// its document is read: installed, the graph is the one saved (not
// rebuilt) and answers as the source's did.
func TestInstallOpenLoadsTheGraphAsDocumentsCome(t *testing.T) {
	src, img := cosineTenant(t)
	var log bytes.Buffer
	opts := Options{NoSweep: true, Logger: slog.New(slog.NewTextHandler(&log, nil))}
	db, err := InstallOpen(filepath.Join(t.TempDir(), "m.fenec"), bytes.NewReader(img), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if strings.Contains(log.String(), "rebuilding") {
		t.Fatalf("the graph was rebuilt: %s", log.String())
	}
	got, want := cosineAnswers(t, db), cosineAnswers(t, src)
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("%s: got %s, want %s", cosineProbes[i], got[i], want[i])
		}
	}
}

// A byte flipped in the graph or in a document's vector, which are
// trusted once decoded, is refused by the checksum of its frame: the
// install fails with ErrBadImage and leaves nothing.
func TestInstallOpenRefusesADamagedGraphOrVector(t *testing.T) {
	_, img := cosineTenant(t)
	graph := bytes.Index(img, []byte("FNCHNSW\x00"))
	if graph < 0 {
		t.Fatal("no graph in the image")
	}
	// A vector as the documents hold it: 3.5 as a little-endian float32.
	vec := bytes.Index(img[graph:], []byte{0x00, 0x00, 0x60, 0x40})
	if vec < 0 {
		t.Fatal("no vector after the graph")
	}
	for name, at := range map[string]int{"graph header": graph + 9, "graph body": graph + 40, "vector": graph + vec + 2} {
		b := bytes.Clone(img)
		b[at] ^= 0x10
		dir := t.TempDir()
		db, err := InstallOpen(filepath.Join(dir, "m.fenec"), bytes.NewReader(b), Options{NoSweep: true, Logger: discardLogger()})
		if err == nil {
			db.Close()
			t.Fatalf("%s: a damaged image was installed", name)
		}
		if !errors.Is(err, ErrBadImage) {
			t.Fatalf("%s: %v, want ErrBadImage", name, err)
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 0 {
			t.Fatalf("%s: a damaged image left %d files", name, len(ents))
		}
	}
}

// An image of the first format (graphs after all the documents) reads
// still, its graphs loaded rather than rebuilt.
func TestImageOfTheFirstFormatReads(t *testing.T) {
	src, _ := cosineTenant(t)
	src.mu.RLock()
	snap := mustSnapshot(t, src, src.mu.RUnlock)
	var log bytes.Buffer
	st, err := readImage(bytes.NewReader(writeV1(t, snap)), slog.New(slog.NewTextHandler(&log, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(log.String(), "rebuilding") {
		t.Fatalf("a graph was rebuilt: %s", log.String())
	}
	// The state read answers as the source does.
	pos := src.log.Position()
	dir := t.TempDir()
	var img bytes.Buffer
	if _, err := store.WriteImage(&img, pos, (&snapshotOf{st}).write); err != nil {
		t.Fatal(err)
	}
	db, err := InstallOpen(filepath.Join(dir, "m.fenec"), &img, Options{NoSweep: true, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	got, want := cosineAnswers(t, db), cosineAnswers(t, src)
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("%s: got %s, want %s", cosineProbes[i], got[i], want[i])
		}
	}
}

// snapshotOf writes a state read back as an image's payload.
type snapshotOf struct{ st *state }

func (s *snapshotOf) write(w io.Writer) error {
	db := &DB{st: s.st}
	snap, err := db.snapshotLocked(nil)
	if err != nil {
		return err
	}
	defer snap.wait()
	return snap.write(w)
}

// writeV1 writes snap as the first format did: "FNI1", the graphs after
// all the documents, each named by its collection.
func writeV1(t *testing.T, snap *snapshot) []byte {
	t.Helper()
	var out bytes.Buffer
	bw := bufio.NewWriter(&out)
	b := []byte(imageMagicV1)
	b = appendUvarint(b, uint64(len(snap.counters)))
	for n, id := range snap.counters {
		b = appendString(b, n)
		b = appendVarint(b, id)
	}
	b = appendUvarint(b, uint64(len(snap.colls)))
	for _, cs := range snap.colls {
		item := appendSchema(nil, cs.sch)
		b = appendUvarint(b, uint64(len(item)))
		b = append(b, item...)
		b = appendUvarint(b, uint64(len(cs.docs)))
		for _, d := range cs.docs {
			item = appendVarint(nil, d.id)
			item = appendUvarint(item, uint64(len(cs.sch.Fields)))
			item = append(item, d.raw...)
			b = appendUvarint(b, uint64(len(item)))
			b = append(b, item...)
		}
	}
	var graphs int
	for _, cs := range snap.colls {
		graphs += len(cs.graphs)
	}
	b = appendUvarint(b, uint64(graphs))
	for _, cs := range snap.colls {
		for _, g := range cs.graphs {
			var data bytes.Buffer
			if _, err := g.x.WriteTo(&data); err != nil {
				t.Fatal(err)
			}
			b = appendString(b, cs.sch.Name)
			b = appendUvarint(b, uint64(g.field))
			b = appendUvarint(b, uint64(data.Len()))
			b = append(b, data.Bytes()...)
		}
	}
	bw.Write(b)
	if err := bw.Flush(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// A graph's bytes go to the feed's goroutine through a piecePipe whose
// writer never waits: the pipe holds every piece the bytes it was made for
// take, read or not, and a reader gets them back in order, to the end.
func TestPiecePipeNeverHoldsTheWriter(t *testing.T) {
	want := bytes.Repeat([]byte("fenec graph "), 3*graphPiece/12+5)
	f := &graphFeed{graphs: make(chan graphBytes, 1)}
	if err := f.graph(bytes.NewReader(want), 0, int64(len(want))); err != nil {
		t.Fatal(err) // it would hang here, were the writer held
	}
	g := <-f.graphs
	got, err := io.ReadAll(iotest.HalfReader(g.p))
	if err != nil || !bytes.Equal(got, want) || g.p.n != int64(len(want)) {
		t.Fatalf("read %d of %d bytes (counted %d), equal %v, err %v", len(got), len(want), g.p.n, bytes.Equal(got, want), err)
	}
	// Cut short, the writer says so and the reader sees the pipe end.
	f = &graphFeed{graphs: make(chan graphBytes, 1)}
	if err := f.graph(bytes.NewReader(want[:graphPiece+7]), 0, int64(len(want))); !errors.Is(err, errShort) {
		t.Fatalf("a graph cut short: %v", err)
	}
	g = <-f.graphs
	if got, _ := io.ReadAll(g.p); len(got) != graphPiece+7 {
		t.Fatalf("read %d bytes of a graph cut after %d", len(got), graphPiece+7)
	}
}

// stalledWriter says when it is first given bytes, then takes nothing
// until it is let go, as a client that stops reading an image would.
type stalledWriter struct {
	given chan struct{}
	once  sync.Once
	let   chan struct{}
}

func (w *stalledWriter) Write(p []byte) (int, error) {
	w.once.Do(func() { close(w.given) })
	<-w.let
	return len(p), nil
}

// An image's graphs are serialised under the tenant's read lock on a
// goroutine of their own while the image is written: a client that stops
// reading the image holds no write back once the graphs are serialised,
// and the image it takes in the end is whole, from the state as it was.
func TestImageWriterStalledHoldsNoWrite(t *testing.T) {
	db, want := cosineTenant(t)
	w := &stalledWriter{given: make(chan struct{}), let: make(chan struct{})}
	var img bytes.Buffer
	written := make(chan error, 1)
	go func() {
		_, err := db.WriteImage(io.MultiWriter(w, &img))
		written <- err
	}()
	<-w.given // the image is under way, its state taken
	done := make(chan struct{})
	go func() {
		defer close(done)
		mustExec(t, db, "put v {e: [1, 1, 1], n: 1000}")
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		close(w.let)
		t.Fatal("a write waited on a stalled image's writer")
	}
	close(w.let)
	if err := <-written; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(img.Bytes(), want) {
		t.Fatal("the image written beside a write differs from the image before it")
	}
}

// A piecePipe takes no more than the bytes it was made for: more would
// fill its queue and hold its writer. Its pieces are no larger than
// those bytes: a small graph costs no piece of graphPiece.
func TestPiecePipeRefusesMoreThanMadeFor(t *testing.T) {
	p := newPiecePipe(10)
	if n, err := p.Write(make([]byte, 6)); n != 6 || err != nil {
		t.Fatalf("6 of 10: %d, %v", n, err)
	}
	if n, err := p.Write(make([]byte, 5)); n != 0 || !errors.Is(err, errPipeFull) {
		t.Fatalf("5 more: %d, %v", n, err)
	}
	if n, err := p.Write(make([]byte, 4)); n != 4 || err != nil {
		t.Fatalf("the last 4: %d, %v", n, err)
	}
	p.close()
	if b := <-p.full; len(b) != 10 || cap(b) != 10 {
		t.Fatalf("a pipe of 10 bytes queued a piece of %d bytes in room for %d", len(b), cap(b))
	}
	if _, ok := <-p.full; ok {
		t.Fatal("a pipe of 10 bytes queued a second piece")
	}
}
