package cpu

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/infernix/infernix/engine/backend"
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

// randQ8_0 is n values (n a multiple of 32) as random Q8_0 blocks, and
// their dequantized values.
func randQ8_0(r *rand.Rand, n int) ([]byte, []float32) {
	q := make([]byte, n/32*34)
	vals := make([]float32, n)
	for blk := 0; blk < n/32; blk++ {
		h := backend.Float32ToHalf(float32(r.Float64()*0.05 + 1e-3))
		q[34*blk], q[34*blk+1] = byte(h), byte(h>>8)
		for j := 0; j < 32; j++ {
			v := int8(r.IntN(255) - 127)
			q[34*blk+2+j] = byte(v)
			vals[32*blk+j] = float32(v) * backend.HalfToFloat32(h)
		}
	}
	return q, vals
}

// TestDotQ8_0: the AVX2 kernel and the scalar one against float64 over the
// dequantized values, for 0 to 129 blocks.
func TestDotQ8_0(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, blocks := range []int{0, 1, 2, 3, 8, 129} {
		q, vals := randQ8_0(r, 32*blocks)
		b := make([]float32, len(vals))
		var ref float64
		for i := range b {
			b[i] = float32(r.NormFloat64())
			ref += float64(vals[i]) * float64(b[i])
		}
		tol := 1e-4 * math.Sqrt(float64(len(b))+1)
		for name, got := range map[string]float32{"dotQ8_0": dotQ8_0(q, b), "generic": dotQ8_0Generic(q, b)} {
			if d := math.Abs(float64(got) - ref); d > tol {
				t.Errorf("%s, %d blocks: off by %g", name, blocks, d)
			}
		}
	}
}

// TestMatMulQ8_0: a Q8_0 weight multiplies as its dequantized F32 copy, for
// one row (the matrix-vector path) and several (the tiled path), and reads
// as that copy through Embed.
func TestMatMulQ8_0(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	be := New(2)
	const O, I = 37, 96
	q, vals := randQ8_0(r, O*I)
	wq, err := be.Upload("w", backend.Q8_0, []int{O, I}, q)
	if err != nil {
		t.Fatal(err)
	}
	wf, _ := be.Upload("wf", backend.F32, []int{O, I}, f32Bytes(vals))
	if _, err := be.Upload("bad", backend.Q8_0, []int{2, 48}, make([]byte, 2*34+34)); err == nil {
		t.Error("Q8_0 rows of 48 accepted")
	}
	for _, T := range []int{1, 3} {
		x := be.Alloc(T, I).(*Tensor)
		for i := range x.f32 {
			x.f32[i] = float32(r.NormFloat64())
		}
		oq, of := be.Alloc(T, O).(*Tensor), be.Alloc(T, O).(*Tensor)
		be.MatMul(oq, x, wq)
		be.MatMul(of, x, wf)
		for i := range oq.f32 {
			if d := math.Abs(float64(oq.f32[i] - of.f32[i])); d > 1e-4 {
				t.Fatalf("T=%d: out[%d] %v, F32 weights %v", T, i, oq.f32[i], of.f32[i])
			}
		}
	}
	row := make([]float32, I)
	if got := rowF32(wq.(*Tensor), 5, row); got[7] != vals[5*I+7] || got[95] != vals[5*I+95] {
		t.Errorf("row 5 dequantized to %v…, want %v…", got[7], vals[5*I+7])
	}
}

func f32Bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
	}
	return b
}

func BenchmarkDotQ8_0(b *testing.B) {
	q, _ := randQ8_0(rand.New(rand.NewPCG(1, 1)), 1<<16)
	x := make([]float32, 1<<16)
	b.SetBytes(int64(len(q)))
	for i := 0; i < b.N; i++ {
		dotQ8_0(q, x)
	}
}
