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
	inputs           MoEInputs // MoEWithInputs's hook for this call (nil: none)
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
	b.MoEWithInputs(nil, out, x, m)
}

// MoEInputs may change, in place, the rows activations x that an expert's
// product with weight w reads (an expert's gate and up read the same x,
// passed once with its gate weight; shared: the shared expert's).
type MoEInputs func(x []float32, rows int, w backend.Tensor, shared bool)

// MoEWithInputs is MoE with each expert product's input passed through
// inputs first (the router and the shared expert's gate read x as it is):
// the CPU in the number formats of another backend's MoE, for the CUDA
// backend's tests. A nil inputs is MoE.
func (b *Backend) MoEWithInputs(inputs MoEInputs, out, x backend.Tensor, m *backend.MoE) {
	b.moe.inputs = inputs
	defer func() { b.moe.inputs = nil }()
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
		y := b.mlp(s, s.xs, n, H, inter, m.Gate[e], m.Up[e], m.Down[e], false)
		for i, p := range picks {
			dst := o.f32[p.tok*H : (p.tok+1)*H]
			for j, v := range y[i*H : (i+1)*H] {
				dst[j] += p.w * v
			}
		}
	}
	if m.SharedGate != nil {
		inter := f32(m.SharedGate).rows
		xs := xx.f32[:T*H]
		if s.inputs != nil { // a copy to change: the shared expert's gate reads x
			s.xs = grow(s.xs, T*H)
			copy(s.xs, xs)
			xs = s.xs
		}
		y := b.mlp(s, xs, T, H, inter, m.SharedGate, m.SharedUp, m.SharedDown, true)
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
// the scratch (valid until the next call); s.inputs, if set, sees x (which
// it may change) and the down product's input.
func (b *Backend) mlp(s *moeScratch, x []float32, n, H, inter int, gate, up, down backend.Tensor, shared bool) []float32 {
	if s.inputs != nil {
		s.inputs(x[:n*H], n, gate, shared)
	}
	s.gate = grow(s.gate, n*inter)
	s.up = grow(s.up, n*inter)
	s.dn = grow(s.dn, n*H)
	xt := &Tensor{rows: n, cols: H, f32: x}
	gt := &Tensor{rows: n, cols: inter, f32: s.gate}
	ut := &Tensor{rows: n, cols: inter, f32: s.up}
	b.MatMul(gt, xt, gate)
	b.MatMul(ut, xt, up)
	b.SwiGLU(gt, gt, ut)
	if s.inputs != nil {
		s.inputs(s.gate[:n*inter], n, down, shared)
	}
	dt := &Tensor{rows: n, cols: H, f32: s.dn}
	b.MatMul(dt, gt, down)
	return s.dn
}
