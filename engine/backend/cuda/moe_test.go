package cuda

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/infernix/infernix/engine/backend"
	"github.com/infernix/infernix/engine/backend/cpu"
)

func TestMoERows(t *testing.T) {
	for _, c := range []struct{ n, want int }{
		{0, 0}, {1, 1}, {8, 8}, {9, 16}, {16, 16}, {17, 32}, {128, 128}, {129, 144}, {257, 288}, {300, 320}, {4097, 4608},
	} {
		if got := moeRows(c.n, 8); got != c.want {
			t.Errorf("moeRows(%d) = %d, want %d", c.n, got, c.want)
		}
	}
	for n := 9; n < 20000; n++ {
		if r := moeRows(n, 8); r < n || r%16 != 0 || 8*(r-n) >= max(n, 128) {
			t.Fatalf("moeRows(%d) = %d: too much padding", n, r)
		}
	}
}

// skewedChoices draws top-k choices [T·K] (distinct per token) where some
// experts are never chosen and expert 0, if hot, by every token.
func skewedChoices(r *rand.Rand, T, K, E int, hot bool) []int32 {
	cold := E / 4
	if E-cold < K {
		cold = 0
	}
	idx := make([]int32, 0, T*K)
	for t := 0; t < T; t++ {
		var pick []int32
		if hot {
			pick = append(pick, 0)
		}
		for len(pick) < K {
			e := int32(r.IntN(E - cold))
			dup := false
			for _, p := range pick {
				dup = dup || p == e
			}
			if !dup {
				pick = append(pick, e)
			}
		}
		idx = append(idx, pick...)
	}
	return idx
}

// TestMoEPlan checks the grouped path's row layout on the host and runs the
// whole path (gather, per-expert products, combine through rowOf) in
// float64 against the per-pair formula.
func TestMoEPlan(t *testing.T) {
	r := newRand(t)
	var p moePlan // reused across cases, as the backend does
	for _, c := range []struct {
		T, K, E int
		hot     bool
	}{{9, 2, 8, true}, {64, 8, 8, false}, {300, 2, 64, true}, {300, 8, 64, false}, {1, 1, 1, false}, {40, 4, 1024, true}} {
		idx := skewedChoices(r, c.T, c.K, c.E, c.hot)
		if err := p.build(idx, c.T, c.K, c.E, 8); err != nil {
			t.Fatal(err)
		}
		P := p.off[c.E]
		src, rowOf := p.words[:P], p.words[P:]
		if len(rowOf) != c.T*c.K {
			t.Fatalf("%+v: %d pair rows", c, len(rowOf))
		}
		cnt := make([]int, c.E)
		for _, e := range idx {
			cnt[e]++
		}
		for e := 0; e < c.E; e++ {
			if p.cnt[e] != cnt[e] || p.off[e+1]-p.off[e] != moeRows(cnt[e], 8) {
				t.Fatalf("%+v: expert %d: %d tokens in %d rows, want %d tokens", c, e, p.cnt[e], p.off[e+1]-p.off[e], cnt[e])
			}
			for rr := p.off[e] + 1; rr < p.off[e]+cnt[e]; rr++ {
				if src[rr] <= src[rr-1] {
					t.Fatalf("%+v: expert %d's tokens out of order at row %d", c, e, rr)
				}
			}
			for rr := p.off[e] + cnt[e]; rr < p.off[e+1]; rr++ {
				if src[rr] != src[p.off[e]] {
					t.Fatalf("%+v: padding row %d gathers token %d", c, rr, src[rr])
				}
			}
		}
		seen := make([]bool, P)
		for q, rr := range rowOf {
			e := int(idx[q])
			if int(src[rr]) != q/c.K || int(rr) < p.off[e] || int(rr) >= p.off[e]+cnt[e] || seen[rr] {
				t.Fatalf("%+v: pair %d (token %d, expert %d) at row %d (token %d)", c, q, q/c.K, e, rr, src[rr])
			}
			seen[rr] = true
		}

		// The data flow in float64: expert e maps a row v to
		// Σ_i v_i · a[e][i] + e, so that a row landing in the wrong
		// segment shows.
		const H = 5
		x := make([]float64, c.T*H)
		for i := range x {
			x[i] = r.NormFloat64()
		}
		a := make([][H]float64, c.E)
		for e := range a {
			for i := range a[e] {
				a[e][i] = r.NormFloat64()
			}
		}
		w := make([]float64, c.T*c.K)
		for i := range w {
			w[i] = r.Float64()
		}
		y := make([]float64, P) // gather + products
		for e := 0; e < c.E; e++ {
			for rr := p.off[e]; rr < p.off[e+1]; rr++ {
				for i := 0; i < H; i++ {
					y[rr] += x[int(src[rr])*H+i] * a[e][i]
				}
				y[rr] += float64(e)
			}
		}
		for tok := 0; tok < c.T; tok++ {
			var got, want float64
			for k := 0; k < c.K; k++ {
				q := tok*c.K + k
				got += w[q] * y[rowOf[q]]
				e := idx[q]
				var s float64
				for i := 0; i < H; i++ {
					s += x[tok*H+i] * a[e][i]
				}
				want += w[q] * (s + float64(e))
			}
			if math.Abs(got-want) > 1e-9*(1+math.Abs(want)) {
				t.Fatalf("%+v: token %d: %v, want %v", c, tok, got, want)
			}
		}
	}
	if err := p.build([]int32{0, 8}, 1, 2, 8, 8); err == nil {
		t.Error("an expert index out of range was accepted")
	}
	if err := p.build([]int32{0, -1}, 1, 2, 8, 8); err == nil {
		t.Error("a negative expert index was accepted")
	}
}

