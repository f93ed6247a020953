package hnsw

import (
	"math"
	"slices"
	"testing"
)

// The distances, in assembly or not, agree with a float64 reference on
// every length around the block sizes.
func TestDistances(t *testing.T) {
	for n := 1; n <= 100; n++ {
		vs := randVecs(uint64(n), 2, n)
		a, b := vs[0], vs[1]
		var wd, ws float64
		for i := range a {
			wd += float64(a[i]) * float64(b[i])
			d := float64(a[i]) - float64(b[i])
			ws += d * d
		}
		tol := 1e-5 * float64(n)
		for name, got := range map[string]float32{"dot": dot(a, b), "dotGo": dotGo(a, b)} {
			if math.Abs(float64(got)-wd) > tol {
				t.Fatalf("n=%d %s = %v, want %v", n, name, got, wd)
			}
		}
		for name, got := range map[string]float32{"sqDist": sqDist(a, b), "sqDistGo": sqDistGo(a, b)} {
			if math.Abs(float64(got)-ws) > tol {
				t.Fatalf("n=%d %s = %v, want %v", n, name, got, ws)
			}
		}
	}
	t.Logf("assembly distances in use: %v", useAVX2)
}

func BenchmarkDot128(b *testing.B) {
	vs := randVecs(1, 2, 128)
	var s float32
	for b.Loop() {
		s += dot(vs[0], vs[1])
	}
	_ = s
}

func BenchmarkDotGo128(b *testing.B) {
	vs := randVecs(1, 2, 128)
	var s float32
	for b.Loop() {
		s += dotGo(vs[0], vs[1])
	}
	_ = s
}

// normalizeFinite refuses what finite refuses, leaving it as it was, and
// scales the rest exactly as normalize does.
func TestNormalizeFinite(t *testing.T) {
	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	for _, v := range [][]float32{
		{3, 4}, {0, 0}, {1e-30, 2e-30}, {math.MaxFloat32, math.MaxFloat32}, {-2, 0.5, 7},
		{1, inf}, {-inf, 2}, {nan, 1}, {0, 0, nan},
	} {
		got, want := slices.Clone(v), slices.Clone(v)
		ok := normalizeFinite(got)
		if ok != finite(v) {
			t.Fatalf("%v: finite %v, said %v", v, finite(v), ok)
		}
		if ok {
			normalize(want)
		}
		if !slices.Equal(math32bits(got), math32bits(want)) {
			t.Fatalf("%v: %v, want %v", v, got, want)
		}
	}
}

func math32bits(v []float32) []uint32 {
	out := make([]uint32, len(v))
	for i, x := range v {
		out[i] = math.Float32bits(x)
	}
	return out
}
