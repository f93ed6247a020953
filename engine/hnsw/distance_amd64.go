package hnsw

import "golang.org/x/sys/cpu"

// useAVX2 selects the assembly distances.
var useAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasFMA

// useAVX512 selects dotScaledAVX512 over dotScaledAVX2: it scales 8
// numbers in one register, not two halves joined.
var useAVX512 = useAVX2 && cpu.X86.HasAVX512F && cpu.X86.HasAVX512VL

// dotAVX2 returns the dot product of the n float32s at a and at b.
//
//go:noescape
func dotAVX2(a, b *float32, n int) float32

// dotScaledAVX2 returns the dot product of the n float32s at a and those
// at b each scaled by inv (float32(float64(b[i])*inv)), summed as dotAVX2
// sums.
//
//go:noescape
func dotScaledAVX2(a, b *float32, n int, inv float64) float32

// dotScaledAVX512 is dotScaledAVX2 in 512-bit registers where it scales.
//
//go:noescape
func dotScaledAVX512(a, b *float32, n int, inv float64) float32

// sqDistAVX2 returns the squared Euclidean distance between the n float32s
// at a and at b.
//
//go:noescape
func sqDistAVX2(a, b *float32, n int) float32
