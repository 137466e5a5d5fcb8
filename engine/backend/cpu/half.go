package cpu

import (
	"math"

	"github.com/infernix/infernix/engine/backend"
)

// f16Table converts IEEE half floats to float32 by lookup: cheaper than the
// bit manipulation in the matmul inner loop.
var f16Table = func() []float32 {
	t := make([]float32, 1<<16)
	for i := range t {
		t[i] = backend.HalfToFloat32(uint16(i))
	}
	return t
}()

func bf16ToFloat(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// rowF32 returns row r of weight w as float32, converting into buf if needed.
func rowF32(w *Tensor, r int, buf []float32) []float32 {
	lo, hi := r*w.cols, (r+1)*w.cols
	switch {
	case w.f32 != nil:
		return w.f32[lo:hi]
	case w.dt == backend.Q8_0:
		buf = buf[:w.cols]
		dequantQ8_0(w.q[lo/32*34:hi/32*34], buf)
		return buf
	case w.dt == backend.F16:
		src := w.u16[lo:hi]
		buf = buf[:len(src)]
		for i, h := range src {
			buf[i] = f16Table[h]
		}
		return buf
	default:
		src := w.u16[lo:hi]
		buf = buf[:len(src)]
		for i, h := range src {
			buf[i] = math.Float32frombits(uint32(h) << 16)
		}
		return buf
	}
}

// dequantQ8_0 expands Q8_0 blocks into dst: float32(q)·d, as ggml does.
func dequantQ8_0(src []byte, dst []float32) {
	for b := 0; b < len(dst)/32; b++ {
		blk := src[34*b : 34*b+34]
		d := f16Table[uint16(blk[0])|uint16(blk[1])<<8]
		for j, q := range blk[2:] {
			dst[32*b+j] = float32(int8(q)) * d
		}
	}
}
