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
