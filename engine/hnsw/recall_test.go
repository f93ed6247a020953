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

// The requirement: recall@10 of a search at default settings, against the
// exact answer, is at least 0.95 on 20 000 random 128-d vectors, values
// uniform in [-1, 1]. That is the hardest case there is (every point is
// nearly as far from a query as its nearest neighbour), and it is what the
// defaults are chosen for (doc.go). Cosine, the default metric, and L2 are
// held to it; Dot, the inner product of vectors as given, is no distance
// and is not.
func TestRecallAt10Uniform(t *testing.T) {
	for _, metric := range []Metric{Cosine, L2} {
		t.Run(metric.String(), func(t *testing.T) {
			t.Parallel()
			cfg := DefaultConfig(recallDim)
			cfg.Metric = metric
			cfg.Seed = 7
			x := build(t, cfg, randVecs(1, recallN, recallDim))
			qs := randVecs(2, recallQ, recallDim)
			r := recallOf(t, x, qs, 10, 0)
			t.Logf("uniform %s: recall@10 = %.4f at ef=%d (M %d, ef_construction %d) over %d queries, %d vectors",
				metric, r, cfg.EfSearch, cfg.M, cfg.EfConstruction, len(qs), recallN)
			if r < 0.95 {
				t.Fatalf("recall@10 = %.4f at default settings, want >= 0.95", r)
			}
			if got := reachable(x); got != x.Len() {
				t.Fatalf("%d of %d nodes reachable from the entry point", got, x.Len())
			}
		})
	}
}
