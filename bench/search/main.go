// Command search measures fenec's search indexes: the HNSW graph
// (engine/hnsw) and the BM25 index (engine/text). It prints a table and
// writes it to bench/search.txt.
//
//	go run ./bench/search            # full run: 100 000 × 128, 100 000 documents
//	go run ./bench/search -n 20000 -docs 20000 -q 200
package main

import (
	"bytes"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fenec-go/fenec/engine/hnsw"
	"github.com/fenec-go/fenec/engine/text"
)

type config struct {
	n, dim, queries  int
	data             string
	docs, words, voc int
	out              string
}

func main() {
	var c config
	flag.IntVar(&c.n, "n", 100000, "vectors in the graph")
	flag.IntVar(&c.dim, "dim", 128, "vector dimension")
	flag.IntVar(&c.queries, "q", 1000, "queries per measurement")
	flag.StringVar(&c.data, "data", "clustered,uniform", "vector sets to run: clustered (100 centres, σ 0.5) and/or uniform")
	flag.IntVar(&c.docs, "docs", 100000, "documents in the text corpus")
	flag.IntVar(&c.words, "words", 50, "words per document")
	flag.IntVar(&c.voc, "vocab", 20000, "vocabulary size (words drawn Zipf-like, s = 1.07)")
	flag.StringVar(&c.out, "out", "bench/search.txt", "file the table is written to (empty: none)")
	flag.Parse()
	if err := run(c); err != nil {
		fmt.Fprintln(os.Stderr, "bench/search:", err)
		os.Exit(1)
	}
}

func run(c config) error {
	var tb table
	tb.note("fenec search bench, %s, GOMAXPROCS %d, %s/%s", time.Now().UTC().Format(time.RFC3339), runtime.GOMAXPROCS(0), runtime.GOOS, runtime.GOARCH)
	for _, set := range strings.Split(c.data, ",") {
		if set == "" {
			continue
		}
		if err := benchVectors(&tb, c, set); err != nil {
			return err
		}
	}
	benchText(&tb, c)
	s := tb.String()
	fmt.Print(s)
	if c.out != "" {
		return os.WriteFile(c.out, []byte(s), 0o644)
	}
	return nil
}

// vectors draws n vectors of the named set.
func vectors(set string, seed uint64, n, dim int) ([][]float32, error) {
	r := rand.New(rand.NewPCG(seed, seed+1))
	uniform := func(r *rand.Rand) []float32 {
		v := make([]float32, dim)
		for j := range v {
			v[j] = r.Float32()*2 - 1
		}
		return v
	}
	out := make([][]float32, n)
	switch set {
	case "uniform":
		for i := range out {
			out[i] = uniform(r)
		}
	case "clustered":
		cr := rand.New(rand.NewPCG(100, 101))
		centres := make([][]float32, 100)
		for i := range centres {
			centres[i] = uniform(cr)
		}
		for i := range out {
			c := centres[r.IntN(len(centres))]
			v := make([]float32, dim)
			for j := range v {
				v[j] = c[j] + float32(r.NormFloat64()*0.5)
			}
			out[i] = v
		}
	default:
		return nil, fmt.Errorf("unknown vector set %q", set)
	}
	return out, nil
}

// heapInUse returns the live heap after a collection.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

