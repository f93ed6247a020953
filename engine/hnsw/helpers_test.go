package hnsw

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// randVecs returns n random vectors of length dim, uniform in [-1, 1).
func randVecs(seed uint64, n, dim int) [][]float32 {
	r := rand.New(rand.NewPCG(seed, seed+1))
	out := make([][]float32, n)
	for i := range out {
		v := make([]float32, dim)
		for j := range v {
			v[j] = r.Float32()*2 - 1
		}
		out[i] = v
	}
	return out
}

// build returns an index of cfg holding vs under ids 0..len(vs)-1.
func build(t testing.TB, cfg Config, vs [][]float32) *Index {
	t.Helper()
	x, err := New(cfg)
	if err != nil {
		t.Fatalf("new: %v", err)
	}
	for i, v := range vs {
		if err := x.Add(int64(i), v); err != nil {
			t.Fatalf("add %d: %v", i, err)
		}
	}
	return x
}

// search runs q on x and fails the test on an error.
func search(t testing.TB, x *Index, q []float32, opts Query) []Hit {
	t.Helper()
	hs, err := x.Search(q, opts)
	if err != nil {
		t.Fatalf("search: %v", err)
	}
	return hs
}

// ids returns the ids of hs in order.
func ids(hs []Hit) []int64 {
	out := make([]int64, len(hs))
	for i, h := range hs {
		out[i] = h.ID
	}
	return out
}

// overlap counts the ids of got that are in want.
func overlap(got, want []Hit) int {
	w := ids(want)
	n := 0
	for _, h := range got {
		if slices.Contains(w, h.ID) {
			n++
		}
	}
	return n
}

// clustered returns n vectors of length dim drawn around k centres (the
// centres uniform in [-1, 1), each value spread by a normal of sigma), the
// shape embeddings of real documents take. The centres depend on
// centreSeed only, so queries drawn with another seed fall among them.
func clustered(centreSeed, seed uint64, n, dim, k int, sigma float64) [][]float32 {
	cs := randVecs(centreSeed, k, dim)
	r := rand.New(rand.NewPCG(seed, seed+1))
	out := make([][]float32, n)
	for i := range out {
		c := cs[r.IntN(k)]
		v := make([]float32, dim)
		for j := range v {
			v[j] = c[j] + float32(r.NormFloat64()*sigma)
		}
		out[i] = v
	}
	return out
}

// vectorsOf returns a Load callback serving vs by id.
func vectorsOf(vs map[int64][]float32) func(int64) ([]float32, bool) {
	return func(id int64) ([]float32, bool) {
		v, ok := vs[id]
		return v, ok
	}
}

// reachable counts the live nodes a walk over level 0 reaches from the
// entry point, tombstones included as stepping stones.
func reachable(x *Index) int {
	if x.entry == noEntry {
		return 0
	}
	seen := map[uint32]bool{x.entry: true}
	stack := []uint32{x.entry}
	n := 0
	for len(stack) > 0 {
		s := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if x.state[s] == slotLive {
			n++
		}
		for _, t := range x.links(s, 0) {
			if !seen[t] {
				seen[t] = true
				stack = append(stack, t)
			}
		}
	}
	return n
}

// recallOf returns the share of exact top-k ids that graph search with ef
// finds, over queries qs.
func recallOf(t testing.TB, x *Index, qs [][]float32, k, ef int) float64 {
	t.Helper()
	found := 0
	for _, q := range qs {
		want := search(t, x, q, Query{K: k, Exact: true})
		got := search(t, x, q, Query{K: k, Ef: ef})
		found += overlap(got, want)
	}
	return float64(found) / float64(k*len(qs))
}