// TestMoEGrouped compares the grouped path (INFERNIX_CUDA_MOE_GROUPED) with
// the CPU backend and with the indexed path on the same device, at uneven
// expert loads: the router favours expert 0 (a segment past gemvMax rows
// through cuBLASLt, with padding) and never picks the last quarter, where
// top-k leaves room (experts with no tokens); small segments take the GEMV
// kernels.
func TestMoEGrouped(t *testing.T) {
	b := gpu(t)
	r := newRand(t)
	defer func(v bool) { b.moeGrouped = v }(b.moeGrouped)
	for _, c := range []struct {
		E, K, H, I   int
		norm, shared bool
		dt           backend.DType
	}{
		{8, 2, 128, 96, true, false, backend.BF16},
		{8, 8, 128, 96, false, false, backend.BF16},
		{64, 2, 128, 96, false, true, backend.BF16},
		{64, 8, 128, 96, true, false, backend.BF16},
		{8, 2, 48, 20, false, false, backend.F32}, // the down product unaligned: scalar GEMV
		{64, 8, 64, 32, true, false, backend.F16}, // no cuBLASLt: GEMV kernels for every group
	} {
		m := &backend.MoE{TopK: c.K, NormTopK: c.norm}
		mc := &backend.MoE{TopK: c.K, NormTopK: c.norm}
		rt := routerWeight(t, b, r, c.dt, c.E, c.H, c.K)
		m.Router, mc.Router = rt.g, rt.c
		addExperts(t, b, r, c.dt, m, mc, c.E, c.H, c.I, c.shared)
		for _, T := range []int{9, 64, 300} {
			name := fmt.Sprintf("E%d_K%d_%v_norm%v_T%d", c.E, c.K, c.dt, c.norm, T)
			x := act(t, b, r, T, c.H, 1)
			xs := x.c.(*cpu.Tensor).F32()
			for tok := 0; tok < T; tok++ {
				xs[tok*c.H] = 1 // the router's bias input (routerWeight)
			}
			write(t, b, x.g, xs)
			o := out(t, b, T, c.H)
			b.moeGrouped = false
			b.MoE(o.g, x.g, m)
			indexed := read(t, b, o.g)
			poison(b, o.g)
			b.moeGrouped = true
			runs := b.moeGroupedRuns
			b.MoE(o.g, x.g, m)
			grouped := read(t, b, o.g)
			if b.moeGroupedRuns != runs+1 {
				t.Fatalf("%s: the grouped path did not run", name)
			}
			cpuBe.MoE(o.c, x.c, mc)
			tol := 1e-5
			if c.dt == backend.BF16 && b.lt != nil {
				tol = 1e-2 // expert products through cuBLASLt: bf16 activations, twice
			}
			compare(t, name+" vs CPU", grouped, cpuF32(o), tol)
			if c.dt == backend.BF16 && b.lt != nil {
				// The CPU in the grouped path's formats (formatBackend's MoE):
				// what is left is the sums' order and a rounding flipped by it.
				moeRounded(cpuBe, o.c, x.c, mc, moeFormats{expertRows: b.gemvMax + 1, shared: true})
				compare(t, name+" vs CPU in its formats", grouped, cpuF32(o), roundedTol)
				cpuBe.MoE(o.c, x.c, mc)
			}
			compare(t, name+" vs indexed", grouped, indexed, tol)
			compare(t, name+" indexed vs CPU", indexed, cpuF32(o), 6e-3)
		}
	}
}

