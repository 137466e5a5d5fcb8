package cpu

import (
	"fmt"
	"math"

	"github.com/infernix/infernix/engine/backend"
)

// gdnHead is one (sequence run, value head) of a GatedDeltaRule call, with
// its inputs gathered: q, k L2-normalised (q also scaled), v, log-decay g and
// beta per token. The state is held transposed (st[y*dk+x] = S[x][y]) so
// that every inner loop is a contiguous dot product.
type gdnHead struct {
	n, dk, dv int
	q, k, v   []float32 // n×dk, n×dk, n×dv
	g, beta   []float32 // n
	st        []float32 // dv×dk, updated in place
	out       []float32 // n×dv
	ck        chunkScratch
}

func (b *Backend) GatedDeltaRule(out, qkv, a, bt, aLog, dtBias, state backend.Tensor, ab *backend.AttnBatch, s backend.GDNSpec) {
	o, x, aa, bb, st := f32(out), f32(qkv), f32(a), f32(bt), f32(state)
	kd, vd := s.KHeads*s.KDim, s.VHeads*s.VDim
	T := x.rows
	if x.cols != 2*kd+vd || o.cols != vd || o.rows != T || aa.cols != s.VHeads || bb.cols != s.VHeads || st.cols != s.KDim || s.VHeads%s.KHeads != 0 {
		panic(fmt.Sprintf("cpu: GatedDeltaRule qkv %dx%d out %dx%d a %dx%d state %dx%d spec %+v", x.rows, x.cols, o.rows, o.cols, aa.rows, aa.cols, st.rows, st.cols, s))
	}
	al, dt := weightVec(f32(aLog)), weightVec(f32(dtBias))
	runs := seqRuns(ab, T)
	rep := s.VHeads / s.KHeads
	hs := s.KDim * s.VDim
	per := s.VHeads * hs
	b.pool.parallel(len(runs)*s.VHeads, 1, func(lo, hi int) {
		var hd gdnHead
		for task := lo; task < hi; task++ {
			r, h := runs[task/s.VHeads], task%s.VHeads
			kh := h / rep
			n := r.hi - r.lo
			hd.n, hd.dk, hd.dv = n, s.KDim, s.VDim
			hd.q = grow(hd.q, n*s.KDim)
			hd.k = grow(hd.k, n*s.KDim)
			hd.v = grow(hd.v, n*s.VDim)
			hd.g = grow(hd.g, n)
			hd.beta = grow(hd.beta, n)
			hd.out = grow(hd.out, n*s.VDim)
			slot := ab.Slot(r.seq)
			hd.st = st.f32[slot*per+h*hs : slot*per+(h+1)*hs]
			if ab.Pos[r.lo] == 0 {
				clear(hd.st)
			}
			scale := float32(1 / math.Sqrt(float64(s.KDim)))
			decay := math.Exp(float64(al[h]))
			for t := 0; t < n; t++ {
				row := x.f32[(r.lo+t)*x.cols : (r.lo+t+1)*x.cols]
				l2(hd.q[t*s.KDim:(t+1)*s.KDim], row[kh*s.KDim:(kh+1)*s.KDim], scale)
				l2(hd.k[t*s.KDim:(t+1)*s.KDim], row[kd+kh*s.KDim:kd+(kh+1)*s.KDim], 1)
				copy(hd.v[t*s.VDim:(t+1)*s.VDim], row[2*kd+h*s.VDim:])
				hd.g[t] = float32(-decay * softplus(float64(aa.f32[(r.lo+t)*s.VHeads+h])+float64(dt[h])))
				hd.beta[t] = 1 / (1 + float32(math.Exp(-float64(bb.f32[(r.lo+t)*s.VHeads+h]))))
			}
			if s.Chunk > 0 && n > 1 {
				hd.chunked(s.Chunk)
			} else {
				hd.recurrent()
			}
			for t := 0; t < n; t++ {
				copy(o.f32[(r.lo+t)*vd+h*s.VDim:(r.lo+t)*vd+(h+1)*s.VDim], hd.out[t*s.VDim:(t+1)*s.VDim])
			}
		}
	})
}

// l2 writes src·scale/sqrt(Σsrc²+1e-6) to dst (the epsilon is transformers').
func l2(dst, src []float32, scale float32) {
	var ss float64
	for _, v := range src {
		ss += float64(v) * float64(v)
	}
	inv := float32(1/math.Sqrt(ss+1e-6)) * scale
	for i, v := range src {
		dst[i] = v * inv
	}
}

// softplus matches torch's (threshold 20: linear above).
func softplus(x float64) float64 {
	if x > 20 {
		return x
	}
	return math.Log1p(math.Exp(x))
}

// recurrent is the token-by-token form: S ← exp(g)·S; S ← S + k⊗β(v − Sᵀk);
// o = Sᵀq, written per row y of Sᵀ: m = e·(Sᵀ[y]·k), Sᵀ[y] ← e·Sᵀ[y] +
// β(v[y] − m)·k, o[y] = Sᵀ[y]·q.
func (hd *gdnHead) recurrent() {
	dk, dv := hd.dk, hd.dv
	for t := 0; t < hd.n; t++ {
		q, k := hd.q[t*dk:(t+1)*dk], hd.k[t*dk:(t+1)*dk]
		v, o := hd.v[t*dv:(t+1)*dv], hd.out[t*dv:(t+1)*dv]
		e, beta := float32(math.Exp(float64(hd.g[t]))), hd.beta[t]
		for y := 0; y < dv; y++ {
			row := hd.st[y*dk : (y+1)*dk]
			d := (v[y] - e*dot(row, k)) * beta
			for x, kx := range k {
				row[x] = e*row[x] + d*kx
			}
			o[y] = dot(row, q)
		}
	}
}
