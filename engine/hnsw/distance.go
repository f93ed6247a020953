package hnsw

import "math"

// dot returns the dot product of a and b, which have the same length. On
// amd64 with AVX2 and FMA it runs in assembly (distance_amd64.s).
func dot(a, b []float32) float32 {
	if useAVX2 && len(a) > 0 {
		return dotAVX2(&a[0], &b[:len(a)][0], len(a))
	}
	return dotGo(a, b)
}

// dotScaled returns dot(a, u) for u the vector b scaled by inv as
// scaleUnit scales it (each number float32(float64(b[i])*inv)), without
// writing u anywhere: the same sum, to the bit, as dot gives of a and u
// (the same lanes, in the same order). A graph whose vectors are its
// documents' measures them so, each with its inverse norm (mapped.go).
func dotScaled(a, b []float32, inv float64) float32 {
	switch {
	case len(a) == 0:
	case useAVX512:
		return dotScaledAVX512(&a[0], &b[:len(a)][0], len(a), inv)
	case useAVX2:
		return dotScaledAVX2(&a[0], &b[:len(a)][0], len(a), inv)
	}
	return dotScaledGo(a, b, inv)
}

// sqDist returns the squared Euclidean distance between a and b, in
// assembly where dot is.
func sqDist(a, b []float32) float32 {
	if useAVX2 && len(a) > 0 {
		return sqDistAVX2(&a[0], &b[:len(a)][0], len(a))
	}
	return sqDistGo(a, b)
}

// dotGo is dot in Go. It reads only its arguments and is left out of the
// race detector's instrumentation, which otherwise multiplies the cost of
// every graph operation under -race many times over.
//
//go:norace
func dotGo(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+8 <= len(a); i += 8 {
		aa, bb := a[i:i+8:i+8], b[i:i+8:i+8]
		s0 += aa[0]*bb[0] + aa[4]*bb[4]
		s1 += aa[1]*bb[1] + aa[5]*bb[5]
		s2 += aa[2]*bb[2] + aa[6]*bb[6]
		s3 += aa[3]*bb[3] + aa[7]*bb[7]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return s0 + s1 + s2 + s3
}

// dotScaledGo is dotScaled in Go, dotGo's sums of b's numbers scaled;
// like dotGo it is not instrumented by the race detector.
//
//go:norace
func dotScaledGo(a, b []float32, inv float64) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	var u [8]float32
	i := 0
	for ; i+8 <= len(a); i += 8 {
		aa, bb := a[i:i+8:i+8], b[i:i+8:i+8]
		for j, f := range bb {
			u[j] = float32(float64(f) * inv)
		}
		s0 += aa[0]*u[0] + aa[4]*u[4]
		s1 += aa[1]*u[1] + aa[5]*u[5]
		s2 += aa[2]*u[2] + aa[6]*u[6]
		s3 += aa[3]*u[3] + aa[7]*u[7]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * float32(float64(b[i])*inv)
	}
	return s0 + s1 + s2 + s3
}

// sqDistGo is sqDist in Go; like dotGo it is not instrumented by the race
// detector.
//
//go:norace
func sqDistGo(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		d0 := a[i] - b[i]
		d1 := a[i+1] - b[i+1]
		d2 := a[i+2] - b[i+2]
		d3 := a[i+3] - b[i+3]
		s0 += d0 * d0
		s1 += d1 * d1
		s2 += d2 * d2
		s3 += d3 * d3
	}
	for ; i < len(a); i++ {
		d := a[i] - b[i]
		s0 += d * d
	}
	return s0 + s1 + s2 + s3
}

// dist is the graph's distance: lower is nearer. Cosine (on normalised
// vectors) and Dot use the negated dot product, L2 the squared distance.
func (x *Index) dist(a, b []float32) float32 {
	if x.l2 {
		return sqDist(a, b)
	}
	return -dot(a, b)
}

// score64 returns the public score of a against b in float64 precision:
// similarity or dot product, or the negative Euclidean distance for L2.
func score64(m Metric, a, b []float32) float64 {
	var s float64
	if m == L2 {
		for i := range a {
			d := float64(a[i]) - float64(b[i])
			s += d * d
		}
		return -math.Sqrt(s)
	}
	for i := range a {
		s += float64(a[i]) * float64(b[i])
	}
	return s
}

// normalize scales v in place to unit length; a zero vector stays zero.
func normalize(v []float32) { scaleUnit(v, sumSquares(v)) }

// normalizeFinite is normalize of a vector not yet known finite: it
// reports whether it is, and scales it only then.
func normalizeFinite(v []float32) bool {
	s := sumSquares(v)
	if math.IsNaN(s) || math.IsInf(s, 0) {
		return false
	}
	scaleUnit(v, s)
	return true
}

func sumSquares(v []float32) float64 {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	return s
}

// scaleUnit scales v, whose squares sum to s, to unit length.
func scaleUnit(v []float32, s float64) { scaleBy(v, v, invNorm(s)) }

// invNorm is what scaleUnit scales a vector whose squares sum to s by:
// 1/√s, or 1 for a zero vector (which stays zero).
func invNorm(s float64) float64 {
	if s == 0 {
		return 1
	}
	return 1 / math.Sqrt(s)
}

// scaleBy writes v scaled by inv into dst, as scaleUnit scales it.
func scaleBy(dst, v []float32, inv float64) {
	for i, x := range v {
		dst[i] = float32(float64(x) * inv)
	}
}

// finite reports whether every value of v is a finite number.
func finite(v []float32) bool {
	for _, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return false
		}
	}
	return true
}
