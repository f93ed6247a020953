package engine

import (
	"bytes"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// testdata/fni3.fenec was made by fenec before FNI4 (commit a4003c6): a
// checkpoint that wrote an FNI3 image, its graphs' sections holding every
// vector, then writes in the log after it. fni3Writes makes the same
// tenant, write for write.
func fni3Writes(tb testing.TB, db *DB, checkpoint func()) {
	tb.Helper()
	rng := rand.New(rand.NewPCG(31, 32))
	vec := func(dim int) []any {
		e := make([]any, dim)
		for j := range e {
			e[j] = float64(float32(rng.NormFloat64()))
		}
		return e
	}
	mustExec(tb, db, "create collection v (n int, tag text, e vector<12> @hnsw(cosine), f vector<5> @hnsw(l2))")
	for i := range 400 {
		mustExec(tb, db, "put v $1", map[string]any{"n": int64(i), "tag": fmt.Sprintf("t%d", i%7), "e": vec(12), "f": vec(5)})
	}
	for i := 1; i <= 400; i += 9 {
		mustExec(tb, db, "set v {tag: 'moved', e: $1, f: $2} where n = $3", vec(12), vec(5), int64(i))
	}
	mustExec(tb, db, "del v where n >= 100 and n < 130")
	checkpoint()
	for i := 400; i < 420; i++ {
		mustExec(tb, db, "put v $1", map[string]any{"n": int64(i), "tag": "late", "e": vec(12), "f": vec(5)})
	}
}

var fni3Probes = []string{
	"get v select id, n, tag, e, f",
	"get v select id, n near e [1, 0, 3, 0, 0.5, 0, 0, 1, 0, 0, 0, 2] limit 7",
	"get v select id near e [0.1, -0.2, 0.3, 0.4, -0.5, 0.6, 0.7, 0.8, 0.9, 1, 0, 0] limit 10",
	"get v select id near e [-1, 0, 3, 0, 0.5, 0, 0, 1, 0, 0, 0, 2] exact limit 5",
	"get v select id, n near f [1, 0.5, -1, 0, 2] limit 8",
	"get v select id near f [0, 0, 0, 0, 0] where tag = 'moved' limit 4",
}

func fni3Answers(tb testing.TB, db *DB) []string {
	tb.Helper()
	out := make([]string, len(fni3Probes))
	for i, q := range fni3Probes {
		out[i] = mustExec(tb, db, q)
	}
	return out
}

// A file whose image is FNI3 opens as it is, its graphs served from their
// sections (which hold the vectors), and answers as the same tenant made
// now; its next checkpoint writes FNI4 (each vector held once, in its
// document), which answers alike and opens again.
func TestFileOfTheThirdFormatOpens(t *testing.T) {
	old, err := os.ReadFile("testdata/fni3.fenec")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(old, []byte(imageMagicV3)) || bytes.Contains(old, []byte(imageMagic)) {
		t.Fatal("testdata/fni3.fenec holds no FNI3 image")
	}
	path := filepath.Join(t.TempDir(), "old.fenec")
	if err := os.WriteFile(path, old, 0o600); err != nil {
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
	if mappedBytes(db) == 0 {
		t.Fatal("the FNI3 graphs are not served from the file")
	}
	mem, _ := newTestDB(t, Options{NoSweep: true})
	fni3Writes(t, mem, func() {})
	want := fni3Answers(t, mem)
	sameAnswers2(t, "the FNI3 file", fni3Answers(t, db), want)

	if err := db.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	sameAnswers2(t, "after its checkpoint", fni3Answers(t, db), want)
	mustExec(t, db, "compact")
	db = reopen(t, db, path)
	if strings.Contains(logged.String(), "rebuilding") {
		t.Fatalf("a graph was rebuilt: %s", logged.String())
	}
	now, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(now, []byte(imageMagic)) || bytes.Contains(now, []byte(imageMagicV3)) {
		t.Fatal("the compacted file holds no FNI4 image, or an FNI3 one still")
	}
	if mappedBytes(db) == 0 {
		t.Fatal("the FNI4 graphs are not served from the file")
	}
	sameAnswers2(t, "the FNI4 file", fni3Answers(t, db), want)
}

// testdata/fni5.fenec was made by fenec before FNI6 (commit a276298): the
// same tenant (fni3Writes), its checkpoint an FNI5 image, whose graphs'
// sections do not say where each vector lies. It opens as it is (each
// graph given its vectors by reading the documents), answers as the same
// tenant made now, and its next checkpoint writes FNI6, whose graphs are
// given theirs by place, and which answers alike and opens again.
func TestFileOfTheFifthFormatOpens(t *testing.T) {
	old, err := os.ReadFile("testdata/fni5.fenec")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(old, []byte(imageMagicV5)) || bytes.Contains(old, []byte(imageMagic)) {
		t.Fatal("testdata/fni5.fenec holds no FNI5 image")
	}
	path := filepath.Join(t.TempDir(), "old.fenec")
	if err := os.WriteFile(path, old, 0o600); err != nil {
		t.Fatal(err)
	}
	var logged bytes.Buffer
	db, err := Open(path, Options{NoSweep: true, Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if mappedBytes(db) == 0 || strings.Contains(logged.String(), "rebuilding") {
		t.Fatalf("the FNI5 graphs are not served from the file: %s", logged.String())
	}
	mem, _ := newTestDB(t, Options{NoSweep: true})
	fni3Writes(t, mem, func() {})
	want := fni3Answers(t, mem)
	sameAnswers2(t, "the FNI5 file", fni3Answers(t, db), want)

	if err := db.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	sameAnswers2(t, "after its checkpoint", fni3Answers(t, db), want)
	mustExec(t, db, "compact")
	db = reopen(t, db, path)
	now, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(now, []byte(imageMagic)) || bytes.Contains(now, []byte(imageMagicV5)) {
		t.Fatal("the compacted file holds no FNI6 image, or an FNI5 one still")
	}
	if mappedBytes(db) == 0 || strings.Contains(logged.String(), "rebuilding") {
		t.Fatalf("the FNI6 graphs are not served from the file: %s", logged.String())
	}
	sameAnswers2(t, "the FNI6 file", fni3Answers(t, db), want)
}
