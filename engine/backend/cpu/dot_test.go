package cpu

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestDotKernels compares the vector dot products with the scalar reference
// on random data of every length class (multiples of 32, of 8, and tails).
func TestDotKernels(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 7, 8, 9, 31, 32, 33, 64, 100, 1024, 4099} {
		a := make([]float32, n)
		b := make([]float32, n)
		bf := make([]uint16, n)
		hf := make([]uint16, n)
		for i := range a {
			a[i] = float32(r.NormFloat64())
			b[i] = float32(r.NormFloat64())
			bf[i] = uint16(math.Float32bits(a[i]) >> 16)
			hf[i] = floatToHalf(a[i])
		}
		var ref, refBF, refHF float64
		for i := range a {
			ref += float64(a[i]) * float64(b[i])
			refBF += float64(bf16ToFloat(bf[i])) * float64(b[i])
			refHF += float64(f16Table[hf[i]]) * float64(b[i])
		}
		tol := 1e-4 * math.Sqrt(float64(n))
		if d := math.Abs(float64(dot(a, b)) - ref); d > tol {
			t.Errorf("dot n=%d: off by %g", n, d)
		}
		if d := math.Abs(float64(dotBF16(bf, b)) - refBF); d > tol {
			t.Errorf("dotBF16 n=%d: off by %g", n, d)
		}
		if d := math.Abs(float64(dotF16(hf, b)) - refHF); d > tol {
			t.Errorf("dotF16 n=%d: off by %g", n, d)
		}
	}
}

// floatToHalf rounds toward zero; exactness does not matter here, only that
// both paths see the same half values.
func floatToHalf(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int((b>>23)&0xff) - 127 + 15
	if exp <= 0 {
		return sign
	}
	if exp >= 31 {
		return sign | 0x7bff
	}
	return sign | uint16(exp)<<10 | uint16((b>>13)&0x3ff)
}

func BenchmarkDotBF16(b *testing.B) {
	w := make([]uint16, 1<<16)
	x := make([]float32, 1<<16)
	for i := range w {
		w[i], x[i] = 0x3f80, 1
	}
	b.SetBytes(2 << 16)
	for i := 0; i < b.N; i++ {
		dotBF16(w, x)
	}
}
