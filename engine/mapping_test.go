package engine

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fenec-go/fenec/engine/hnsw"
	"github.com/fenec-go/fenec/engine/store"
)

// vectorTenant makes a tenant of n documents with 16-number vectors under
// an @hnsw (cosine) field, some updated and deleted.
func vectorTenant(tb testing.TB, n int) (*DB, string) {
	tb.Helper()
	db, path := newTestDB(tb, Options{NoSweep: true})
	mustExec(tb, db, "create collection v (n int @sorted, a int, b int, e vector<16> @hnsw(cosine))")
	putVectors(tb, db, 1, n)
	mustExec(tb, db, "del v where a = 0")
	mustExec(tb, db, "set v {e: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16]} where b = 0")
	return db, path
}

// putVectors puts documents with n from..to-1 and seeded random vectors.
func putVectors(tb testing.TB, db *DB, from, to int) {
	tb.Helper()
	rng := rand.New(rand.NewPCG(uint64(from), 3))
	var docs []any
	for i := from; i < to; i++ {
		e := make([]any, 16)
		for j := range e {
			e[j] = rng.Float64()*2 - 1
		}
		docs = append(docs, map[string]any{"n": int64(i), "a": int64(i % 9), "b": int64(i % 13), "e": e})
	}
	mustExec(tb, db, "put v $1", docs)
}

var vectorProbes = []string{
	"get v select id, n near e [1, 0, 3, 0, 0.5, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2] limit 7",
	"get v select id near e [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1, 0, 0, 0, 0, 0, 0] limit 10",
	"get v select id near e [-1, 0, 3, 0, 0.5, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2] exact limit 5",
	"get v select id near e [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1] where n > 500 limit 5",
	"get v count",
}

func vectorAnswers(tb testing.TB, db *DB) []string {
	tb.Helper()
	out := make([]string, len(vectorProbes))
	for i, q := range vectorProbes {
		out[i] = mustExec(tb, db, q)
	}
	return out
}

// mappedBytes is what db's graphs read in place from its mapped file.
func mappedBytes(db *DB) int64 {
	db.mu.RLock()
	defer db.mu.RUnlock()
	var n int64
	for _, c := range db.st.colls {
		for _, x := range c.search {
			if g, ok := x.(*vectorIndex); ok {
				n += g.graph().MappedBytes()
			}
		}
	}
	return n
}

