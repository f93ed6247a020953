package hnsw

import (
	"bytes"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
)

// TestAgainstModel runs a random history of adds, updates and removes
// (through purges and slot reuse) and checks the index against a plain
// map of live vectors: exact search equals a brute-force ranking, graph
// search returns only live ids with their current scores, and the graph
// saved and loaded at any point answers alike.
func TestAgainstModel(t *testing.T) {
	for run := range 30 {
		metric := []Metric{Cosine, L2, Dot}[run%3]
		t.Run(metric.String(), func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(run), 77))
			const dim = 6
			x, err := New(Config{Dim: dim, Metric: metric, M: 4, EfConstruction: 32, Seed: int64(run)})
			if err != nil {
				t.Fatal(err)
			}
			model := map[int64][]float32{}
			vec := func() []float32 {
				v := make([]float32, dim)
				for i := range v {
					v[i] = r.Float32()*2 - 1
				}
				return v
			}
			for step := range 4000 {
				id := int64(r.IntN(300))
				switch op := r.IntN(10); {
				case op < 6:
					v := vec()
					if err := x.Add(id, v); err != nil {
						t.Fatal(err)
					}
					model[id] = v
				default:
					x.Remove(id)
					delete(model, id)
				}
				if x.Len() != len(model) {
					t.Fatalf("step %d: Len %d, model %d", step, x.Len(), len(model))
				}
				if step%97 == 0 {
					checkModel(t, x, model, metric, vec())
				}
				if step%701 == 0 {
					var buf bytes.Buffer
					if _, err := x.WriteTo(&buf); err != nil {
						t.Fatal(err)
					}
					y, err := Load(&buf, vectorsOf(model))
					if err != nil {
						t.Fatalf("step %d: load: %v", step, err)
					}
					q := vec()
					for _, o := range []Query{{K: 7}, {K: 7, Exact: true}} {
						if a, b := search(t, x, q, o), search(t, y, q, o); !slices.Equal(a, b) {
							t.Fatalf("step %d: loaded graph answers %v, saved one %v", step, b, a)
						}
					}
					x = y // go on with the loaded graph
				}
			}
		})
	}
}

// checkModel compares x's answers for q with a brute-force ranking of
// model.
func checkModel(t *testing.T, x *Index, model map[int64][]float32, metric Metric, q []float32) {
	t.Helper()
	type scored struct {
		id    int64
		score float64
	}
	qn := slices.Clone(q)
	if metric == Cosine {
		normalize(qn)
	}
	var want []scored
	for id, v := range model {
		vn := slices.Clone(v)
		if metric == Cosine {
			normalize(vn)
		}
		want = append(want, scored{id, score64(metric, qn, vn)})
	}
	sort.Slice(want, func(i, j int) bool {
		if want[i].score != want[j].score {
			return want[i].score > want[j].score
		}
		return want[i].id < want[j].id
	})
	k := 10
	exact := search(t, x, q, Query{K: k, Exact: true})
	if len(exact) != min(k, len(want)) {
		t.Fatalf("exact gave %d hits, want %d", len(exact), min(k, len(want)))
	}
	for i, h := range exact {
		if h.ID != want[i].id || math.Abs(h.Score-want[i].score) > 1e-5 {
			t.Fatalf("exact hit %d = %v, want %v", i, h, want[i])
		}
	}
	score := map[int64]float64{}
	for _, w := range want {
		score[w.id] = w.score
	}
	graph := search(t, x, q, Query{K: k})
	if len(graph) != min(k, len(want)) {
		t.Fatalf("graph gave %d hits, want %d", len(graph), min(k, len(want)))
	}
	for _, h := range graph {
		s, ok := score[h.ID]
		if !ok || math.Abs(h.Score-s) > 1e-5 {
			t.Fatalf("graph hit %v: live %v with score %v", h, ok, s)
		}
	}
}
