package engine

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/fenec-go/fenec/engine/store"
)

// populate builds a small database touching every kind of value and index.
func populate(tb testing.TB, db *DB, n int) {
	tb.Helper()
	mustExec(tb, db, `create collection docs (title text @text, body text, n int @sorted, f float,
		tag text @hash, u text @unique, at timestamp, meta json, tags [text], v vector<4> @hnsw(l2))`)
	mustExec(tb, db, "create collection _server (k text @unique)")
	mustExec(tb, db, "create collection gone (x int)")
	mustExec(tb, db, "put gone [{x: 1}, {x: 2}]")
	mustExec(tb, db, "drop collection gone")
	rng := rand.New(rand.NewPCG(1, 2))
	words := []string{"fox", "dog", "cat", "bird", "quick", "lazy", "brown"}
	var docs []any
	for i := range n {
		d := map[string]any{
			"title": words[rng.IntN(len(words))] + " " + words[rng.IntN(len(words))],
			"n":     int64(rng.IntN(50)),
			"f":     rng.Float64(),
			"tag":   fmt.Sprintf("t%d", rng.IntN(5)),
			"u":     fmt.Sprintf("u%d", i),
			"at":    t0 + int64(i),
			"meta":  map[string]any{"i": int64(i), "s": "x\"y\n"},
			"tags":  []any{"a", words[i%len(words)]},
			"v":     []any{rng.Float64(), rng.Float64(), rng.Float64(), rng.Float64()},
		}
		if i%7 == 0 {
			delete(d, "n")
		}
		docs = append(docs, d)
	}
	mustExec(tb, db, "put docs $1", docs)
	mustExec(tb, db, "del docs where n = 3")
	mustExec(tb, db, "set docs {f: f * 2} where n < 10")
	mustExec(tb, db, "put _server {k: 'key'}")
}

var probeQueries = []string{
	"get docs order id",
	"get docs select id, n where n > 20 order n desc, id limit 30",
	"get docs where tag = 't1' order id",
	"get docs where u in ('u1', 'u5', 'u77') order id",
	"get docs select tag, count(*), avg(f), max(n) group tag",
	"get docs count",
	"get docs select id match title 'quick fox' limit 10",
	"get docs select id near v [0.5, 0.5, 0.5, 0.5] exact limit 5",
	"get docs select id near v [0.1, 0.9, 0.5, 0.2] limit 5",
	"get _server",
}

func answers(tb testing.TB, db *DB) []string {
	tb.Helper()
	out := make([]string, len(probeQueries))
	for i, q := range probeQueries {
		out[i] = mustExec(tb, db, q)
	}
	return out
}

func sameAnswers(tb testing.TB, what string, got, want []string) {
	tb.Helper()
	for i := range want {
		if got[i] != want[i] {
			tb.Fatalf("%s: %s\n got %.300s\nwant %.300s", what, probeQueries[i], got[i], want[i])
		}
	}
}

func reopen(tb testing.TB, db *DB, path string) *DB {
	tb.Helper()
	if err := db.Close(); err != nil {
		tb.Fatal(err)
	}
	db2, err := Open(path, Options{NoSweep: true, Logger: discardLogger()})
	if err != nil {
		tb.Fatalf("reopen: %v", err)
	}
	tb.Cleanup(func() { db2.Close() })
	return db2
}

