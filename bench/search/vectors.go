package main

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"time"

	"github.com/fenec-go/fenec/engine/hnsw"
)

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

// vectorBench measures one vector set.
type vectorBench struct {
	tb    *table
	name  string
	data  [][]float32
	qs    [][]float32
	x     *hnsw.Index
	ef    int // the index's default ef_search
	build time.Duration
	truth [][]hnsw.Hit
}

func benchVectors(tb *table, c config, set string, n int) error {
	data, err := vectors(set, 1, n, c.dim)
	if err != nil {
		return err
	}
	qs, _ := vectors(set, 2, c.queries, c.dim)
	b := &vectorBench{tb: tb, name: fmt.Sprintf("near %s %d×%d", set, n, c.dim), data: data, qs: qs}
	for _, step := range []func() error{b.buildGraph, b.search, b.filtered, b.persist, b.removes} {
		if err := step(); err != nil {
			return fmt.Errorf("%s: %w", b.name, err)
		}
	}
	return nil
}

func (b *vectorBench) buildGraph() error {
	cfg := hnsw.DefaultConfig(len(b.data[0]))
	cfg.Seed = 1
	before := heapInUse()
	start := time.Now()
	x, err := hnsw.New(cfg)
	if err != nil {
		return err
	}
	for i, v := range b.data {
		if err := x.Add(int64(i), v); err != nil {
			return err
		}
	}
	b.build = time.Since(start)
	heap := heapInUse() - before
	b.x, b.ef = x, cfg.EfSearch
	n := len(b.data)
	b.tb.row(b.name, fmt.Sprintf("build (M %d, ef_construction %d)", cfg.M, cfg.EfConstruction), fmtDur(b.build),
		fmt.Sprintf("%.0f vectors/s", float64(n)/b.build.Seconds()))
	b.tb.row(b.name, "heap after build", fmtMB(heap),
		fmt.Sprintf("%.0f B/vector; vectors alone %s; MemoryBytes says %s",
			float64(heap)/float64(n), fmtMB(uint64(n*cfg.Dim*4)), fmtMB(uint64(x.MemoryBytes()))))
	return nil
}

// run measures q over every query.
func (b *vectorBench) run(q hnsw.Query) (latency, [][]hnsw.Hit, error) {
	return measure(b.qs, func(v []float32) ([]hnsw.Hit, error) { return b.x.Search(v, q) })
}

func (b *vectorBench) search() error {
	lat, truth, err := b.run(hnsw.Query{K: 10, Exact: true})
	if err != nil {
		return err
	}
	b.truth = truth
	b.tb.row(b.name, "exact k=10", lat.String(), "the answers recall is measured against")
	// The default ef, the earlier default 64, and twice the default.
	for _, ef := range []int{b.ef, 64, 2 * b.ef} {
		lat, hits, err := b.run(hnsw.Query{K: 10, Ef: ef})
		if err != nil {
			return err
		}
		note := fmt.Sprintf("recall@10 %.4f", recall(hits, truth))
		if ef == b.ef {
			note += " (default ef_search)"
		}
		b.tb.row(b.name, fmt.Sprintf("graph k=10 ef=%d", ef), lat.String(), note)
	}
	return nil
}

func (b *vectorBench) filtered() error {
	for _, pct := range []int64{10, 1} {
		filter := func(id int64) bool { return id%100 < pct }
		lat, hits, err := b.run(hnsw.Query{K: 10, Filter: filter})
		if err != nil {
			return err
		}
		_, truth, err := b.run(hnsw.Query{K: 10, Exact: true, Filter: filter})
		if err != nil {
			return err
		}
		short := 0
		for _, h := range hits {
			if len(h) < 10 {
				short++
			}
		}
		b.tb.row(b.name, fmt.Sprintf("filtered %d%% k=10 ef=%d", pct, b.ef), lat.String(),
			fmt.Sprintf("recall@10 %.4f, %d short", recall(hits, truth), short))
	}
	return nil
}

func (b *vectorBench) persist() error {
	var buf bytes.Buffer
	start := time.Now()
	size, err := b.x.WriteTo(&buf)
	if err != nil {
		return err
	}
	save := time.Since(start)
	start = time.Now()
	y, err := hnsw.Load(bytes.NewReader(buf.Bytes()), func(id int64) ([]float32, bool) {
		if id < 0 || id >= int64(len(b.data)) {
			return nil, false
		}
		return b.data[id], true
	})
	if err != nil {
		return err
	}
	load := time.Since(start)
	if y.Len() != b.x.Len() {
		return fmt.Errorf("loaded %d vectors, built %d", y.Len(), b.x.Len())
	}
	b.tb.row(b.name, "graph saved (links only)", fmtMB(uint64(size)), fmt.Sprintf("written in %s", fmtDur(save)))
	b.tb.row(b.name, "graph load vs rebuild", fmtDur(load),
		fmt.Sprintf("%.1f× faster than the build's %s", b.build.Seconds()/load.Seconds(), fmtDur(b.build)))
	return nil
}

// removes takes a quarter out, in random order: tombstones pass the purge
// fraction once, and that Remove repairs the whole graph.
func (b *vectorBench) removes() error {
	r := rand.New(rand.NewPCG(7, 8))
	order := r.Perm(len(b.data))[:len(b.data)/4]
	var slowest time.Duration
	start := time.Now()
	for _, id := range order {
		t0 := time.Now()
		b.x.Remove(int64(id))
		slowest = max(slowest, time.Since(t0))
	}
	took := time.Since(start)
	b.tb.row(b.name, fmt.Sprintf("remove %d (purges included)", len(order)), fmtDur(took),
		fmt.Sprintf("slowest Remove %s (purges run a few nodes per write); %d tombstones left", fmtDur(slowest), b.x.Tombstones()))
	_, truth, err := b.run(hnsw.Query{K: 10, Exact: true})
	if err != nil {
		return err
	}
	lat, hits, err := b.run(hnsw.Query{K: 10})
	if err != nil {
		return err
	}
	b.tb.row(b.name, fmt.Sprintf("after removes: graph k=10 ef=%d", b.ef), lat.String(), fmt.Sprintf("recall@10 %.4f", recall(hits, truth)))
	return nil
}

// latency holds sorted per-query durations.
type latency []time.Duration

func (l latency) at(p float64) time.Duration { return l[int(p*float64(len(l)-1))] }
func (l latency) String() string {
	return fmt.Sprintf("p50 %s  p99 %s", fmtDur(l.at(0.5)), fmtDur(l.at(0.99)))
}

// measure runs f on every query, timing each.
func measure(qs [][]float32, f func([]float32) ([]hnsw.Hit, error)) (latency, [][]hnsw.Hit, error) {
	lat := make(latency, len(qs))
	hits := make([][]hnsw.Hit, len(qs))
	for i, q := range qs {
		start := time.Now()
		h, err := f(q)
		lat[i] = time.Since(start)
		if err != nil {
			return nil, nil, err
		}
		hits[i] = h
	}
	slices.Sort(lat)
	return lat, hits, nil
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
