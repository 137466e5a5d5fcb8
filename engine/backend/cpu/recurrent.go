package cpu

import (
	"fmt"
	"math"

	"github.com/infernix/infernix/engine/backend"
)

var _ backend.Recurrent = (*Backend)(nil)

// run is the token range [lo, hi) of one sequence in a batch.
type run struct {
	lo, hi int
	seq    int32
}

// seqRuns splits a batch into its per-sequence runs (tokens of a sequence are
// contiguous by the AttnBatch contract).
func seqRuns(b *backend.AttnBatch, T int) []run {
	var out []run
	for t := 0; t < T; {
		u := t + 1
		for u < T && b.Seq[u] == b.Seq[t] {
			u++
		}
		out = append(out, run{t, u, b.Seq[t]})
		t = u
	}
	return out
}

func silu(x float32) float32 { return x / (1 + float32(math.Exp(float64(-x)))) }

func (b *Backend) CausalConv1D(out, x, w, state backend.Tensor, ab *backend.AttnBatch) {
	o, xx, ww, st := f32(out), f32(x), f32(w), f32(state)
	C, K := xx.cols, ww.cols
	T := xx.rows
	if o.cols != C || ww.rows != C || st.cols != C || o.rows != T || &o.f32[0] == &xx.f32[0] {
		panic(fmt.Sprintf("cpu: CausalConv1D out %dx%d x %dx%d w %dx%d state %dx%d", o.rows, o.cols, xx.rows, xx.cols, ww.rows, ww.cols, st.rows, st.cols))
	}
	wt := weightVec(ww)
	S := K - 1
	for _, r := range seqRuns(ab, T) {
		slot := ab.Slot(r.seq)
		sv := st.f32[slot*S*C : (slot+1)*S*C]
		if ab.Pos[r.lo] == 0 {
			clear(sv)
		}
		// input u relative to the run start: u < 0 reads the state.
		in := func(u, c int) float32 {
			if u < 0 {
				return sv[(S+u)*C+c]
			}
			return xx.f32[(r.lo+u)*C+c]
		}
		n := r.hi - r.lo
		b.pool.parallel(C, 64, func(lo, hi int) {
			for c := lo; c < hi; c++ {
				wc := wt[c*K : (c+1)*K]
				for t := 0; t < n; t++ {
					var acc float32
					for j := 0; j < K; j++ {
						acc += wc[j] * in(t-S+j, c)
					}
					o.f32[(r.lo+t)*C+c] = silu(acc)
				}
				// Keep the last S inputs, oldest first; compute in order so
				// later rows still read the old state they need.
				var keep [16]float32
				tmp := keep[:0]
				if S > len(keep) {
					tmp = make([]float32, 0, S)
				}
				for i := 0; i < S; i++ {
					tmp = append(tmp, in(n-S+i, c))
				}
				for i, v := range tmp {
					sv[i*C+c] = v
				}
			}
		})
	}
}

func (b *Backend) RMSNormGated(out, x, z, w backend.Tensor, eps float32) {
	o, xx, zz, ww := f32(out), f32(x), f32(z), f32(w)
	n := xx.cols
	if ww.rows*ww.cols != n || zz.cols != n || o.cols != n || zz.rows != xx.rows || o.rows != xx.rows {
		panic(fmt.Sprintf("cpu: RMSNormGated x %dx%d z %dx%d w %dx%d", xx.rows, xx.cols, zz.rows, zz.cols, ww.rows, ww.cols))
	}
	wt := weightVec(ww)
	b.pool.parallel(xx.rows, 32, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			src := xx.f32[r*n : (r+1)*n]
			g := zz.f32[r*n : (r+1)*n]
			dst := o.f32[r*n : (r+1)*n]
			var ss float64
			for _, v := range src {
				ss += float64(v) * float64(v)
			}
			inv := float32(1 / math.Sqrt(ss/float64(n)+float64(eps)))
			for i, v := range src {
				dst[i] = v * inv * wt[i] * silu(g[i])
			}
		}
	})
}

func (b *Backend) MulSigmoid(out, x, gate backend.Tensor) {
	o, xx, g := f32(out), f32(x), f32(gate)
	if len(xx.f32) != len(g.f32) || len(o.f32) != len(xx.f32) {
		panic("cpu: MulSigmoid shape mismatch")
	}
	for i, v := range xx.f32 {
		o.f32[i] = v / (1 + float32(math.Exp(float64(-g.f32[i]))))
	}
}

func (b *Backend) SliceCols(out, x backend.Tensor, groups, off, width int) {
	o, xx := f32(out), f32(x)
	blk := xx.cols / groups
	if xx.cols%groups != 0 || off+width > blk || o.cols != groups*width || o.rows != xx.rows {
		panic(fmt.Sprintf("cpu: SliceCols x %dx%d out %dx%d groups %d off %d width %d", xx.rows, xx.cols, o.rows, o.cols, groups, off, width))
	}
	for r := 0; r < xx.rows; r++ {
		for g := 0; g < groups; g++ {
			copy(o.f32[r*o.cols+g*width:r*o.cols+(g+1)*width], xx.f32[r*xx.cols+g*blk+off:])
		}
	}
}

func (b *Backend) ReadStateRows(t backend.Tensor, row int, dst []float32) {
	tt := f32(t)
	copy(dst, tt.f32[row*tt.cols:row*tt.cols+len(dst)])
}

func (b *Backend) WriteStateRows(t backend.Tensor, row int, src []float32) {
	tt := f32(t)
	copy(tt.f32[row*tt.cols:row*tt.cols+len(src)], src)
}