func benchVectors(tb *table, c config, set string) error {
	data, err := vectors(set, 1, c.n, c.dim)
	if err != nil {
		return err
	}
	qs, _ := vectors(set, 2, c.queries, c.dim)
	cfg := hnsw.DefaultConfig(c.dim)
	cfg.Seed = 1

	before := heapInUse()
	start := time.Now()
	x, err := hnsw.New(cfg)
	if err != nil {
		return err
	}
	for i, v := range data {
		if err := x.Add(int64(i), v); err != nil {
			return err
		}
	}
	build := time.Since(start)
	heap := heapInUse() - before
	name := fmt.Sprintf("near %s %d×%d", set, c.n, c.dim)
	tb.row(name, "build (M 16, ef_construction 200)", fmtDur(build), fmt.Sprintf("%.0f vectors/s", float64(c.n)/build.Seconds()))
	tb.row(name, "heap after build", fmtMB(heap), fmt.Sprintf("%.0f B/vector; vectors alone %s; MemoryBytes says %s",
		float64(heap)/float64(c.n), fmtMB(uint64(c.n*c.dim*4)), fmtMB(uint64(x.MemoryBytes()))))

	lat, truth := measure(qs, func(q []float32) ([]hnsw.Hit, error) { return x.Search(q, hnsw.Query{K: 10, Exact: true}) })
	tb.row(name, "exact k=10", lat.String(), "the answers recall is measured against")
	for _, ef := range []int{64, 200} {
		lat, hits := measure(qs, func(q []float32) ([]hnsw.Hit, error) { return x.Search(q, hnsw.Query{K: 10, Ef: ef}) })
		tb.row(name, fmt.Sprintf("graph k=10 ef=%d", ef), lat.String(), fmt.Sprintf("recall@10 %.4f", recall(hits, truth)))
	}
	for _, pct := range []int{10, 1} {
		filter := func(id int64) bool { return id%100 < int64(pct) }
		lat, hits := measure(qs, func(q []float32) ([]hnsw.Hit, error) {
			return x.Search(q, hnsw.Query{K: 10, Filter: filter})
		})
		short := 0
		for _, h := range hits {
			if len(h) < 10 {
				short++
			}
		}
		ftruth := make([][]hnsw.Hit, len(qs))
		for i, q := range qs {
			ftruth[i], _ = x.Search(q, hnsw.Query{K: 10, Exact: true, Filter: filter})
		}
		tb.row(name, fmt.Sprintf("filtered %d%% k=10 ef=64", pct), lat.String(), fmt.Sprintf("recall@10 %.4f, %d short", recall(hits, ftruth), short))
	}

	var buf bytes.Buffer
	start = time.Now()
	size, err := x.WriteTo(&buf)
	if err != nil {
		return err
	}
	save := time.Since(start)
	start = time.Now()
	y, err := hnsw.Load(bytes.NewReader(buf.Bytes()), func(id int64) ([]float32, bool) {
		if id < 0 || id >= int64(len(data)) {
			return nil, false
		}
		return data[id], true
	})
	if err != nil {
		return err
	}
	load := time.Since(start)
	tb.row(name, "graph saved (links only)", fmtMB(uint64(size)), fmt.Sprintf("written in %s", fmtDur(save)))
	tb.row(name, "graph load vs rebuild", fmtDur(load), fmt.Sprintf("%.1f× faster than the build's %s", build.Seconds()/load.Seconds(), fmtDur(build)))
	if y.Len() != x.Len() {
		return fmt.Errorf("loaded %d vectors, built %d", y.Len(), x.Len())
	}

	// Remove a quarter, in random order: tombstones pass the purge
	// fraction once, and that Remove repairs the graph.
	r := rand.New(rand.NewPCG(7, 8))
	order := r.Perm(c.n)[:c.n/4]
	var slowest time.Duration
	start = time.Now()
	for _, id := range order {
		t0 := time.Now()
		x.Remove(int64(id))
		slowest = max(slowest, time.Since(t0))
	}
	removes := time.Since(start)
	tb.row(name, fmt.Sprintf("remove %d (purges included)", len(order)), fmtDur(removes), fmt.Sprintf("slowest Remove %s (the purge); %d tombstones left", fmtDur(slowest), x.Tombstones()))
	_, truth = measure(qs, func(q []float32) ([]hnsw.Hit, error) { return x.Search(q, hnsw.Query{K: 10, Exact: true}) })
	lat, hits := measure(qs, func(q []float32) ([]hnsw.Hit, error) { return x.Search(q, hnsw.Query{K: 10}) })
	tb.row(name, "after removes: graph k=10 ef=64", lat.String(), fmt.Sprintf("recall@10 %.4f", recall(hits, truth)))
	runtime.KeepAlive(y)
	return nil
}

// latency holds sorted per-query durations.
type latency []time.Duration

func (l latency) at(p float64) time.Duration { return l[int(p*float64(len(l)-1))] }
func (l latency) String() string {
	return fmt.Sprintf("p50 %s  p99 %s", fmtDur(l.at(0.5)), fmtDur(l.at(0.99)))
}

func measure(qs [][]float32, f func([]float32) ([]hnsw.Hit, error)) (latency, [][]hnsw.Hit) {
	lat := make(latency, len(qs))
	hits := make([][]hnsw.Hit, len(qs))
	for i, q := range qs {
		start := time.Now()
		hits[i], _ = f(q)
		lat[i] = time.Since(start)
	}
	slices.Sort(lat)
	return lat, hits
}

