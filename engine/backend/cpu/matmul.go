package cpu

import (
	"fmt"
	"math"
	"sync"

	"github.com/infernix/infernix/engine/backend"
)

// rowsPerTile is how many weight rows are converted to f32 together and then
// multiplied with every input row: the tile stays in cache while x streams.
const rowsPerTile = 16

var tilePool = sync.Pool{New: func() any { return new([]float32) }}

func (b *Backend) MatMul(out, x, w backend.Tensor) {
	o, xx, ww := f32(out), f32(x), f32(w)
	T, I, O := xx.rows, xx.cols, ww.rows
	if ww.cols != I || o.rows != T || o.cols != O {
		panic(fmt.Sprintf("cpu: MatMul shapes out %dx%d x %dx%d w %dx%d", o.rows, o.cols, T, I, O, ww.cols))
	}
	if T == 1 {
		b.pool.parallel(O, 64, func(lo, hi int) { matVec(o.f32, xx.f32, ww, lo, hi) })
		return
	}
	b.pool.parallel((O+rowsPerTile-1)/rowsPerTile, 1, func(lo, hi int) {
		bufp := tilePool.Get().(*[]float32)
		if cap(*bufp) < rowsPerTile*I {
			*bufp = make([]float32, rowsPerTile*I)
		}
		buf := (*bufp)[:rowsPerTile*I]
		for tile := lo; tile < hi; tile++ {
			r0 := tile * rowsPerTile
			r1 := min(r0+rowsPerTile, O)
			rows := make2D(buf, ww, r0, r1, I)
			for t := 0; t < T; t++ {
				xr := xx.f32[t*I : (t+1)*I]
				orow := o.f32[t*O : (t+1)*O]
				for k, wr := range rows[:r1-r0] {
					orow[r0+k] = dot(wr, xr)
				}
			}
		}
		tilePool.Put(bufp)
	})
}

// make2D returns weight rows r0..r1 as f32 slices, converting into buf when
// the weight is F16/BF16.
func make2D(buf []float32, w *Tensor, r0, r1, I int) (rows [rowsPerTile][]float32) {
	for r := r0; r < r1; r++ {
		rows[r-r0] = rowF32(w, r, buf[(r-r0)*I:(r-r0+1)*I])
	}
	return rows
}

func matVec(out, x []float32, w *Tensor, lo, hi int) {
	I := w.cols
	switch {
	case w.f32 != nil:
		for r := lo; r < hi; r++ {
			out[r] = dot(w.f32[r*I:(r+1)*I], x)
		}
	case w.dt == backend.BF16:
		for r := lo; r < hi; r++ {
			out[r] = dotBF16(w.u16[r*I:(r+1)*I], x)
		}
	case w.dt == backend.Q8_0:
		rb := I / 32 * 34
		for r := lo; r < hi; r++ {
			out[r] = dotQ8_0(w.q[r*rb:(r+1)*rb], x)
		}
	default:
		for r := lo; r < hi; r++ {
			out[r] = dotF16(w.u16[r*I:(r+1)*I], x)
		}
	}
}

func dotGeneric(a, b []float32) float32 {
	n := len(a)
	b = b[:n]
	var s0, s1, s2, s3, s4, s5, s6, s7 float32
	i := 0
	for ; i+8 <= n; i += 8 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
		s4 += a[i+4] * b[i+4]
		s5 += a[i+5] * b[i+5]
		s6 += a[i+6] * b[i+6]
		s7 += a[i+7] * b[i+7]
	}
	for ; i < n; i++ {
		s0 += a[i] * b[i]
	}
	return ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))
}

// dotQ8_0Generic is the dot of Q8_0 blocks with b, each value dequantized
// (float32(q)·d) before its product, as the AVX2 version does.
func dotQ8_0Generic(a []byte, b []float32) float32 {
	var s [8]float32
	for blk := 0; blk < len(a)/34; blk++ {
		q := a[34*blk : 34*blk+34]
		d := f16Table[uint16(q[0])|uint16(q[1])<<8]
		x := b[32*blk : 32*blk+32]
		for j := 0; j < 32; j++ {
			s[j%8] += float32(int8(q[2+j])) * d * x[j]
		}
	}
	return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]))
}

func dotBF16Generic(a []uint16, b []float32) float32 {
	n := len(a)
	b = b[:n]
	var s0, s1, s2, s3, s4, s5, s6, s7 float32
	i := 0
	for ; i+8 <= n; i += 8 {
		s0 += math.Float32frombits(uint32(a[i])<<16) * b[i]
		s1 += math.Float32frombits(uint32(a[i+1])<<16) * b[i+1]
		s2 += math.Float32frombits(uint32(a[i+2])<<16) * b[i+2]
		s3 += math.Float32frombits(uint32(a[i+3])<<16) * b[i+3]
		s4 += math.Float32frombits(uint32(a[i+4])<<16) * b[i+4]
		s5 += math.Float32frombits(uint32(a[i+5])<<16) * b[i+5]
		s6 += math.Float32frombits(uint32(a[i+6])<<16) * b[i+6]
		s7 += math.Float32frombits(uint32(a[i+7])<<16) * b[i+7]
	}
	for ; i < n; i++ {
		s0 += math.Float32frombits(uint32(a[i])<<16) * b[i]
	}
	return ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))
}

func dotF16Generic(a []uint16, b []float32) float32 {
	n := len(a)
	b = b[:n]
	tab := f16Table
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= n; i += 4 {
		s0 += tab[a[i]] * b[i]
		s1 += tab[a[i+1]] * b[i+1]
		s2 += tab[a[i+2]] * b[i+2]
		s3 += tab[a[i+3]] * b[i+3]
	}
	for ; i < n; i++ {
		s0 += tab[a[i]] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}
