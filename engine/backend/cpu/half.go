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
		t[i] = halfToFloat(uint16(i))
	}
	return t
}()

func halfToFloat(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := int(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch {
	case exp == 0 && mant == 0:
		return math.Float32frombits(sign)
	case exp == 0: // subnormal
		f := float32(mant) / 1024 / 16384
		if sign != 0 {
			return -f
		}
		return f
	case exp == 31:
		return math.Float32frombits(sign | 0xff<<23 | mant<<13)
	}
	return math.Float32frombits(sign | uint32(exp-15+127)<<23 | mant<<13)
}

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
