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
