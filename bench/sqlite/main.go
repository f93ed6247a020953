// Command sqlite compares fenec's engine with SQLite doing the same work in
// the same run, and prints a table: puts one by one and in blocks of 1 000,
// get by id, an indexed range, a count, open time, and the engine's memory
// against its file size while opening and checkpointing.
//
// SQLite runs in WAL mode with synchronous=NORMAL, which like fenec's
// SyncEvery does not fsync each commit.
package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/fenec-go/fenec/engine"
	_ "modernc.org/sqlite"
)

type config struct {
	docs    int // documents loaded in blocks
	singles int // puts one by one
	reads   int // gets, ranges and counts
}

func main() {
	var cfg config
	flag.IntVar(&cfg.docs, "n", 100_000, "documents")
	flag.IntVar(&cfg.singles, "singles", 20_000, "single puts")
	flag.IntVar(&cfg.reads, "reads", 20_000, "reads of each kind")
	flag.Parse()
	if err := run(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// row is one line of the table.
type row struct {
	name          string
	fenec, sqlite float64
	unit          string
	higherBetter  bool
}

func run(cfg config) error {
	dir, err := os.MkdirTemp("", "fenec-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	rows, mem, err := measure(cfg, dir)
	if err != nil {
		return err
	}
	print(cfg, rows, mem)
	return nil
}

func doc(rng *rand.Rand, i int) map[string]any {
	return map[string]any{
		"name":  fmt.Sprintf("user-%d", i),
		"n":     int64(rng.IntN(1_000_000)),
		"tag":   fmt.Sprintf("t%d", rng.IntN(50)),
		"score": rng.Float64(),
		"body":  strings.Repeat("lorem ipsum ", 8),
	}
}

func measure(cfg config, dir string) ([]row, []memRow, error) {
	ctx := context.Background()
	fpath := filepath.Join(dir, "bench.fenec")
	db, err := engine.Create(fpath, engine.Options{NoSweep: true})
	if err != nil {
		return nil, nil, err
	}
	sq, err := openSQLite(filepath.Join(dir, "bench.sqlite"))
	if err != nil {
		return nil, nil, err
	}
	defer sq.Close()
	if _, _, err := db.Exec(ctx, engine.Statement{Query: "create collection docs (name text, n int @sorted, tag text @hash, score float, body text)"}); err != nil {
		return nil, nil, err
	}
	var rows []row
	rng := rand.New(rand.NewPCG(1, 2))

	// Puts in blocks of 1 000.
	blocks := make([][]any, 0, cfg.docs/1000)
	for b := 0; b < cfg.docs/1000; b++ {
		l := make([]any, 1000)
		for i := range l {
			l[i] = doc(rng, b*1000+i)
		}
		blocks = append(blocks, l)
	}
	fe := timeIt(func() error {
		for _, l := range blocks {
			if _, _, err := db.Exec(ctx, engine.Statement{Query: "put docs $1", Params: []any{l}}); err != nil {
				return err
			}
		}
		return nil
	})
	sl := timeIt(func() error { return sqliteBlocks(sq, blocks) })
	if err := firstErr(fe, sl); err != nil {
		return nil, nil, err
	}
	rows = append(rows, rateRow("puts/s, blocks of 1 000", cfg.docs, fe.d, sl.d))

	// Single puts, one block (one transaction) each.
	singles := make([]map[string]any, cfg.singles)
	for i := range singles {
		singles[i] = doc(rng, cfg.docs+i)
	}
	fe = timeIt(func() error {
		for _, d := range singles {
			if _, _, err := db.Exec(ctx, engine.Statement{Query: "put docs $1", Params: []any{d}}); err != nil {
				return err
			}
		}
		return nil
	})
	sl = timeIt(func() error { return sqliteSingles(sq, singles) })
	if err := firstErr(fe, sl); err != nil {
		return nil, nil, err
	}
	rows = append(rows, rateRow("puts/s, one by one", cfg.singles, fe.d, sl.d))

	total := cfg.docs + cfg.singles
	ids := make([]int64, cfg.reads)
	for i := range ids {
		ids[i] = int64(1 + rng.IntN(total))
	}
	fe = timeIt(func() error {
		for _, id := range ids {
			res, _, err := db.Exec(ctx, engine.Statement{Query: "get docs where id = $1", Params: []any{id}})
			if err != nil {
				return err
			}
			if len(res.Rows) != 1 {
				return fmt.Errorf("get id %d: %d rows", id, len(res.Rows))
			}
		}
		return nil
	})
	sl = timeIt(func() error { return sqliteGets(sq, ids) })
	if err := firstErr(fe, sl); err != nil {
		return nil, nil, err
	}
	rows = append(rows, rateRow("get by id/s", cfg.reads, fe.d, sl.d))

	// An indexed range of about 10 rows.
	los := make([]int64, cfg.reads)
	for i := range los {
		los[i] = int64(rng.IntN(1_000_000 - 100))
	}
	width := int64(1_000_000 * 10 / total)
	var fenecRows, sqliteRows int
	fe = timeIt(func() error {
		for _, lo := range los {
			res, _, err := db.Exec(ctx, engine.Statement{Query: "get docs where n >= $1 and n < $2", Params: []any{lo, lo + width}})
			if err != nil {
				return err
			}
			fenecRows += len(res.Rows)
		}
		return nil
	})
	sl = timeIt(func() error {
		var err error
		sqliteRows, err = sqliteRange(sq, los, width)
		return err
	})
	if err := firstErr(fe, sl); err != nil {
		return nil, nil, err
	}
	if fenecRows != sqliteRows {
		return nil, nil, fmt.Errorf("range rows differ: fenec %d, sqlite %d", fenecRows, sqliteRows)
	}
	rows = append(rows, rateRow(fmt.Sprintf("indexed range/s (~%d rows)", fenecRows/cfg.reads), cfg.reads, fe.d, sl.d))

	// A count over a hashed field (2% of the rows).
	counts := cfg.reads / 20
	fe = timeIt(func() error {
		for i := range counts {
			if _, _, err := db.Exec(ctx, engine.Statement{Query: "get docs where tag = $1 count", Params: []any{fmt.Sprintf("t%d", i%50)}}); err != nil {
				return err
			}
		}
		return nil
	})
	sl = timeIt(func() error { return sqliteCounts(sq, counts) })
	if err := firstErr(fe, sl); err != nil {
		return nil, nil, err
	}
	rows = append(rows, rateRow("count where tag = ?/s", counts, fe.d, sl.d))

	// Open: the log replayed, then the file compacted to one image.
	if err := db.Close(); err != nil {
		return nil, nil, err
	}
	var mem []memRow
	openLog, m, err := openMeasured(fpath)
	if err != nil {
		return nil, nil, err
	}
	mem = append(mem, m)
	sqOpen, err := sqliteOpenTime(filepath.Join(dir, "bench.sqlite"))
	if err != nil {
		return nil, nil, err
	}
	rows = append(rows, row{name: "open ms (fenec: records replayed)", fenec: ms(openLog), sqlite: ms(sqOpen), unit: "ms"})

	base := heapNow()
	db, err = engine.Open(fpath, engine.Options{NoSweep: true})
	if err != nil {
		return nil, nil, err
	}
	var ck memRow
	ck.what = "open, then compact"
	runtime.GC()
	peak := watchPeak()
	start := time.Now()
	err = db.Compact()
	ck.d = time.Since(start)
	ck.peak = peak.stop() - base
	ck.file = db.FileBytes()
	if err != nil {
		return nil, nil, err
	}
	mem = append(mem, ck)
	if err := db.Close(); err != nil {
		return nil, nil, err
	}
	openImg, m, err := openMeasured(fpath)
	if err != nil {
		return nil, nil, err
	}
	m.what = "open (image)"
	mem = append(mem, m)
	rows = append(rows, row{name: "open ms (fenec: compacted image)", fenec: ms(openImg), sqlite: ms(sqOpen), unit: "ms"})
	return rows, mem, nil
}

type timed struct {
	d   time.Duration
	err error
}

func timeIt(fn func() error) timed {
	runtime.GC()
	start := time.Now()
	err := fn()
	return timed{time.Since(start), err}
}

func firstErr(ts ...timed) error {
	for _, t := range ts {
		if t.err != nil {
			return t.err
		}
	}
	return nil
}

func rateRow(name string, n int, fe, sl time.Duration) row {
	return row{name: name, fenec: float64(n) / fe.Seconds(), sqlite: float64(n) / sl.Seconds(), unit: "/s", higherBetter: true}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// memRow is the engine's heap growth while opening or checkpointing.
type memRow struct {
	what string
	d    time.Duration
	peak uint64 // heap bytes above the baseline, at the peak
	live uint64 // heap bytes above the baseline after a GC, the tenant open
	file int64
}

func heapNow() uint64 {
	runtime.GC()
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// peakWatcher samples the heap every millisecond until stopped.
type peakWatcher struct {
	max  atomic.Uint64
	done chan struct{}
	wg   sync.WaitGroup
}

func watchPeak() *peakWatcher {
	p := &peakWatcher{done: make(chan struct{})}
	p.wg.Go(func() {
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(s)
			if v := s[0].Value.Uint64(); v > p.max.Load() {
				p.max.Store(v)
			}
			select {
			case <-p.done:
				return
			case <-t.C:
			}
		}
	})
	return p
}

func (p *peakWatcher) stop() uint64 {
	close(p.done)
	p.wg.Wait()
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return max(p.max.Load(), s[0].Value.Uint64())
}

// openMeasured opens the tenant file, timing it and watching the heap.
func openMeasured(path string) (time.Duration, memRow, error) {
	m := memRow{what: "open (records)"}
	base := heapNow()
	peak := watchPeak()
	start := time.Now()
	db, err := engine.Open(path, engine.Options{NoSweep: true})
	m.d = time.Since(start)
	m.peak = peak.stop() - base
	if err != nil {
		return 0, m, err
	}
	m.file = db.FileBytes()
	m.live = heapNow() - base
	return m.d, m, db.Close()
}

func print(cfg config, rows []row, mem []memRow) {
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Printf("fenec engine vs SQLite (modernc.org/sqlite, WAL, synchronous=NORMAL; fenec SyncEvery 100 ms)\n")
	fmt.Printf("%d documents in blocks of 1 000, %d single puts, %d reads of each kind; %s %s/%s, %d CPUs\n\n",
		cfg.docs, cfg.singles, cfg.reads, runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.NumCPU())
	fmt.Fprintf(w, "work\tfenec\tsqlite\tfenec/sqlite\t\n")
	for _, r := range rows {
		ratio := r.fenec / r.sqlite
		note := "(higher is better)"
		if !r.higherBetter {
			note = "(lower is better)"
		}
		fmt.Fprintf(w, "%s\t%.0f %s\t%.0f %s\t%.2f× %s\t\n", r.name, r.fenec, r.unit, r.sqlite, r.unit, ratio, note)
	}
	w.Flush()
	fmt.Println()
	w = tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "fenec memory\tms\tfile MB\theap peak MB\tpeak/file\tlive after GC MB\tlive/file\t\n")
	for _, m := range mem {
		live, ratio := "-", "-"
		if m.live > 0 {
			live = fmt.Sprintf("%.1f", float64(m.live)/1e6)
			ratio = fmt.Sprintf("%.2f×", float64(m.live)/float64(m.file))
		}
		fmt.Fprintf(w, "%s\t%.0f\t%.1f\t%.1f\t%.2f×\t%s\t%s\t\n", m.what, ms(m.d), float64(m.file)/1e6,
			float64(m.peak)/1e6, float64(m.peak)/float64(m.file), live, ratio)
	}
	w.Flush()
	fmt.Println("\nheap: Go heap object bytes above the level before (peak sampled every ms; includes garbage not yet collected).")
	fmt.Println("open, then compact: the peak counts the open tenant and what writing its image adds.")
	fmt.Println("count: fenec answers one = on a @hash field from the bucket's size, SQLite counts index entries.")
	fmt.Println("SQLite's open reads pages lazily, fenec's loads the whole tenant into memory: the open ratio compares different work.")
	fmt.Println("targets: puts and reads within 2× of SQLite; open heap ≤ 2× the file, checkpoint ≤ 3×.")
}

// SQLite side.

func openSQLite(path string) (*sql.DB, error) {
	db, err := sql.Open("sqlite", path)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	for _, q := range []string{
		"PRAGMA journal_mode=WAL",
		"PRAGMA synchronous=NORMAL",
		"CREATE TABLE docs (id INTEGER PRIMARY KEY, name TEXT, n INTEGER, tag TEXT, score REAL, body TEXT)",
		"CREATE INDEX docs_n ON docs(n)",
		"CREATE INDEX docs_tag ON docs(tag)",
	} {
		if _, err := db.Exec(q); err != nil {
			return nil, fmt.Errorf("%s: %w", q, err)
		}
	}
	return db, nil
}

const sqliteInsert = "INSERT INTO docs (name, n, tag, score, body) VALUES (?, ?, ?, ?, ?)"

func insertDoc(st *sql.Stmt, d map[string]any) error {
	_, err := st.Exec(d["name"], d["n"], d["tag"], d["score"], d["body"])
	return err
}

func sqliteBlocks(db *sql.DB, blocks [][]any) error {
	for _, l := range blocks {
		tx, err := db.Begin()
		if err != nil {
			return err
		}
		st, err := tx.Prepare(sqliteInsert)
		if err != nil {
			return err
		}
		for _, d := range l {
			if err := insertDoc(st, d.(map[string]any)); err != nil {
				return err
			}
		}
		st.Close()
		if err := tx.Commit(); err != nil {
			return err
		}
	}
	return nil
}

func sqliteSingles(db *sql.DB, docs []map[string]any) error {
	st, err := db.Prepare(sqliteInsert)
	if err != nil {
		return err
	}
	defer st.Close()
	for _, d := range docs {
		if err := insertDoc(st, d); err != nil {
			return err
		}
	}
	return nil
}

// scanRow reads a whole row, as fenec answers a whole document.
func scanRows(rs *sql.Rows) (int, error) {
	n := 0
	for rs.Next() {
		var id, nn int64
		var name, tag, body string
		var score float64
		if err := rs.Scan(&id, &name, &nn, &tag, &score, &body); err != nil {
			return n, err
		}
		n++
	}
	return n, rs.Close()
}

func sqliteGets(db *sql.DB, ids []int64) error {
	st, err := db.Prepare("SELECT id, name, n, tag, score, body FROM docs WHERE id = ?")
	if err != nil {
		return err
	}
	defer st.Close()
	for _, id := range ids {
		rs, err := st.Query(id)
		if err != nil {
			return err
		}
		if n, err := scanRows(rs); err != nil || n != 1 {
			return fmt.Errorf("sqlite get %d: %d rows, %v", id, n, err)
		}
	}
	return nil
}

func sqliteRange(db *sql.DB, los []int64, width int64) (int, error) {
	st, err := db.Prepare("SELECT id, name, n, tag, score, body FROM docs WHERE n >= ? AND n < ? ORDER BY id")
	if err != nil {
		return 0, err
	}
	defer st.Close()
	total := 0
	for _, lo := range los {
		rs, err := st.Query(lo, lo+width)
		if err != nil {
			return 0, err
		}
		n, err := scanRows(rs)
		if err != nil {
			return 0, err
		}
		total += n
	}
	return total, nil
}

func sqliteCounts(db *sql.DB, n int) error {
	st, err := db.Prepare("SELECT count(*) FROM docs WHERE tag = ?")
	if err != nil {
		return err
	}
	defer st.Close()
	for i := range n {
		var c int64
		if err := st.QueryRow(fmt.Sprintf("t%d", i%50)).Scan(&c); err != nil {
			return err
		}
	}
	return nil
}

// sqliteOpenTime opens the database and runs a first query.
func sqliteOpenTime(path string) (time.Duration, error) {
	start := time.Now()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	var c int64
	if err := db.QueryRow("SELECT count(*) FROM docs WHERE id = 1").Scan(&c); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}
