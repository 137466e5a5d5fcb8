package cpu

import (
	"math"
	"sort"

	"github.com/infernix/infernix/engine/backend"
)

// moeScratch keeps the MoE temporaries between calls (the backend is used from
// one goroutine).
type moeScratch struct {
	logits           []float32
	xs, gate, up, dn []float32
	watch            bool      // WatchRouting was called: record margins
	margins          []float64 // per token row, the smallest routing margin seen
}

// WatchRouting starts recording, for each token row of the following
// forward calls, the smallest routing margin of any MoE layer: the gap in
// router logits between the last expert a token was sent to and the best
// one it was not. Another backend's rounding can send a token whose margin
// is that small to a different expert, a discrete change that a numeric
// comparison must tell apart from an error (as a near-tie between two
// tokens). Off (no cost) until called; each call starts afresh.
func (b *Backend) WatchRouting() {
	b.moe.watch = true
	b.moe.margins = b.moe.margins[:0]
}

// RoutingMargins returns the margins recorded since WatchRouting, one per
// token row (+Inf where no MoE layer ran on that row).
func (b *Backend) RoutingMargins() []float64 { return b.moe.margins }

func grow(s []float32, n int) []float32 {
	if cap(s) < n {
		return make([]float32, n)
	}
	return s[:n]
}

func (b *Backend) MoE(out, x backend.Tensor, m *backend.MoE) {
	o, xx := f32(out), f32(x)
	T, H := xx.rows, xx.cols
	router := f32(m.Router)
	E := router.rows
	s := &b.moe
	s.logits = grow(s.logits, T*E)
	b.MatMul(&Tensor{rows: T, cols: E, f32: s.logits}, xx, router)

	// Route: softmax over experts, top-k, optional renormalisation.
	type pick struct {
		tok int
		w   float32
	}
	perExpert := make([][]pick, E)
	probs := make([]float64, E)
	order := make([]int, E)
	for t := 0; t < T; t++ {
		row := s.logits[t*E : (t+1)*E]
		maxL := math.Inf(-1)
		for _, l := range row {
			maxL = math.Max(maxL, float64(l))
		}
		var sum float64
		for e, l := range row {
			probs[e] = math.Exp(float64(l) - maxL)
			sum += probs[e]
		}
		for e := range probs {
			probs[e] /= sum
			order[e] = e
		}
		sort.SliceStable(order, func(i, j int) bool { return probs[order[i]] > probs[order[j]] })
		if s.watch && m.TopK < E {
			for len(s.margins) <= t {
				s.margins = append(s.margins, math.Inf(1))
			}
			s.margins[t] = math.Min(s.margins[t], float64(row[order[m.TopK-1]])-float64(row[order[m.TopK]]))
		}
		var top float64
		for _, e := range order[:m.TopK] {
			top += probs[e]
		}
		for _, e := range order[:m.TopK] {
			w := probs[e]
			if m.NormTopK {
				w /= top
			}
			perExpert[e] = append(perExpert[e], pick{t, float32(w)})
		}
	}
	clear(o.f32[:T*H])
	for e, picks := range perExpert {
		if len(picks) == 0 {
			continue
		}
		n := len(picks)
		inter := f32(m.Gate[e]).rows
		s.xs = grow(s.xs, n*H)
		for i, p := range picks {
			copy(s.xs[i*H:(i+1)*H], xx.f32[p.tok*H:(p.tok+1)*H])
		}
		y := b.mlp(s, s.xs, n, H, inter, m.Gate[e], m.Up[e], m.Down[e])
		for i, p := range picks {
			dst := o.f32[p.tok*H : (p.tok+1)*H]
			for j, v := range y[i*H : (i+1)*H] {
				dst[j] += p.w * v
			}
		}
	}
	if m.SharedGate != nil {
		inter := f32(m.SharedGate).rows
		y := b.mlp(s, xx.f32[:T*H], T, H, inter, m.SharedGate, m.SharedUp, m.SharedDown)
		for t := 0; t < T; t++ {
			g := float32(1)
			if m.SharedExpertGate != nil {
				sg := f32(m.SharedExpertGate)
				z := dot(rowF32(sg, 0, make([]float32, H)), xx.f32[t*H:(t+1)*H])
				g = 1 / (1 + float32(math.Exp(float64(-z))))
			}
			dst := o.f32[t*H : (t+1)*H]
			for j, v := range y[t*H : (t+1)*H] {
				dst[j] += g * v
			}
		}
	}
}

// mlp computes down(silu(gate·x)·(up·x)) for n rows of x, returning a slice of
// the scratch (valid until the next call).
func (b *Backend) mlp(s *moeScratch, x []float32, n, H, inter int, gate, up, down backend.Tensor) []float32 {
	s.gate = grow(s.gate, n*inter)
	s.up = grow(s.up, n*inter)
	s.dn = grow(s.dn, n*H)
	xt := &Tensor{rows: n, cols: H, f32: x}
	gt := &Tensor{rows: n, cols: inter, f32: s.gate}
	ut := &Tensor{rows: n, cols: inter, f32: s.up}
	b.MatMul(gt, xt, gate)
	b.MatMul(ut, xt, up)
	b.SwiGLU(gt, gt, ut)
	dt := &Tensor{rows: n, cols: H, f32: s.dn}
	b.MatMul(dt, gt, down)
	return s.dn
}