func recall(got, want [][]hnsw.Hit) float64 {
	found, total := 0, 0
	for i := range want {
		total += len(want[i])
		for _, w := range want[i] {
			if slices.ContainsFunc(got[i], func(h hnsw.Hit) bool { return h.ID == w.ID }) {
				found++
			}
		}
	}
	if total == 0 {
		return 1
	}
	return float64(found) / float64(total)
}

func benchText(tb *table, c config) {
	r := rand.New(rand.NewPCG(3, 4))
	zipf := rand.NewZipf(r, 1.07, 1, uint64(c.voc-1))
	word := func() string { return "w" + strconv.FormatUint(zipf.Uint64(), 36) }
	docs := make([]string, c.docs)
	var sb strings.Builder
	for i := range docs {
		sb.Reset()
		for j := range c.words {
			if j > 0 {
				sb.WriteByte(' ')
			}
			sb.WriteString(word())
		}
		docs[i] = sb.String()
	}
	queries := make([]string, c.queries)
	for i := range queries {
		queries[i] = word() + " " + word()
	}

	before := heapInUse()
	start := time.Now()
	x := text.New(0, 0)
	for i, d := range docs {
		x.Put(int64(i), d)
	}
	build := time.Since(start)
	heap := heapInUse() - before
	runtime.KeepAlive(docs) // counted in before; must not be freed before after
	name := fmt.Sprintf("match %d docs × %d words", c.docs, c.words)
	tb.row(name, "build", fmtDur(build), fmt.Sprintf("%d terms", x.Terms()))
	tb.row(name, "heap after build", fmtMB(heap), fmt.Sprintf("%.0f B/document; MemoryBytes says %s", float64(heap)/float64(c.docs), fmtMB(uint64(x.MemoryBytes()))))
	for _, k := range []int{10} {
		lat := make(latency, len(queries))
		for i, q := range queries {
			start := time.Now()
			x.Search(q, k, nil)
			lat[i] = time.Since(start)
		}
		slices.Sort(lat)
		tb.row(name, fmt.Sprintf("2-word queries (Zipf), k=%d", k), lat.String(), "")
		lat = lat[:0]
		for _, q := range queries {
			start := time.Now()
			x.Search(q, k, func(id int64) bool { return id%10 == 0 })
			lat = append(lat, time.Since(start))
		}
		slices.Sort(lat)
		tb.row(name, fmt.Sprintf("same, filter passing 10%%, k=%d", k), lat.String(), "")
	}
	runtime.KeepAlive(x)
}

// table collects rows and prints them aligned.
type table struct {
	notes []string
	rows  [][4]string
}

func (t *table) note(f string, args ...any) { t.notes = append(t.notes, fmt.Sprintf(f, args...)) }
func (t *table) row(a, b, c, d string) {
	t.rows = append(t.rows, [4]string{a, b, c, d})
	fmt.Fprintf(os.Stderr, "... %s: %s: %s %s\n", a, b, c, d)
}

func (t *table) String() string {
	var w [4]int
	head := [4]string{"set", "measure", "value", "note"}
	for i, h := range head {
		w[i] = len([]rune(h))
	}
	for _, r := range t.rows {
		for i, s := range r {
			w[i] = max(w[i], len([]rune(s)))
		}
	}
	var sb strings.Builder
	for _, n := range t.notes {
		sb.WriteString(n + "\n")
	}
	line := func(r [4]string) {
		for i, s := range r {
			fmt.Fprintf(&sb, "%s%s  ", s, strings.Repeat(" ", w[i]-len([]rune(s))))
		}
		sb.WriteString("\n")
	}
	line(head)
	line([4]string{strings.Repeat("-", w[0]), strings.Repeat("-", w[1]), strings.Repeat("-", w[2]), strings.Repeat("-", w[3])})
	for _, r := range t.rows {
		line(r)
	}
	return sb.String()
}

func fmtDur(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%.1f µs", float64(d)/float64(time.Microsecond))
	case d < time.Second:
		return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.2f s", d.Seconds())
}

func fmtMB(b uint64) string { return fmt.Sprintf("%.1f MB", float64(b)/(1<<20)) }
