package cpu

import (
	"fmt"
	"math"

	"github.com/infernix/infernix/engine/backend"
)

func (b *Backend) Embed(out, table backend.Tensor, ids []int32) {
	o, tab := f32(out), f32(table)
	if o.cols != tab.cols || o.rows < len(ids) {
		panic(fmt.Sprintf("cpu: Embed out %dx%d table %dx%d ids %d", o.rows, o.cols, tab.rows, tab.cols, len(ids)))
	}
	for t, id := range ids {
		if id < 0 || int(id) >= tab.rows {
			panic(fmt.Sprintf("cpu: Embed token id %d outside vocabulary of %d", id, tab.rows))
		}
		dst := o.f32[t*o.cols : (t+1)*o.cols]
		src := rowF32(tab, int(id), dst)
		if &src[0] != &dst[0] {
			copy(dst, src)
		}
	}
}

func (b *Backend) RMSNorm(out, x, w backend.Tensor, eps float32) {
	o, xx, ww := f32(out), f32(x), f32(w)
	n := xx.cols
	if ww.rows*ww.cols != n || o.cols != n || o.rows != xx.rows {
		panic(fmt.Sprintf("cpu: RMSNorm x %dx%d w %dx%d", xx.rows, xx.cols, ww.rows, ww.cols))
	}
	wt := weightVec(ww)
	b.pool.parallel(xx.rows, 32, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			src := xx.f32[r*n : (r+1)*n]
			dst := o.f32[r*n : (r+1)*n]
			var ss float64
			for _, v := range src {
				ss += float64(v) * float64(v)
			}
			inv := float32(1 / math.Sqrt(ss/float64(n)+float64(eps)))
			for i, v := range src {
				dst[i] = v * inv * wt[i]
			}
		}
	})
}

// weightVec returns a small weight (norm scales) as f32, converting once and
// caching the result on the tensor.
func weightVec(w *Tensor) []float32 {
	if w.f32 != nil {
		return w.f32
	}
	v := make([]float32, w.rows*w.cols)
	for r := 0; r < w.rows; r++ {
		rowF32(w, r, v[r*w.cols:(r+1)*w.cols])
	}
	w.f32, w.u16 = v, nil
	return v
}

func (b *Backend) Add(out, a, c backend.Tensor) {
	o, aa, cc := f32(out), f32(a), f32(c)
	if len(aa.f32) != len(cc.f32) || len(o.f32) != len(aa.f32) {
		panic("cpu: Add shape mismatch")
	}
	for i := range o.f32 {
		o.f32[i] = aa.f32[i] + cc.f32[i]
	}
}

func (b *Backend) SwiGLU(out, gate, up backend.Tensor) {
	o, g, u := f32(out), f32(gate), f32(up)
	if len(g.f32) != len(u.f32) || len(o.f32) != len(g.f32) {
		panic("cpu: SwiGLU shape mismatch")
	}
	b.pool.parallel(len(o.f32), 4096, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			x := g.f32[i]
			o.f32[i] = x / (1 + float32(math.Exp(float64(-x)))) * u.f32[i]
		}
	})
}

func (b *Backend) RoPE(x backend.Tensor, heads int, pos []int32, r *backend.Rope) {
	xx := f32(x)
	hd := xx.cols / heads
	half := r.Half
	for t, p := range pos {
		if int(p) >= r.MaxPos {
			panic(fmt.Sprintf("cpu: RoPE position %d beyond table of %d", p, r.MaxPos))
		}
		cs := r.Cos[int(p)*half : int(p+1)*half]
		sn := r.Sin[int(p)*half : int(p+1)*half]
		row := xx.f32[t*xx.cols : (t+1)*xx.cols]
		for h := 0; h < heads; h++ {
			v := row[h*hd : h*hd+2*half]
			for i := 0; i < half; i++ {
				x1, x2 := v[i], v[i+half]
				v[i] = x1*cs[i] - x2*sn[i]
				v[i+half] = x2*cs[i] + x1*sn[i]
			}
		}
	}
}

func (b *Backend) Gather(out, x backend.Tensor, idx []int32) {
	o, xx := f32(out), f32(x)
	for i, r := range idx {
		copy(o.f32[i*o.cols:(i+1)*o.cols], xx.f32[int(r)*xx.cols:(int(r)+1)*xx.cols])
	}
}
