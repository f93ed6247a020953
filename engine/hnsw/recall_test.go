package hnsw

import (
	"sync"
	"testing"
)

const (
	recallN   = 20000
	recallDim = 128
	recallQ   = 200
)

var (
	recallOnce  sync.Once
	recallIndex *Index
	recallData  [][]float32
)

// recallFixture builds, once per test binary, an index at default settings
// of 20 000 random 128-d vectors drawn around 100 centres.
func recallFixture(t testing.TB) (*Index, [][]float32) {
	t.Helper()
	recallOnce.Do(func() {
		cfg := DefaultConfig(recallDim)
		cfg.Seed = 7
		recallData = clustered(100, 1, recallN, recallDim, 100, 0.5)
		recallIndex = build(t, cfg, recallData)
	})
	if recallIndex == nil {
		t.Fatal("recall fixture did not build")
	}
	return recallIndex, recallData
}

func TestRecallAt10Clustered(t *testing.T) {
	x, _ := recallFixture(t)
	qs := clustered(100, 2, recallQ, recallDim, 100, 0.5)
	r := recallOf(t, x, qs, 10, 0)
	t.Logf("recall@10 = %.4f at ef=%d over %d queries, %d vectors", r, x.Config().EfSearch, len(qs), recallN)
	if r < 0.95 {
		t.Fatalf("recall@10 = %.4f, want >= 0.95", r)
	}
}

// Uniform random vectors in 128 dimensions are the hardest case there is:
// every point is nearly as far from a query as its nearest neighbour, so
// graph search needs a wide candidate list. The default ef=64 is logged
// (bench/search measures it at full size), and a wide one is held to the
// bar on 5 000 vectors.
func TestRecallAt10Uniform(t *testing.T) {
	cfg := DefaultConfig(recallDim)
	cfg.Seed = 7
	x := build(t, cfg, randVecs(1, 5000, recallDim))
	qs := randVecs(2, 100, recallDim)
	r64 := recallOf(t, x, qs, 10, 64)
	r400 := recallOf(t, x, qs, 10, 400)
	t.Logf("uniform, 5 000 vectors: recall@10 = %.4f at ef=64, %.4f at ef=400", r64, r400)
	if r400 < 0.95 {
		t.Fatalf("recall@10 at ef=400 = %.4f, want >= 0.95", r400)
	}
	if got := reachable(x); got != x.Len() {
		t.Fatalf("%d of %d nodes reachable from the entry point", got, x.Len())
	}
}
