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
// wide as the routed ones with top 10 (Qwen3-Next, Qwen3.5-MoE), a
// hidden size that is no multiple of 256 with an ungated shared expert, and
// Qwen3-Next's 512 experts (the expert tables read after the routing).
// The fused path runs both ways: token by token, and grouped by expert
// (moe_plan, moe_gateup_g, moe_down_g, moe_combine_g; five launches).
func TestMoEFused(t *testing.T) {
	b := gpu(t)
	if b.k.moeGateUp == nil {
		t.Fatalf("kernels/moe.cu did not load: %v", b.moeErr)
	}
	r := newRand(t)
	defer func(v, pg bool, g int) { b.moeFused, b.moeGrouped, b.moeGroupT = v, pg, g }(b.moeFused, b.moeGrouped, b.moeGroupT)
	// Outside a forward, more than gemvMax tokens would take the prefill's
	// grouped GEMMs (moeGroupedFor); decode's paths are the ones tested.
	b.moeGrouped = false
	for _, c := range []struct {
		E, K, H, I         int
		norm, shared, gate bool
	}{
		{128, 8, 256, 96, true, false, false},
		{64, 10, 128, 64, true, true, true},
		{8, 2, 72, 24, false, true, false},
		{512, 10, 128, 32, true, true, true}, // more experts than a block has threads
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
		for _, T := range []int{1, 3, 8, 16} {
			name := fmt.Sprintf("E%d_K%d_H%d_I%d_shared%v_gate%v_T%d", c.E, c.K, c.H, c.I, c.shared, c.gate, T)
			x := act(t, b, r, T, c.H, 1)
			x0 := append([]float32(nil), cpuF32(x)...)
			h, mlp := out(t, b, T, c.H), out(t, b, T, c.H)
			cpuBe.RMSNorm(h.c, x.c, nw.c, 1e-6)
			cpuBe.MoE(mlp.c, h.c, mc)
			cpuBe.Add(x.c, x.c, mlp.c)
			const indexed, fused, grouped = 0, 1, 2
			layer := func(path int) (mlpOut, xOut []float32, idx, w []uint32, launches int) {
				b.moeFused = path != indexed
				b.moeGroupT = map[bool]int{true: 1, false: 0}[path == grouped]
				write(t, b, x.g, x0)
				poison(b, mlp.g)
				// The choices' scratch poisoned too, so that each path
				// must write its own.
				// (Once the warm-up below has sized them.)
				for _, sc := range []struct {
					i int
					v uint32
				}{{scrTopIdx, 0xffffffff}, {scrTopW, 0x7fc00000}} {
					if b.scratch[sc.i].size >= uint64(4*T*c.K) {
						b.memset(b.scratch[sc.i].p, sc.v, T*c.K)
					}
				}
				n0, runs, gruns := b.launches, b.moeFusedRuns, b.moeGroupRuns
				b.RMSNorm(h.g, x.g, nw.g, 1e-6)
				b.MoE(mlp.g, h.g, m)
				b.Add(x.g, x.g, mlp.g)
				b.flush()
				launches = b.launches - n0
				if got := b.moeFusedRuns - runs; got != map[bool]int{true: 1, false: 0}[path != indexed] {
					t.Fatalf("%s: path %d: %d fused MoE runs", name, path, got)
				}
				if got := b.moeGroupRuns - gruns; got != map[bool]int{true: 1, false: 0}[path == grouped] {
					t.Fatalf("%s: path %d: %d grouped MoE runs", name, path, got)
				}
				mlpOut, xOut = read(t, b, mlp.g), read(t, b, x.g)
				return mlpOut, xOut, scratchWords(t, b, scrTopIdx, T*c.K), scratchWords(t, b, scrTopW, T*c.K), launches
			}
			// Both paths once first: the f32 copies of the norm and gate
			// weights are made, and the scratch buffers grown (a growth
			// synchronises, which runs the held norm on its own and moves
			// the router's logits by rounding).
			layer(indexed)
			layer(fused)
			layer(grouped)
			fm, fx, fi, fw, fl := layer(fused)
			gm, gx, gi, gw, gl := layer(grouped)
			im, ix, ii, iw, _ := layer(indexed)
			compare(t, name+" fused vs CPU", fm, cpuF32(mlp), 1e-5)
			compare(t, name+" fused residual vs CPU", fx, cpuF32(x), 1e-5)
			compare(t, name+" grouped vs CPU", gm, cpuF32(mlp), 1e-5)
			compare(t, name+" grouped residual vs CPU", gx, cpuF32(x), 1e-5)
			iref, ixref, itol := cpuF32(mlp), cpuF32(x), 1e-5
			if T > b.gemvMax && c.shared && b.lt != nil {
				// The indexed path's shared expert reads bf16 activations
				// through cuBLASLt past gemvMax rows: the CPU rounds alike
				// (formatBackend's MoE).
				rm := cpuBe.Alloc(T, c.H)
				moeRounded(cpuBe, rm, h.c, mc, moeFormats{shared: true})
				iref, ixref, itol = cpuF32(pair{c: rm}), make([]float32, T*c.H), roundedTol
				for i := range ixref {
					ixref[i] = x0[i] + iref[i]
				}
			}
			compare(t, name+" indexed vs CPU", im, iref, itol)
			compare(t, name+" indexed residual vs CPU", ix, ixref, itol)
			for i := range fi {
				if fi[i] != ii[i] || fw[i] != iw[i] || gi[i] != ii[i] || gw[i] != iw[i] {
					t.Fatalf("%s: choice %d: fused (expert %d, weight %v), grouped (%d, %v), moe_route (%d, %v)", name, i,
						fi[i], math.Float32frombits(fw[i]), gi[i], math.Float32frombits(gw[i]), ii[i], math.Float32frombits(iw[i]))
				}
			}
			// Past gemvMax rows the router's product takes no norm.
			if b.fuse && b.fz.gemvf && b.fz.norm && b.fz.resid && T <= b.gemvMax {
				if fl != 3 {
					t.Errorf("%s: the fused path took %d launches, want 3 (router with the norm, gate|up, down with the add)", name, fl)
				}
				if gl != 5 {
					t.Errorf("%s: the grouped path took %d launches, want 5 (router with the norm, plan, gate|up, down, combine with the add)", name, gl)
				}
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

// TestWeightSlabs uploads 300 weights of 3 MiB (a Qwen3-30B-A3B expert's
// size, which the driver would round to 4 MiB each) and checks that they
// share 256 MiB slabs: each in its own 256-byte-aligned range, each read
// back intact, the device's free memory down by less than the 1,200 MiB
// separate allocations would take, and every slab but the one being
// filled returned when its weights are freed.
func TestWeightSlabs(t *testing.T) {
	b := gpu(t)
	r := newRand(t)
	const n, rows, cols = 300, 768, 1024 // f32: 3 MiB each
	free0, _, held0, _ := b.Memory()
	slabs0 := b.slabs.allocated
	var ws []backend.Tensor
	var vals [][]float32
	for i := 0; i < n; i++ {
		v := randF32(r, rows*cols, 1)
		w, err := b.Upload(fmt.Sprintf("w%d", i), backend.F32, []int{rows, cols}, f32bytes(v))
		if err != nil {
			t.Fatal(err)
		}
		ws, vals = append(ws, w), append(vals, v)
	}
	free1, _, _, _ := b.Memory()
	if used := (free0 - free1) >> 20; used >= n*4 {
		t.Errorf("%d weights of 3 MiB took %d MiB of the device's memory", n, used)
	}
	if got := b.slabs.allocated - slabs0; got > (n*3+255)/256+1 {
		t.Errorf("%d slabs for %d MiB of weights", got, n*3)
	}
	starts := map[uint64]bool{}
	for i, w := range ws {
		p := uint64(tensor(w).ptr)
		if p%slabAlign != 0 || starts[p] {
			t.Fatalf("weight %d at %#x: misaligned or shared", i, p)
		}
		starts[p] = true
		if i%37 == 0 || i == n-1 {
			compare(t, fmt.Sprintf("weight %d", i), read(t, b, w), vals[i], 0)
		}
	}
	for _, w := range ws {
		b.Free(w)
	}
	if _, _, held, _ := b.Memory(); held > held0+slabBytes {
		t.Errorf("after freeing them the backend holds %d MiB more than before", (held-held0)>>20)
	}
}
