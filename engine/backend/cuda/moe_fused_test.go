package cuda

import (
	"fmt"
	"math"
	"testing"

	"github.com/infernix/infernix/engine/backend"
)

// TestMoEFused runs a decoder's MLP half as the model does (h = RMSNorm(x),
// mlp = MoE(h), x = x + mlp) through the fused decode path (kernels/moe.cu)
// and the indexed one, against the CPU backend: the outputs within 1e-5,
// the experts and weights chosen identical bit for bit between the two
// paths, the fused one in three launches (the norm in the router's
// product, the residual add in moe_down) where fusion is on. Shapes: the
// Qwen3-30B-A3B router (128 experts, top 8), a gated shared expert twice as
// wide as the routed ones with top 10 (Qwen3-Next, Qwen3.5-MoE), and a
// hidden size that is no multiple of 256 with an ungated shared expert.
func TestMoEFused(t *testing.T) {
	b := gpu(t)
	if b.k.moeGateUp == nil {
		t.Fatalf("kernels/moe.cu did not load: %v", b.moeErr)
	}
	r := newRand(t)
	defer func(v bool) { b.moeFused = v }(b.moeFused)
	for _, c := range []struct {
		E, K, H, I         int
		norm, shared, gate bool
	}{
		{128, 8, 256, 96, true, false, false},
		{64, 10, 128, 64, true, true, true},
		{8, 2, 72, 24, false, true, false},
	} {
		m := &backend.MoE{TopK: c.K, NormTopK: c.norm}
		mc := &backend.MoE{TopK: c.K, NormTopK: c.norm}
		rt := weight(t, b, r, backend.BF16, c.E, c.H, 0.3)
		m.Router, mc.Router = rt.g, rt.c
		addExperts(t, b, r, backend.BF16, m, mc, c.E, c.H, c.I, c.shared)
		if c.gate {
			sg := weight(t, b, r, backend.BF16, 1, c.H, 0.5)
			m.SharedExpertGate, mc.SharedExpertGate = sg.g, sg.c
		}
		nw := weight(t, b, r, backend.BF16, 1, c.H, 1, c.H)
		for _, T := range []int{1, 3, 8} {
			name := fmt.Sprintf("E%d_K%d_H%d_I%d_shared%v_gate%v_T%d", c.E, c.K, c.H, c.I, c.shared, c.gate, T)
			x := act(t, b, r, T, c.H, 1)
			x0 := append([]float32(nil), cpuF32(x)...)
			h, mlp := out(t, b, T, c.H), out(t, b, T, c.H)
			cpuBe.RMSNorm(h.c, x.c, nw.c, 1e-6)
			cpuBe.MoE(mlp.c, h.c, mc)
			cpuBe.Add(x.c, x.c, mlp.c)
			layer := func(fused bool) (mlpOut, xOut []float32, idx, w []uint32, launches int) {
				b.moeFused = fused
				write(t, b, x.g, x0)
				poison(b, mlp.g)
				n0, runs := b.launches, b.moeFusedRuns
				b.RMSNorm(h.g, x.g, nw.g, 1e-6)
				b.MoE(mlp.g, h.g, m)
				b.Add(x.g, x.g, mlp.g)
				b.flush()
				launches = b.launches - n0
				if got := b.moeFusedRuns - runs; got != map[bool]int{true: 1, false: 0}[fused] {
					t.Fatalf("%s: fused %v: %d fused MoE runs", name, fused, got)
				}
				mlpOut, xOut = read(t, b, mlp.g), read(t, b, x.g)
				return mlpOut, xOut, scratchWords(t, b, scrTopIdx, T*c.K), scratchWords(t, b, scrTopW, T*c.K), launches
			}
			layer(true) // the norm weight's and the shared gate's f32 copies are made once
			fm, fx, fi, fw, fl := layer(true)
			im, ix, ii, iw, _ := layer(false)
			compare(t, name+" fused vs CPU", fm, cpuF32(mlp), 1e-5)
			compare(t, name+" fused residual vs CPU", fx, cpuF32(x), 1e-5)
			compare(t, name+" indexed vs CPU", im, cpuF32(mlp), 1e-5)
			compare(t, name+" indexed residual vs CPU", ix, cpuF32(x), 1e-5)
			for i := range fi {
				if fi[i] != ii[i] || fw[i] != iw[i] {
					t.Fatalf("%s: choice %d: fused (expert %d, weight %v), moe_route (%d, %v)", name, i, fi[i], math.Float32frombits(fw[i]), ii[i], math.Float32frombits(iw[i]))
				}
			}
			if b.fuse && b.fz.gemvf && b.fz.norm && b.fz.resid && fl != 3 {
				t.Errorf("%s: the fused path took %d launches, want 3 (router with the norm, gate|up, down with the add)", name, fl)
			}
		}
	}
}

// scratchWords reads the first n 32-bit words of scratch buffer i.
func scratchWords(t *testing.T, b *Backend, i, n int) []uint32 {
	t.Helper()
	v := read(t, b, &Tensor{ptr: b.scratch[i].p, rows: 1, cols: n, dt: backend.F32})
	w := make([]uint32, n)
	for j, f := range v {
		w[j] = math.Float32bits(f)
	}
	return w
}
