package hnsw

import (
	"math"
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
