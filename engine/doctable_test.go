package engine

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// docProbes are reads of every path to a collection's documents: the id
// order both ways, id ranges, a lookup (@hash), a range (@sorted), a
// match (@text), a count.
var docProbes = []string{
	"get c",
	"get c order id desc",
	"get c where id >= 40 and id < 90",
	"get c where id > 70 order id desc limit 5",
	"get c where id <= 30 order id desc",
	"get c where k = 'k3'",
	"get c where n > 40 order n desc limit 7",
	"get c where n < 12 order n",
	"get c match s 'w2' order id",
	"get c select count(*)",
	"get c where u = 7",
}

func docAnswers(t *testing.T, db *DB) []string {
	t.Helper()
	out := make([]string, len(docProbes))
	for i, q := range docProbes {
		out[i] = mustExec(t, db, q)
	}
	return out
}

// A collection served from its image's table, with the writes since kept
// over it, answers every read as one held wholly in memory does, through
// inserts, replacements and deletes of the table's documents, blocks
// refused and undone, checkpoints that fold the writes into the next
// table, compactions and reopens. The twin is never checkpointed: its
// documents are all in memory, as every tenant's were before.
func TestTableAndChangesAnswerAsMemory(t *testing.T) {
	const schema = "create collection c (n int @sorted, k text @hash, s text @text, u int @unique, b text)"
	db, path := newTestDB(t, Options{NoSweep: true})
	twin, _ := newTestDB(t, Options{NoSweep: true})
	both := func(q string) {
		t.Helper()
		e1, e2 := execErr(t, db, q), execErr(t, twin, q)
		if (e1 == nil) != (e2 == nil) {
			t.Fatalf("%s: %v on the table, %v in memory", q, e1, e2)
		}
	}
	both(schema)
	rng := rand.New(rand.NewPCG(7, 11))
	put := func() {
		both(fmt.Sprintf("put c {n: %d, k: 'k%d', s: 'w%d w%d', u: %d, b: '%s'}", rng.IntN(60), rng.IntN(8),
			rng.IntN(5), rng.IntN(5), 1000+rng.IntN(1<<20), strings.Repeat("x", rng.IntN(200))))
	}
	for range 120 {
		put()
	}
	if err := db.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	db = reopen(t, db, path)
	if c := db.st.colls["c"]; c.base == nil || c.base.n != 120 || c.order.Len() != 0 {
		t.Fatalf("after the open: table %v, %d changes; want a table of 120 and none", c.base != nil, c.order.Len())
	}
	check := func(step int, what string) {
		t.Helper()
		got, want := docAnswers(t, db), docAnswers(t, twin)
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("step %d (%s): %s:\n got %s\nwant %s", step, what, docProbes[i], got[i], want[i])
			}
		}
		if g, w := db.st.colls["c"].len(), twin.st.colls["c"].len(); g != w {
			t.Fatalf("step %d (%s): %d documents, want %d", step, what, g, w)
		}
	}
	check(0, "open")
	for step := 1; step <= 300; step++ {
		var what string
		switch r := rng.IntN(100); {
		case r < 30:
			what = "put"
			put()
		case r < 50:
			what = fmt.Sprintf("set c {n: %d, b: 'r'} where id = %d", rng.IntN(60), 1+rng.IntN(160))
			both(what)
		case r < 65:
			what = fmt.Sprintf("del c where id = %d", 1+rng.IntN(160))
			both(what)
		case r < 70:
			what = fmt.Sprintf("del c where n = %d", rng.IntN(60))
			both(what)
		case r < 78:
			// Refused midway (two documents cannot hold one @unique value):
			// every document it changed is put back.
			what = fmt.Sprintf("set c {u: 5} where n > %d", rng.IntN(50))
			both(what)
		case r < 80:
			what = "put then refuse"
			for _, d := range []*DB{db, twin} {
				_, err := d.Batch(context.Background(), []Statement{
					{Query: fmt.Sprintf("del c where id = %d", 1+rng.IntN(160))},
					{Query: "put c {n: 1, u: 5}"}, {Query: "put c {n: 2, u: 5}"},
				}, BatchOptions{})
				if err == nil {
					t.Fatal("a block putting one @unique value twice landed")
				}
			}
		case r < 88:
			what = "checkpoint"
			if err := db.Checkpoint(); err != nil {
				t.Fatal(err)
			}
			if c := db.st.colls["c"]; c.order.Len() != 0 {
				t.Fatalf("step %d: %d changes left after a checkpoint", step, c.order.Len())
			}
		case r < 92:
			what = "compact"
			if err := db.Compact(); err != nil {
				t.Fatal(err)
			}
		default:
			what = "reopen"
			db = reopen(t, db, path)
		}
		check(step, what)
	}
}