func TestImageRoundTrip(t *testing.T) {
	db, path := newTestDB(t, Options{NoSweep: true})
	populate(t, db, 300)
	want := answers(t, db)
	seq, hist, rows := db.Seq(), db.History(), db.Rows()

	db = reopen(t, db, path)
	sameAnswers(t, "replayed", answers(t, db), want)

	if err := db.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	sameAnswers(t, "after checkpoint", answers(t, db), want)
	if chs, err := db.ChangesSince(seq-2, 10); err != nil || len(chs) == 0 {
		t.Fatalf("checkpoint keeps recent records: %v %v", chs, err)
	}
	db = reopen(t, db, path)
	sameAnswers(t, "checkpoint reopened", answers(t, db), want)

	if err := db.Compact(); err != nil {
		t.Fatal(err)
	}
	db = reopen(t, db, path)
	sameAnswers(t, "compacted reopened", answers(t, db), want)
	if db.Seq() != seq || db.History() != hist || db.Rows() != rows {
		t.Fatalf("compaction changed seq/history/rows: %d/%d/%d vs %d/%d/%d", db.Seq(), db.History(), db.Rows(), seq, hist, rows)
	}
	// Ids keep counting past the compaction, dropped collections too.
	mustExec(t, db, "put docs {u: 'next'}")
	if got := mustExec(t, db, "get docs select id where u = 'next'"); !jsonEq(t, got, `[{"id":301}]`) {
		t.Fatalf("id after compaction: %s", got)
	}
	mustExec(t, db, "create collection gone (x int)")
	mustExec(t, db, "put gone {x: 3}")
	if got := mustExec(t, db, "get gone select id"); !jsonEq(t, got, `[{"id":3}]`) {
		t.Fatalf("id of a re-created collection: %s", got)
	}
	mustExec(t, db, "del docs where n > 40")
	want = answers(t, db)
	db = reopen(t, db, path)
	sameAnswers(t, "image plus records reopened", answers(t, db), want)

	// An image out, installed elsewhere, answers the same.
	var img bytes.Buffer
	if _, err := db.WriteImage(&img); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "moved.fenec")
	if err := Install(dst, bytes.NewReader(img.Bytes())); err != nil {
		t.Fatal(err)
	}
	moved, err := Open(dst, Options{NoSweep: true, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer moved.Close()
	sameAnswers(t, "installed", answers(t, moved), want)
	if moved.Seq() != db.Seq() || moved.History() != db.History() {
		t.Fatalf("installed seq/history %d/%d, want %d/%d", moved.Seq(), moved.History(), db.Seq(), db.History())
	}
	if err := Install(dst, bytes.NewReader(img.Bytes())); !errors.Is(err, ErrExist) {
		t.Fatalf("install over an existing file: %v", err)
	}
	// Cut short anywhere: refused, nothing left behind.
	rng := rand.New(rand.NewPCG(3, 4))
	for range 40 {
		cut := rng.IntN(img.Len())
		p := filepath.Join(t.TempDir(), "cut.fenec")
		if err := Install(p, bytes.NewReader(img.Bytes()[:cut])); err == nil {
			t.Fatalf("an image cut at %d of %d was installed", cut, img.Len())
		}
		if ents, _ := os.ReadDir(filepath.Dir(p)); len(ents) != 0 {
			t.Fatalf("cut image left %d files", len(ents))
		}
	}
}

// TestReplicaFollows feeds a replica file from a primary's raw records.
func TestReplicaFollows(t *testing.T) {
	prim, _ := newTestDB(t, Options{NoSweep: true})
	populate(t, prim, 50)
	rep := newReplica(t, prim)
	var watched []uint64
	rep.Watch(func(c Change) { watched = append(watched, c.Seq) })
	from := prim.Seq()
	mustExec(t, prim, "put docs {u: 'r1', n: 10}")
	mustExec(t, prim, "del docs where n < 5")
	if _, err := prim.Fork(); err != nil {
		t.Fatal(err)
	}
	mustExec(t, prim, "create index on docs (body) @text")
	mustExec(t, prim, "set docs {body: 'hello'} where u = 'r1'")
	if err := prim.Sync(); err != nil {
		t.Fatal(err)
	}
	var recs []RawRecord
	if err := prim.ReadRecords(nil, from, func(r RawRecord) error { recs = append(recs, r); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(recs) != 5 {
		for _, r := range recs {
			t.Logf("rec %d..%d", r.First, r.Last)
		}
		t.Fatalf("%d records from %d, seq %d", len(recs), from, prim.Seq())
	}
	if err := rep.ApplyRecord(recs[1]); !errors.Is(err, ErrSeqGap) {
		t.Fatalf("a gap: %v", err)
	}
	for _, r := range recs {
		if err := rep.ApplyRecord(r); err != nil {
			t.Fatalf("apply %d..%d: %v", r.First, r.Last, err)
		}
	}
	if rep.Seq() != prim.Seq() || rep.History() != prim.History() || !rep.Holds(prim.History(), prim.Seq()) {
		t.Fatalf("replica at %d/%d, primary %d/%d", rep.Seq(), rep.History(), prim.Seq(), prim.History())
	}
	sameAnswers(t, "replica", answers(t, rep), answers(t, prim))
	if got := mustExec(t, rep, "get docs select u match body 'hello'"); !jsonEq(t, got, `[{"u":"r1","_score":`+
		fmt.Sprint(mustScore(t, prim))+`}]`) {
		t.Fatalf("replica search: %s", got)
	}
	if len(watched) != 4 {
		t.Fatalf("replica watchers saw %v", watched)
	}
}

func mustScore(tb testing.TB, db *DB) float64 {
	tb.Helper()
	res, _, err := db.Exec(tb.(*testing.T).Context(), Statement{Query: "get docs select u match body 'hello'"})
	if err != nil || len(res.Rows) != 1 {
		tb.Fatalf("score: %v", err)
	}
	return res.Rows[0]["_score"].(float64)
}

func TestOpenErrors(t *testing.T) {
	db, path := newTestDB(t, Options{NoSweep: true})
	if _, err := Open(path, Options{}); !errors.Is(err, ErrLocked) {
		t.Fatalf("second open: %v", err)
	}
	if _, err := Create(path, Options{}); !errors.Is(err, ErrExist) {
		t.Fatalf("create over: %v", err)
	}
	if _, err := Open(filepath.Join(t.TempDir(), "none.fenec"), Options{}); !errors.Is(err, ErrNotExist) {
		t.Fatalf("open missing: %v", err)
	}
	mustExec(t, db, "create collection a (n int)")
	for i := range 5 {
		mustExec(t, db, "put a {n: $1}", i)
	}
	db.Close()
	if err := db.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	if _, _, err := db.Exec(t.Context(), Statement{Query: "get a"}); !errors.Is(err, ErrClosed) {
		t.Fatalf("exec after close: %v", err)
	}
	// Damage a record before the tail: refused, offset named.
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	raw[len(raw)/2] ^= 0xff
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Open(path, Options{Logger: discardLogger()})
	var de *DamagedError
	if !errors.As(err, &de) || de.Offset <= 0 {
		t.Fatalf("damaged file: %v", err)
	}
}

// TestGraphLoadedNotRebuilt: an image's graphs load as they travelled —
// each live node's vector read from its document — with nothing rebuilt,
// and searches answer as on the source.
func TestGraphLoadedNotRebuilt(t *testing.T) {
	db, _ := newTestDB(t, Options{NoSweep: true})
	populate(t, db, 60)
	q := "get docs select id near v [0.5, 0.5, 0.5, 0.5] limit 5"
	want := mustExec(t, db, q)
	var img bytes.Buffer
	if _, err := db.WriteImage(&img); err != nil {
		t.Fatal(err)
	}
	var logged bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logged, nil))
	got, err := InstallOpen(filepath.Join(t.TempDir(), "copy.fenec"), &img, Options{NoSweep: true, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer got.Close()
	if strings.Contains(logged.String(), "rebuilding") {
		t.Fatalf("a graph was rebuilt: %q", logged.String())
	}
	if ans := mustExec(t, got, q); !reflect.DeepEqual(ans, want) {
		t.Fatalf("near on the copy %v, on the source %v", ans, want)
	}
}

// TestGraphRebuiltWhenDamaged gives readImage a graph that does not load:
// the graph is rebuilt from the documents and searches still answer.
func TestGraphRebuiltWhenDamaged(t *testing.T) {
	db, _ := newTestDB(t, Options{NoSweep: true})
	populate(t, db, 60)
	want := mustExec(t, db, "get docs select id near v [0.5, 0.5, 0.5, 0.5] exact limit 5")
	full := statePayload(t, db)
	// A byte in the middle of the graph's body (after its magic, version
	// and body length), flipped.
	at := bytes.Index(full, []byte("FNCHNSW\x00"))
	if at < 0 {
		t.Fatal("no graph in the payload")
	}
	damaged := bytes.Clone(full)
	damaged[at+20+int(binary.LittleEndian.Uint64(full[at+12:]))/2] ^= 0xff
	var logged bytes.Buffer
	st, err := readImage(bytes.NewReader(damaged), slog.New(slog.NewTextHandler(&logged, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logged.String(), "rebuilding") {
		t.Fatalf("no rebuild logged: %q", logged.String())
	}
	r := &runner{st: st}
	stmt, _, err := db.parse(Statement{Query: "get docs select id near v [0.5, 0.5, 0.5, 0.5] exact limit 5"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.run(stmt)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(res.JSON()); got != want {
		t.Fatalf("after rebuild: %s, want %s", got, want)
	}
	// A state payload cut short is an error, never a panic.
	for cut := 0; cut < len(full); cut += 1 + len(full)/97 {
		if _, err := readImage(bytes.NewReader(full[:cut]), discardLogger()); err == nil {
			t.Fatalf("a state cut at %d of %d was read", cut, len(full))
		}
	}
}

// statePayload is db's state as an image's payload.
func statePayload(t testing.TB, db *DB) []byte {
	t.Helper()
	db.mu.RLock()
	snap := mustSnapshot(t, db, db.mu.RUnlock)
	var buf bytes.Buffer
	if err := snap.write(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// An image whose documents do not fit its id counters (an id past its
// collection's counter, or ids out of order) is refused by Install: opened,
// the next id handed out would overwrite a document.
func TestInstallRefusesIdsPastTheirCounter(t *testing.T) {
	db, _ := newTestDB(t, Options{NoSweep: true})
	mustExec(t, db, "create collection c (x int)")
	mustExec(t, db, "put c [{x: 1}, {x: 2}, {x: 3}]")
	for name, spoil := range map[string]func(*snapshot){
		"counter behind": func(s *snapshot) { s.counters["c"] = 2 },
		"ids out of order": func(s *snapshot) {
			d := s.colls[0].docs
			d[0], d[1] = d[1], d[0]
		},
		"value of another type": func(s *snapshot) {
			d := s.colls[0].docs
			d[1] = &doc{id: d[1].id, raw: encodeVals([]any{"two"})}
		},
	} {
		db.mu.RLock()
		pos := db.log.Position()
		snap := mustSnapshot(t, db, db.mu.RUnlock)
		spoil(snap)
		var img bytes.Buffer
		if _, err := store.WriteImage(&img, pos, snap.write); err != nil {
			t.Fatal(err)
		}
		if err := Install(filepath.Join(t.TempDir(), "bad.fenec"), &img); !errors.Is(err, ErrBadImage) {
			t.Errorf("%s: install %v, want ErrBadImage", name, err)
		}
	}
}

// FuzzReadImage feeds arbitrary state payloads to the image reader: an
// image is refused with an error, never a panic, whatever its bytes.
func FuzzReadImage(f *testing.F) {
	db, _ := newTestDB(f, Options{NoSweep: true})
	mustExec(f, db, "create collection c (a text @unique @text, n int @sorted, l [int], v vector<2> @hnsw(l2))")
	mustExec(f, db, `put c [{a: "one two", n: 1, l: [1, 2], v: [0.5, 1]}, {a: "two", n: 2, v: [1, 0]}]`)
	mustExec(f, db, "create collection d (t timestamp @ttl(30m), j json)")
	f.Add(statePayload(f, db))
	f.Add(directPayload(f, db))
	f.Fuzz(func(t *testing.T, p []byte) {
		st, err := readImage(bytes.NewReader(p), discardLogger())
		if err != nil {
			return
		}
		// Every document a read reaches decodes, whatever its bytes (an
		// FNI5 table's documents are decoded only when read).
		for _, c := range st.colls {
			c.ascend(func(d *doc) bool {
				_ = c.row(d)
				return true
			})
		}
		releaseMappings(st)
	})
}

// directPayload is db's state payload as a checkpoint writes it (FNI5),
// its sections inline.
func directPayload(t testing.TB, db *DB) []byte {
	t.Helper()
	db.mu.RLock()
	defer db.mu.RUnlock()
	snap := mustSnapshot(t, db, nil)
	defer snap.wait()
	var buf bytes.Buffer
	if err := snap.write(&buf); err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(buf.Bytes(), []byte(imageMagic)) {
		t.Fatalf("a checkpoint's payload starts %q", buf.Bytes()[:4])
	}
	return buf.Bytes()
}

// An image item claiming more bytes than follow is refused as cut short,
// whatever it claims, without allocating what it claims.
func TestImageItemLengthBelievedAsItArrives(t *testing.T) {
	for _, claim := range []uint64{10, itemTrust + 1, maxImageItem} {
		p := binary.AppendUvarint(nil, claim)
		p = append(p, "only these bytes"...)
		ir := &imageReader{br: bufio.NewReader(bytes.NewReader(p))}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := ir.item()
		runtime.ReadMemStats(&after)
		if claim > 16 && !errors.Is(err, errShort) {
			t.Fatalf("claim %d: %v", claim, err)
		}
		if grew := after.TotalAlloc - before.TotalAlloc; claim > itemTrust && grew > 4*itemTrust {
			t.Fatalf("claim %d allocated %d bytes for 16 that came", claim, grew)
		}
	}
}

// An item past itemTrust reads back whole, byte for byte, whatever the
// buffer held before; one cut short anywhere, even past a growth of the
// buffer, is refused as cut short.
func TestImageLongItem(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{itemTrust + 1, 3*itemTrust + 5, itemGrowth*itemTrust + 7, 20 * itemTrust} {
		want := make([]byte, n)
		for i := range want {
			want[i] = byte(rng.Uint32())
		}
		p := binary.AppendUvarint(nil, uint64(n))
		p = append(p, want...)
		p = append(p, "next"...)
		for _, held := range []int{0, 100, itemTrust / 2} {
			ir := &imageReader{br: bufio.NewReader(bytes.NewReader(p)), buf: make([]byte, held)}
			got, err := ir.item()
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("item of %d bytes, %d held before: %v, equal %v", n, held, err, bytes.Equal(got, want))
			}
			if rest, _ := io.ReadAll(ir.br); string(rest) != "next" {
				t.Fatalf("item of %d bytes left %q after it", n, rest)
			}
		}
		for _, cut := range []int{n / 3, n - 1} {
			ir := &imageReader{br: bufio.NewReader(bytes.NewReader(p[:len(p)-len(want)-4+cut]))}
			if _, err := ir.item(); !errors.Is(err, errShort) {
				t.Fatalf("item of %d bytes cut at %d: %v", n, cut, err)
			}
		}
	}
}
