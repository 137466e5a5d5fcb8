package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/infernix/infernix/engine/backend"
)

func randTensor(b *Backend, r *rand.Rand, rows, cols int, scale float64) *Tensor {
	t := b.Alloc(rows, cols).(*Tensor)
	for i := range t.f32 {
		t.f32[i] = float32(r.NormFloat64() * scale)
	}
	return t
}

// gdnCase is a batch of sequences for the Gated DeltaNet operators.
type gdnCase struct {
	spec      backend.GDNSpec
	lens      []int // tokens per sequence
	starts    []int // first position per sequence (>0: continue the slot's state)
	qkv, a, b *Tensor
	aLog, dt  *Tensor
}

func newGDNCase(be *Backend, seed uint64, spec backend.GDNSpec, lens, starts []int) *gdnCase {
	r := rand.New(rand.NewPCG(seed, 1))
	T := 0
	for _, n := range lens {
		T += n
	}
	c := &gdnCase{spec: spec, lens: lens, starts: starts}
	C := 2*spec.KHeads*spec.KDim + spec.VHeads*spec.VDim
	c.qkv = randTensor(be, r, T, C, 1)
	c.a = randTensor(be, r, T, spec.VHeads, 1)
	c.b = randTensor(be, r, T, spec.VHeads, 1)
	c.aLog = randTensor(be, r, 1, spec.VHeads, 0.5)
	c.dt = randTensor(be, r, 1, spec.VHeads, 0.5)
	return c
}

func (c *gdnCase) batch() *backend.AttnBatch {
	ab := &backend.AttnBatch{}
	for s, n := range c.lens {
		for i := 0; i < n; i++ {
			ab.Seq = append(ab.Seq, int32(s))
			ab.Pos = append(ab.Pos, int32(c.starts[s]+i))
		}
		ab.Slots = append(ab.Slots, int32(len(c.lens)-1-s)) // slots ≠ sequence ids
	}
	return ab
}

// run applies the rule with the given chunk size from the given initial state.
func (c *gdnCase) run(be *Backend, chunk int, init []float32) (out, state []float32) {
	s := c.spec
	s.Chunk = chunk
	st := be.Alloc(len(c.lens)*s.VHeads*s.VDim, s.KDim).(*Tensor)
	copy(st.f32, init)
	o := be.Alloc(c.qkv.rows, s.VHeads*s.VDim).(*Tensor)
	be.GatedDeltaRule(o, c.qkv, c.a, c.b, c.aLog, c.dt, st, c.batch(), s)
	return o.f32, st.f32
}

func maxDiff(a, b []float32) float64 {
	var w float64
	for i := range a {
		w = math.Max(w, math.Abs(float64(a[i]-b[i])))
	}
	return w
}

// TestChunkedEqualsRecurrent: the chunked form (several chunk sizes, runs
// shorter and longer than a chunk, fresh and continued state) equals the
// token-by-token recurrence.
func TestChunkedEqualsRecurrent(t *testing.T) {
	be := New(2)
	spec := backend.GDNSpec{KHeads: 2, VHeads: 4, KDim: 16, VDim: 8}
	c := newGDNCase(be, 1, spec, []int{1, 63, 64, 65, 200}, []int{0, 0, 5, 0, 17})
	r := rand.New(rand.NewPCG(9, 9))
	init := make([]float32, len(c.lens)*spec.VHeads*spec.KDim*spec.VDim)
	for i := range init {
		init[i] = float32(r.NormFloat64() * 0.3)
	}
	wantOut, wantState := c.run(be, 0, init)
	for _, chunk := range []int{64, 16, 7} {
		out, st := c.run(be, chunk, init)
		if d := maxDiff(out, wantOut); d > 2e-5 {
			t.Errorf("chunk %d: outputs differ by %.2e", chunk, d)
		}
		if d := maxDiff(st, wantState); d > 2e-5 {
			t.Errorf("chunk %d: final states differ by %.2e", chunk, d)
		}
	}
	// A sequence starting at position 0 ignores what its slot held.
	zero := make([]float32, len(init))
	out0, _ := c.run(be, 64, zero)
	outI, _ := c.run(be, 64, init)
	rows := spec.VHeads * spec.VDim
	// Rows: sequence 0 [0,1), 1 [1,64) and 3 [128,193) start at 0; 2 [64,128) continues.
	for _, r := range [][2]int{{0, 64}, {128, 193}} {
		if d := maxDiff(out0[rows*r[0]:rows*r[1]], outI[rows*r[0]:rows*r[1]]); d != 0 {
			t.Errorf("position-0 sequence rows %v depend on stale state (%.2e)", r, d)
		}
	}
	if maxDiff(out0[rows*64:rows*128], outI[rows*64:rows*128]) == 0 {
		t.Error("a continued sequence ignored its state")
	}
}