// routerWeight is a router [E, H] whose first column biases the choice
// (the test sets x[:, 0] = 1): expert 0 favoured (logits otherwise have a
// standard deviation near 1 at H = 128), the last quarter
// never chosen (where K leaves room), the rest random.
func routerWeight(t testing.TB, b *Backend, r *rand.Rand, dt backend.DType, E, H, K int) pair {
	t.Helper()
	cold := E / 4
	if E-cold < K {
		cold = 0
	}
	data := make([]byte, E*H*dt.Size())
	for e := 0; e < E; e++ {
		for i := 0; i < H; i++ {
			v := (r.Float32()*2 - 1) * 0.3
			if i == 0 {
				switch {
				case e == 0:
					v = 3 // not more: the others' weights must still count when NormTopK is off
				case e >= E-cold:
					v = -8
				default:
					v = 0
				}
			}
			q := e*H + i
			switch dt {
			case backend.F32:
				binary.LittleEndian.PutUint32(data[4*q:], math.Float32bits(v))
			case backend.BF16:
				binary.LittleEndian.PutUint16(data[2*q:], uint16(math.Float32bits(v)>>16))
			case backend.F16:
				binary.LittleEndian.PutUint16(data[2*q:], floatToHalf(v))
			}
		}
	}
	g, err := b.Upload("router", dt, []int{E, H}, data)
	if err != nil {
		t.Fatal(err)
	}
	c, err := cpuBe.Upload("router", dt, []int{E, H}, append([]byte(nil), data...))
	if err != nil {
		t.Fatal(err)
	}
	return pair{g, c}
}

// TestMoEGroupedNotInGraphs checks the path's guard: off while a graph is
// captured or replayed, at or below gemvMax, in a forward that may be
// captured later, or when switched off.
func TestMoEGroupedNotInGraphs(t *testing.T) {
	b := &Backend{gemvMax: 8, moeGrouped: true}
	b.g.enabled, b.g.maxT = true, 16
	for _, c := range []struct {
		T      int
		mode   graphMode
		inStep bool
		stepT  int
		on     bool
		want   bool
	}{
		{64, modeEager, false, 0, true, true},
		{64, modeEager, true, 64, true, true},
		{8, modeEager, false, 0, true, false},
		{12, modeEager, true, 12, true, false}, // graph-eligible forward
		{12, modeCapture, true, 12, true, false},
		{12, modeReplay, true, 12, true, false},
		{64, modeEager, true, 64, false, false},
	} {
		b.g.mode, b.g.inStep, b.g.T, b.moeGrouped = c.mode, c.inStep, c.stepT, c.on
		if got := b.moeGroupedFor(c.T); got != c.want {
			t.Errorf("%+v: grouped %v", c, got)
		}
	}
}
