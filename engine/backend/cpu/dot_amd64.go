package cpu

import "golang.org/x/sys/cpu"

// The dot products dominate every matmul; with AVX2+FMA (and F16C for F16)
// they run 8 lanes wide. The scalar versions remain the reference and handle
// the last n%8 elements.
var hasAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasFMA

var hasF16C = hasAVX2 && cpu.X86.HasF16C

//go:noescape
func dotBF16AVX2(a *uint16, b *float32, n int) float32

//go:noescape
func dotF16AVX2(a *uint16, b *float32, n int) float32

//go:noescape
func dotF32AVX2(a *float32, b *float32, n int) float32

func dot(a, b []float32) float32 {
	n := len(a)
	if !hasAVX2 || n < 8 {
		return dotGeneric(a, b)
	}
	b = b[:n]
	m := n &^ 7
	s := dotF32AVX2(&a[0], &b[0], m)
	if m < n {
		s += dotGeneric(a[m:], b[m:])
	}
	return s
}

func dotBF16(a []uint16, b []float32) float32 {
	n := len(a)
	if !hasAVX2 || n < 8 {
		return dotBF16Generic(a, b)
	}
	b = b[:n]
	m := n &^ 7
	s := dotBF16AVX2(&a[0], &b[0], m)
	if m < n {
		s += dotBF16Generic(a[m:], b[m:])
	}
	return s
}

func dotF16(a []uint16, b []float32) float32 {
	n := len(a)
	if !hasF16C || n < 8 {
		return dotF16Generic(a, b)
	}
	b = b[:n]
	m := n &^ 7
	s := dotF16AVX2(&a[0], &b[0], m)
	if m < n {
		s += dotF16Generic(a[m:], b[m:])
	}
	return s
}

//go:noescape
func dotQ8_0AVX2(a *byte, b *float32, blocks int) float32

// dotQ8_0 is the dot of a row of Q8_0 blocks with b (len(b) = 32 blocks).
func dotQ8_0(a []byte, b []float32) float32 {
	n := len(a) / 34
	if !hasF16C || n == 0 {
		return dotQ8_0Generic(a, b)
	}
	_ = b[32*n-1]
	return dotQ8_0AVX2(&a[0], &b[0], n)
}