// TestRecurrentSingleStep checks one token against the delta rule written out
// in float64.
func TestRecurrentSingleStep(t *testing.T) {
	be := New(1)
	spec := backend.GDNSpec{KHeads: 1, VHeads: 2, KDim: 3, VDim: 2}
	c := newGDNCase(be, 3, spec, []int{1}, []int{4})
	init := []float32{0.1, -0.2, 0.3, 0.4, -0.5, 0.6, 0.7, 0.8, -0.9, 1.0, 0.2, 0.1}
	out, _ := c.run(be, 0, init)
	x := c.qkv.f32
	for h := 0; h < 2; h++ {
		q, k := make([]float64, 3), make([]float64, 3)
		var nq, nk float64
		for i := 0; i < 3; i++ {
			q[i], k[i] = float64(x[i]), float64(x[3+i])
			nq += q[i] * q[i]
			nk += k[i] * k[i]
		}
		for i := range q {
			q[i] /= math.Sqrt(nq+1e-6) * math.Sqrt(3)
			k[i] /= math.Sqrt(nk + 1e-6)
		}
		g := -math.Exp(float64(c.aLog.f32[h])) * math.Log1p(math.Exp(float64(c.a.f32[h]+c.dt.f32[h])))
		beta := 1 / (1 + math.Exp(-float64(c.b.f32[h])))
		S := make([]float64, 6) // S[i*2+j] = S[k dim i][v dim j]; the pool holds Sᵀ
		for i := 0; i < 3; i++ {
			for j := 0; j < 2; j++ {
				S[i*2+j] = float64(init[h*6+j*3+i]) * math.Exp(g)
			}
		}
		for j := 0; j < 2; j++ {
			var mem float64
			for i := 0; i < 3; i++ {
				mem += S[i*2+j] * k[i]
			}
			delta := (float64(x[6+h*2+j]) - mem) * beta
			for i := 0; i < 3; i++ {
				S[i*2+j] += k[i] * delta
			}
		}
		for j := 0; j < 2; j++ {
			var o float64
			for i := 0; i < 3; i++ {
				o += S[i*2+j] * q[i]
			}
			if d := math.Abs(o - float64(out[h*2+j])); d > 1e-5 {
				t.Errorf("head %d dim %d: %g, want %g", h, j, out[h*2+j], o)
			}
		}
	}
}

// TestConvSplitInvariance: the conv over a run equals the conv over the same
// tokens fed in pieces through the rolling state.
func TestConvSplitInvariance(t *testing.T) {
	be := New(2)
	r := rand.New(rand.NewPCG(5, 5))
	const T, C, K = 23, 12, 4
	x := randTensor(be, r, T, C, 1)
	w := randTensor(be, r, C, K, 0.5)
	whole := be.Alloc(T, C).(*Tensor)
	st := be.Alloc(2*(K-1), C).(*Tensor)
	ab := func(lo, hi int) *backend.AttnBatch {
		b := &backend.AttnBatch{Slots: []int32{1}}
		for p := lo; p < hi; p++ {
			b.Seq, b.Pos = append(b.Seq, 0), append(b.Pos, int32(p))
		}
		return b
	}
	for i := range st.f32 {
		st.f32[i] = 99 // stale state a position-0 run must ignore
	}
	be.CausalConv1D(whole, x, w, st, ab(0, T))
	// Reference: direct formula with zero history.
	for tt := 0; tt < T; tt++ {
		for c := 0; c < C; c++ {
			var acc float64
			for j := 0; j < K; j++ {
				if u := tt - (K - 1) + j; u >= 0 {
					acc += float64(w.f32[c*K+j]) * float64(x.f32[u*C+c])
				}
			}
			want := acc / (1 + math.Exp(-acc))
			if math.Abs(want-float64(whole.f32[tt*C+c])) > 1e-5 {
				t.Fatalf("t %d c %d: %g want %g", tt, c, whole.f32[tt*C+c], want)
			}
		}
	}
	for _, cuts := range [][]int{{1, 2, 3, 23}, {2, 23}, {10, 11, 23}} {
		lo := 0
		for _, hi := range cuts {
			xs := &Tensor{rows: hi - lo, cols: C, f32: x.f32[lo*C : hi*C]}
			os := be.Alloc(hi-lo, C).(*Tensor)
			be.CausalConv1D(os, xs, w, st, ab(lo, hi))
			if d := maxDiff(os.f32, whole.f32[lo*C:hi*C]); d != 0 {
				t.Errorf("cuts %v: piece [%d,%d) differs by %.2e", cuts, lo, hi, d)
			}
			lo = hi
		}
	}
}

func TestRMSNormGated(t *testing.T) {
	be := New(1)
	r := rand.New(rand.NewPCG(2, 2))
	x, z, w := randTensor(be, r, 3, 8, 1), randTensor(be, r, 3, 8, 1), randTensor(be, r, 1, 8, 1)
	out := be.Alloc(3, 8).(*Tensor)
	be.RMSNormGated(out, x, z, w, 1e-6)
	for row := 0; row < 3; row++ {
		var ss float64
		for i := 0; i < 8; i++ {
			ss += float64(x.f32[row*8+i]) * float64(x.f32[row*8+i])
		}
		inv := 1 / math.Sqrt(ss/8+1e-6)
		for i := 0; i < 8; i++ {
			zz := float64(z.f32[row*8+i])
			want := float64(x.f32[row*8+i]) * inv * float64(w.f32[i]) * zz / (1 + math.Exp(-zz))
			if math.Abs(want-float64(out.f32[row*8+i])) > 1e-5 {
				t.Fatalf("row %d col %d: %g want %g", row, i, out.f32[row*8+i], want)
			}
		}
	}
}

// BenchmarkGDNPrefill compares the chunked and recurrent forms on one
// Qwen3.5-27B-shaped linear-attention layer (16 key heads, 48 value heads,
// 128×128 state) prefilling 512 tokens.
func BenchmarkGDNPrefill(b *testing.B) {
	be := New(0)
	spec := backend.GDNSpec{KHeads: 16, VHeads: 48, KDim: 128, VDim: 128}
	c := newGDNCase(be, 1, spec, []int{512}, []int{0})
	init := make([]float32, spec.VHeads*spec.KDim*spec.VDim)
	for _, form := range []struct {
		name  string
		chunk int
	}{{"recurrent", 0}, {"chunked64", 64}} {
		b.Run(form.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				c.run(be, form.chunk, init)
			}
			b.ReportMetric(float64(512*b.N)/b.Elapsed().Seconds(), "tok/s")
		})
	}
}