// A checkpoint's graphs are served from the file it wrote, and an open's
// from the file it opened; they answer as a tenant whose graphs never left
// memory, before and after more writes.
func TestGraphsServedFromTheMappedFile(t *testing.T) {
	db, path := vectorTenant(t, 1500)
	mem, _ := vectorTenant(t, 1500) // the same, never checkpointed
	if n := mappedBytes(db); n != 0 {
		t.Fatalf("a tenant never checkpointed maps %d bytes", n)
	}
	if err := db.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if mappedBytes(db) == 0 {
		t.Fatal("after a checkpoint the graph is not served from the file")
	}
	sameAnswers2(t, "after the checkpoint", vectorAnswers(t, db), vectorAnswers(t, mem))
	var logged bytes.Buffer
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := Open(path, Options{NoSweep: true, Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if strings.Contains(logged.String(), "rebuilding") {
		t.Fatalf("a graph was rebuilt: %s", logged.String())
	}
	if mappedBytes(db) == 0 {
		t.Fatal("after an open the graph is not served from the file")
	}
	sameAnswers2(t, "after the open", vectorAnswers(t, db), vectorAnswers(t, mem))
	// Writes change the graph beside the mapping, alike on both.
	for _, z := range []*DB{db, mem} {
		putVectors(t, z, 5000, 5600)
		mustExec(t, z, "del v where a = 4")
		mustExec(t, z, "set v {e: [0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1]} where b = 5")
	}
	sameAnswers2(t, "after writes", vectorAnswers(t, db), vectorAnswers(t, mem))
	// Checkpointed again, compacted, and opened again, still alike.
	if err := db.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	sameAnswers2(t, "after a second checkpoint", vectorAnswers(t, db), vectorAnswers(t, mem))
	mustExec(t, db, "compact")
	db = reopen(t, db, path)
	sameAnswers2(t, "after compact and open", vectorAnswers(t, db), vectorAnswers(t, mem))
	if mappedBytes(db) == 0 {
		t.Fatal("after compact and open the graph is not served from the file")
	}
	// A move's image (streamed: FNI2, each vector once) installs and
	// answers alike too, its graphs read into memory.
	var img bytes.Buffer
	if _, err := db.WriteImage(&img); err != nil {
		t.Fatal(err)
	}
	moved, err := InstallOpen(filepath.Join(t.TempDir(), "moved.fenec"), &img, Options{NoSweep: true, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer moved.Close()
	sameAnswers2(t, "a moved copy", vectorAnswers(t, moved), vectorAnswers(t, mem))
}

func sameAnswers2(tb testing.TB, what string, got, want []string) {
	tb.Helper()
	for i := range want {
		if got[i] != want[i] {
			tb.Fatalf("%s: %s\n got %.300s\nwant %.300s", what, vectorProbes[i], got[i], want[i])
		}
	}
}

// writeV2 writes snap as the second format did: "FNI2", each graph whole
// but for its live vectors ahead of its collection's documents.
func writeV2(t *testing.T, snap *snapshot) []byte {
	t.Helper()
	var out bytes.Buffer
	bw := bufio.NewWriter(&out)
	b := []byte(imageMagicV2)
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
		b = appendUvarint(b, uint64(len(cs.graphs)))
		for _, g := range cs.graphs {
			var data bytes.Buffer
			if _, err := g.x.WriteTo(&data); err != nil {
				t.Fatal(err)
			}
			b = appendUvarint(b, uint64(g.field))
			b = appendUvarint(b, uint64(data.Len()))
			b = append(b, data.Bytes()...)
		}
		b = appendUvarint(b, uint64(len(cs.docs)))
		for _, d := range cs.docs {
			item = appendVarint(nil, d.id)
			item = appendUvarint(item, uint64(len(cs.sch.Fields)))
			item = append(item, d.raw...)
			b = appendUvarint(b, uint64(len(item)))
			b = append(b, item...)
		}
	}
	bw.Write(b)
	if err := bw.Flush(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// A file of the previous image format opens, its graphs read into memory
// as before, and its next checkpoint writes the mapped format.
func TestImageOfTheSecondFormatOpens(t *testing.T) {
	src, _ := vectorTenant(t, 800)
	src.mu.RLock()
	snap := mustSnapshot(t, src, nil)
	v2 := writeV2(t, snap)
	snap.wait()
	src.mu.RUnlock()
	path := filepath.Join(t.TempDir(), "v2.fenec")
	var img bytes.Buffer
	if _, err := store.WriteImage(&img, src.log.Position(), func(w io.Writer) error {
		_, err := w.Write(v2)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, img.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	var logged bytes.Buffer
	db, err := Open(path, Options{NoSweep: true, Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if strings.Contains(logged.String(), "rebuilding") {
		t.Fatalf("a graph was rebuilt: %s", logged.String())
	}
	if mappedBytes(db) != 0 {
		t.Fatal("a graph of the previous format is served from the file")
	}
	want := vectorAnswers(t, src)
	sameAnswers2(t, "the previous format", vectorAnswers(t, db), want)
	if err := db.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	db = reopen(t, db, path)
	if mappedBytes(db) == 0 {
		t.Fatal("checkpointed, the file's graph is not served from it")
	}
	sameAnswers2(t, "converted", vectorAnswers(t, db), want)
}

// An image of a later format is refused with ErrNewerImage, which says
// what to do.
func TestImageOfALaterFormatRefused(t *testing.T) {
	src, _ := vectorTenant(t, 50)
	var buf bytes.Buffer
	src.mu.RLock()
	snap := mustSnapshot(t, src, nil) // a checkpoint's: FNI3
	err := snap.write(&buf)
	snap.wait()
	src.mu.RUnlock()
	if err != nil {
		t.Fatal(err)
	}
	payload := buf.Bytes()
	if !bytes.HasPrefix(payload, []byte(imageMagic)) {
		t.Fatalf("payload starts %q", payload[:4])
	}
	later := bytes.Clone(payload)
	later[3]++
	_, err = readImage(bytes.NewReader(later), discardLogger())
	if !errors.Is(err, ErrNewerImage) {
		t.Fatalf("got %v, want ErrNewerImage", err)
	}
	path := filepath.Join(t.TempDir(), "later.fenec")
	var img bytes.Buffer
	if _, err := store.WriteImage(&img, src.log.Position(), func(w io.Writer) error {
		_, err := w.Write(later)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, img.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(path, Options{NoSweep: true, Logger: discardLogger()}); !errors.Is(err, ErrNewerImage) {
		t.Fatalf("open: got %v, want ErrNewerImage", err)
	}
}

// A checkpointed file damaged or cut short inside a graph's section is
// refused at open as any damaged file is (DamagedError, naming where),
// never served.
func TestDamagedSectionRefused(t *testing.T) {
	db, path := vectorTenant(t, 1500)
	// A checkpoint as Checkpoint runs it, noting where the section went.
	db.mu.RLock()
	snap := mustSnapshot(t, db, nil)
	err := db.log.Checkpoint(snap.write)
	var at, n int64
	for _, cs := range snap.colls {
		for _, g := range cs.graphs {
			at, n = g.at, g.secLen
		}
	}
	snap.wait()
	db.mu.RUnlock()
	if err != nil {
		t.Fatal(err)
	}
	if at%store.SectionAlign != 0 {
		t.Fatalf("section at %d, not a multiple of %d", at, store.SectionAlign)
	}
	if n == 0 {
		t.Fatal("no section found")
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, cut := range []struct {
		name string
		file []byte
	}{
		{"a byte flipped", flipped(good, at+n/2)},
		{"cut inside the section", good[:at+n/2]},
	} {
		t.Run(cut.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "bad.fenec")
			if err := os.WriteFile(p, cut.file, 0o600); err != nil {
				t.Fatal(err)
			}
			bad, err := Open(p, Options{NoSweep: true, Logger: discardLogger()})
			if err == nil {
				defer bad.Close()
				// A tail cut off leaves the records before the image:
				// what is served must then not be the section's.
				if mappedBytes(bad) != 0 {
					t.Fatal("a damaged section is served")
				}
				return
			}
			var de *DamagedError
			if !errors.As(err, &de) {
				t.Fatalf("got %v, want a DamagedError", err)
			}
		})
	}
}

func flipped(b []byte, at int64) []byte {
	c := bytes.Clone(b)
	c[at] ^= 0x40
	return c
}

// The tenant file shortened under an open tenant by another path (the
// node's flock does not stop truncate(2); fenec itself never shortens a
// file below what it mapped) makes a search fail with hnsw.ErrFault, and
// the process goes on.
func TestTenantFileShortenedUnderTheNode(t *testing.T) {
	db, path := vectorTenant(t, 1500)
	if err := db.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	q := vectorProbes[0] // a walk, which reads the level-0 lists in the file
	mustExec(t, db, q)
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	_, _, err := db.Exec(context.Background(), Statement{Query: q})
	if !errors.Is(err, hnsw.ErrFault) {
		t.Fatalf("near on a shortened file: %v, want hnsw.ErrFault", err)
	}
	// Another opener of the same path is refused while the tenant is open.
	if _, err := Open(path, Options{NoSweep: true, Logger: discardLogger()}); !errors.Is(err, ErrLocked) {
		t.Fatalf("a second open: %v, want ErrLocked", err)
	}
}

// mappingsOf counts this process's mappings of path: of the file there
// now, and of files renamed over since ("(deleted)").
func mappingsOf(t *testing.T, path string) (live, deleted int) {
	t.Helper()
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Skip("no /proc/self/maps")
	}
	for _, l := range strings.Split(string(maps), "\n") {
		switch {
		case strings.HasSuffix(l, " "+path+" (deleted)"):
			deleted++
		case strings.HasSuffix(l, " "+path):
			live++
		}
	}
	return live, deleted
}

// A checkpoint swaps the graphs onto the file it wrote; the mapping of the
// file it replaced goes once no reader holds it: at once with none, and
// with a reader in flight (a pinned graph, as a search holds it) once that
// reader lets go.
func TestCheckpointLetsTheOldMappingGo(t *testing.T) {
	db, path := vectorTenant(t, 1500)
	if err := db.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	db = reopen(t, db, path)
	if live, deleted := mappingsOf(t, path); live != 1 || deleted != 0 {
		t.Fatalf("after the open: %d mappings of the file, %d of replaced ones; want 1 and 0", live, deleted)
	}
	mustExec(t, db, "put v {n: 1, a: 1, b: 1, e: [1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]}")
	if err := db.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if live, deleted := mappingsOf(t, path); live != 1 || deleted != 0 {
		t.Fatalf("after a checkpoint: %d mappings of the file, %d of replaced ones; want 1 and 0", live, deleted)
	}
	// A reader in flight across the next checkpoint.
	db.mu.RLock()
	vi := db.st.colls["v"].search[3].(*vectorIndex)
	db.mu.RUnlock()
	held, ok := vi.pin()
	if !ok {
		t.Fatal("the graph could not be pinned")
	}
	mustExec(t, db, "put v {n: 2, a: 1, b: 1, e: [0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]}")
	if err := db.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if vi.graph() == held {
		t.Fatal("the checkpoint did not swap the graph")
	}
	if live, deleted := mappingsOf(t, path); live != 1 || deleted != 1 {
		t.Fatalf("with a reader in flight: %d mappings of the file, %d of replaced ones; want 1 and 1", live, deleted)
	}
	if _, err := held.Search(make([]float32, 16), hnsw.Query{K: 3, Exact: true}); err != nil {
		t.Fatalf("the reader in flight: %v", err) // still mapped for it
	}
	held.Unpin()
	if live, deleted := mappingsOf(t, path); live != 1 || deleted != 0 {
		t.Fatalf("once the reader let go: %d mappings of the file, %d of replaced ones; want 1 and 0", live, deleted)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if live, deleted := mappingsOf(t, path); live != 0 || deleted != 0 {
		t.Fatalf("closed: %d mappings of the file, %d of replaced ones; want none", live, deleted)
	}
}

// An FNI3 payload cut short anywhere is an error, and one with a byte
// changed anywhere is an error or is read (a graph refused rebuilt) and
// searched without a panic. (In a file, the frame checksums refuse both
// before the payload is read: TestDamagedSectionRefused.)
func TestSectionPayloadCutOrDamaged(t *testing.T) {
	src, _ := vectorTenant(t, 300)
	var buf bytes.Buffer
	src.mu.RLock()
	snap := mustSnapshot(t, src, nil)
	err := snap.write(&buf)
	snap.wait()
	src.mu.RUnlock()
	if err != nil {
		t.Fatal(err)
	}
	full := buf.Bytes()
	if _, err := readImage(bytes.NewReader(full), discardLogger()); err != nil {
		t.Fatalf("whole: %v", err)
	}
	for cut := 0; cut < len(full); cut += 1 + len(full)/211 {
		if _, err := readImage(bytes.NewReader(full[:cut]), discardLogger()); err == nil {
			t.Fatalf("a state cut at %d of %d was read", cut, len(full))
		}
	}
	stmt, _, err := src.parse(Statement{Query: vectorProbes[0]})
	if err != nil {
		t.Fatal(err)
	}
	for at := 0; at < len(full); at += 1 + len(full)/97 {
		st, err := readImage(bytes.NewReader(flipped(full, int64(at))), discardLogger())
		if err != nil {
			continue
		}
		_, _ = (&runner{st: st}).run(stmt) // a damaged value may be refused; no panic
	}
}

// A file that lost writes at its tail is started again past them at open,
// rewritten as one image: its graphs are served from the file written, and
// the one it replaced is let go.
func TestLostTailServedFromTheFileWritten(t *testing.T) {
	opts := Options{Sync: SyncEvery, SyncEvery: time.Hour, NoSweep: true, Logger: discardLogger()}
	db, path := newTestDB(t, opts)
	mustExec(t, db, "create collection v (n int @sorted, a int, b int, e vector<16> @hnsw(cosine))")
	putVectors(t, db, 1, 800)
	if err := db.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	putVectors(t, db, 800, 810) // the first write after the checkpoint bounds the file
	if err := db.Sync(); err != nil {
		t.Fatal(err)
	}
	synced, firstHistory := db.FileBytes(), db.History()
	want := vectorAnswers(t, db)
	putVectors(t, db, 900, 950) // lost
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, synced); err != nil {
		t.Fatal(err)
	}
	db2, err := Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db2.Close() })
	if _, lost := db2.log.Lost(); lost || db2.History() == firstHistory {
		t.Fatal("the file was not started again past its lost tail")
	}
	if live, deleted := mappingsOf(t, path); live != 1 || deleted != 0 {
		t.Fatalf("after an open past a lost tail: %d mappings of the file, %d of replaced ones; want 1 and 0", live, deleted)
	}
	sameAnswers2(t, "past a lost tail", vectorAnswers(t, db2), want)
}
