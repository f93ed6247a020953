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
	"testing"

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
	snap, err := src.snapshotLocked()
	src.mu.RUnlock()
	if err != nil {
		t.Fatal(err)
	}
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
	snap, err := db.snapshotLocked()
	if err != nil {
		return err
	}
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
			b = appendString(b, cs.sch.Name)
			b = appendUvarint(b, uint64(g.field))
			b = appendUvarint(b, uint64(len(g.data)))
			b = append(b, g.data...)
		}
	}
	bw.Write(b)
	if err := bw.Flush(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}
