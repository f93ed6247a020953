package hnsw

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestDotScaledExact checks that dotScaled of a vector and its inverse norm
// is, to the bit, dot of the same vector normalised as the graph stores it
// — in assembly and in Go, at every length a block or a tail takes.
func TestDotScaledExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 9))
	for n := 1; n <= 300; n++ {
		for range 20 {
			a, b := make([]float32, n), make([]float32, n)
			scale := math.Pow(10, float64(rng.IntN(12)-6))
			for i := range a {
				a[i] = float32(rng.NormFloat64())
				b[i] = float32(rng.NormFloat64() * scale)
			}
			normalize(a)
			inv := invNorm(sumSquares(b))
			u := make([]float32, n)
			scaleBy(u, b, inv)
			if got, want := dotScaledGo(a, b, inv), dotGo(a, u); math.Float32bits(got) != math.Float32bits(want) {
				t.Fatalf("n %d: dotScaledGo %v, dotGo of the scaled vector %v", n, got, want)
			}
			want := dot(a, u)
			for name, k := range scaledKernels() {
				if got := k(a, b, inv); math.Float32bits(got) != math.Float32bits(want) {
					t.Fatalf("n %d: %s %v, dot of the scaled vector %v", n, name, got, want)
				}
			}
		}
	}
}

// scaledKernels are dotScaled and each assembly kernel this machine runs.
func scaledKernels() map[string]func(a, b []float32, inv float64) float32 {
	ks := map[string]func(a, b []float32, inv float64) float32{"dotScaled": dotScaled}
	if useAVX2 {
		ks["dotScaledAVX2"] = func(a, b []float32, inv float64) float32 { return dotScaledAVX2(&a[0], &b[0], len(a), inv) }
	}
	if useAVX512 {
		ks["dotScaledAVX512"] = func(a, b []float32, inv float64) float32 { return dotScaledAVX512(&a[0], &b[0], len(a), inv) }
	}
	return ks
}

// TestScaleUnitIsScaleBy checks that a vector normalised in place equals
// it scaled by its inverse norm, zero vectors included.
func TestScaleUnitIsScaleBy(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 1000 {
		v := make([]float32, 1+rng.IntN(40))
		for i := range v {
			if rng.IntN(4) > 0 {
				v[i] = float32(rng.NormFloat64() * 1e3)
			}
		}
		u := make([]float32, len(v))
		scaleBy(u, v, invNorm(sumSquares(v)))
		normalize(v)
		for i := range v {
			if math.Float32bits(u[i]) != math.Float32bits(v[i]) {
				t.Fatalf("number %d: %v scaled, %v normalised", i, u[i], v[i])
			}
		}
	}
}

func BenchmarkDotScaled128(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	x, y := make([]float32, 128), make([]float32, 128)
	for i := range x {
		x[i], y[i] = rng.Float32(), rng.Float32()
	}
	inv := invNorm(sumSquares(y))
	b.Run("dot", func(b *testing.B) {
		for b.Loop() {
			dot(x, y)
		}
	})
	b.Run("scaled", func(b *testing.B) {
		for b.Loop() {
			dotScaled(x, y, inv)
		}
	})
}

// A graph loaded from a section of version 3 holds no copy of its live
// vectors: it reads each where its document keeps it (a change there,
// which a stored document never makes, shows in its next answer), and its
// heap is the built graph's less their bytes.
func TestMappedGraphReadsTheDocumentsVectors(t *testing.T) {
	for _, metric := range []Metric{Cosine, L2} {
		t.Run(metric.String(), func(t *testing.T) {
			const n, dim = 1500, 32
			vs := randVecs(80, n, dim)
			x := build(t, Config{Dim: dim, Metric: metric, M: 8, EfConstruction: 32}, vs)
			docs := docsOf(vs)
			head, section, r := saveMapped(t, x, docs)
			y, err := loadAttached(head, section, r, docs)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(y.Release)
			heapX, heapY := x.MemoryBytes(), y.MemoryBytes()-y.MappedBytes()
			if vecs := int64(4 * n * dim); heapY > heapX-vecs {
				t.Fatalf("mapped graph's heap %d bytes, built graph's %d: not %d of vectors less", heapY, heapX, vecs)
			}
			q := slices.Clone(vs[7])
			before := search(t, y, q, Query{K: 1, Exact: true})
			if before[0].ID != 7 {
				t.Fatalf("nearest of vector 7: %v", before)
			}
			for i := range vs[7] {
				vs[7][i] = -vs[7][i] // the document's bytes, not a copy
			}
			after := search(t, y, q, Query{K: 1, Exact: true})
			if after[0].ID == 7 {
				t.Fatalf("the graph answers %v for a vector whose document now holds its opposite", after)
			}
		})
	}
}