// A read's rows encoded after its lock is given back hold the mapping
// they are read from: a checkpoint that serves the collection from the
// next file meanwhile, the garbage collector and the tenant's close do
// not take them away, and the tenant opens again while they are held (a
// mapping holds no flock).
func TestStreamedRowsHoldTheirMapping(t *testing.T) {
	db, path := newTestDB(t, Options{NoSweep: true})
	mustExec(t, db, "create collection c (n int, s text)")
	for i := range 200 {
		mustExec(t, db, fmt.Sprintf("put c {n: %d, s: '%s'}", i, strings.Repeat("y", i)))
	}
	if err := db.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	db = reopen(t, db, path)
	want := mustExec(t, db, "get c")
	res, _, err := db.ReadStream(context.Background(), Statement{Query: "get c"}, ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mustExec(t, db, "put c {n: 1000}")
	if err := db.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	runtime.GC()
	if _, deleted := mappingsOf(t, path); deleted != 1 {
		t.Fatalf("%d mappings of replaced files with a read holding one, want 1", deleted)
	}
	db = reopen(t, db, path) // closes the first: the read still holds its file
	if got := string(res.JSON()); got != want {
		t.Fatalf("rows encoded after a checkpoint and a close:\n got %.200s\nwant %.200s", got, want)
	}
	runtime.KeepAlive(res)
	res = nil
	for range 3 {
		runtime.GC()
	}
	if _, deleted := mappingsOf(t, path); deleted != 0 {
		t.Fatalf("%d mappings of replaced files once no read holds one, want 0", deleted)
	}
	_ = db
}

// A table is checked whole as it opens: one out of order, past the
// collection's last id, with a document past the section's end or bytes
// past the last document is refused, never read.
func TestDocTableRefusesABadTable(t *testing.T) {
	section := func(ids []int64, ends []uint64, vals int) []byte {
		var b []byte
		for i := range ids {
			b = binary.LittleEndian.AppendUint64(b, uint64(ids[i]))
			b = binary.LittleEndian.AppendUint64(b, ends[i])
		}
		return append(b, make([]byte, vals)...)
	}
	for _, tc := range []struct {
		name string
		b    []byte
		n    uint64
		last int64
		ok   bool
	}{
		{"good", section([]int64{1, 5, 9}, []uint64{2, 2, 7}, 7), 3, 9, true},
		{"empty", nil, 0, 0, true},
		{"ids out of order", section([]int64{1, 9, 5}, []uint64{2, 2, 7}, 7), 3, 9, false},
		{"an id twice", section([]int64{1, 5, 5}, []uint64{2, 2, 7}, 7), 3, 9, false},
		{"an id past the last given", section([]int64{1, 5, 10}, []uint64{2, 2, 7}, 7), 3, 9, false},
		{"an id not positive", section([]int64{0, 5}, []uint64{2, 7}, 7), 2, 9, false},
		{"ends going back", section([]int64{1, 5, 9}, []uint64{4, 2, 7}, 7), 3, 9, false},
		{"a document past the end", section([]int64{1, 5, 9}, []uint64{2, 2, 8}, 7), 3, 9, false},
		{"bytes past the last", section([]int64{1, 5, 9}, []uint64{2, 2, 6}, 7), 3, 9, false},
		{"more documents than the table holds", section([]int64{1}, []uint64{0}, 0), 2, 9, false},
		{"a count past any length", section([]int64{1}, []uint64{0}, 0), 1 << 62, 9, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tab, err := newDocTable(tc.b, tc.n, tc.last, nil)
			if (err == nil) != tc.ok {
				t.Fatalf("err %v, want ok %v", err, tc.ok)
			}
			if err != nil {
				return
			}
			var ids []int64
			tab.ascend(func(d *doc) bool { ids = append(ids, d.id); return true })
			if len(ids) != int(tc.n) {
				t.Fatalf("%d documents read, want %d", len(ids), tc.n)
			}
		})
	}
}

// A tenant whose documents section is damaged on disk is refused as any
// damaged file is, not read.
func TestDamagedDocumentsSectionRefused(t *testing.T) {
	db, path := newTestDB(t, Options{NoSweep: true})
	mustExec(t, db, "create collection c (s text)")
	for i := range 50 {
		mustExec(t, db, fmt.Sprintf("put c {s: 'needle-%03d'}", i))
	}
	if err := db.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	at := strings.Index(string(b), "needle-025")
	if at < 0 {
		t.Fatal("no document's bytes in the file")
	}
	b[at+7] ^= 0x40
	bad := filepath.Join(t.TempDir(), "bad.fenec")
	if err := os.WriteFile(bad, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if db, err := Open(bad, Options{NoSweep: true, Logger: discardLogger()}); err == nil {
		db.Close()
		t.Fatal("a file with a damaged documents section opened")
	}
}

// A collection emptied by deletes is written in line, a table of no
// documents: the checkpoint still lets go of the old table's mapping (its
// tombstones with it), and the collection takes writes
// and reopens as any other.
func TestEmptiedCollectionLetsItsMappingGo(t *testing.T) {
	db, path := newTestDB(t, Options{NoSweep: true})
	mustExec(t, db, "create collection c (n int, s text)")
	mustExec(t, db, "create collection d (n int)")
	for i := range 100 {
		mustExec(t, db, fmt.Sprintf("put c {n: %d, s: '%s'}", i, strings.Repeat("z", 50)))
	}
	mustExec(t, db, "put d {n: 1}")
	if err := db.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	db = reopen(t, db, path)
	mustExec(t, db, "del c where n >= 0")
	if err := db.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	if live, deleted := mappingsOf(t, path); live != 1 || deleted != 0 {
		t.Fatalf("after the emptied collection's checkpoint: %d mappings of the file, %d of replaced ones; want 1 and 0", live, deleted)
	}
	if got := mustExec(t, db, "get c count"); !strings.Contains(got, "0") {
		t.Fatalf("count after the deletes: %s", got)
	}
	mustExec(t, db, "put c {n: 7, s: 'back'}")
	db = reopen(t, db, path)
	if got := mustExec(t, db, "get c"); !strings.Contains(got, "back") || strings.Contains(got, "zzz") {
		t.Fatalf("c after the reopen: %s", got)
	}
	if got := mustExec(t, db, "get d"); !strings.Contains(got, `"n":1`) && !strings.Contains(got, `"n": 1`) {
		t.Fatalf("d after the reopen: %s", got)
	}
}
