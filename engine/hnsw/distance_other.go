//go:build !amd64

package hnsw

const (
	useAVX2   = false
	useAVX512 = false
)

func dotAVX2(a, b *float32, n int) float32    { panic("hnsw: no assembly on this platform") }
func sqDistAVX2(a, b *float32, n int) float32 { panic("hnsw: no assembly on this platform") }
func dotScaledAVX2(a, b *float32, n int, inv float64) float32 {
	panic("hnsw: no assembly on this platform")
}

func dotScaledAVX512(a, b *float32, n int, inv float64) float32 {
	panic("hnsw: no assembly on this platform")
}
