package cuda

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/infernix/infernix/engine/backend"
)

// TestModelMLPFused decodes one lane of a small random Qwen3 (hidden 256,
// so mlp_fused takes every layer's MLP) with INFERNIX_CUDA_MLP=fused,
// through captured graphs, against the CPU as the other model tests do;
// and Qwen3-8B's MLP shape (I 4096, F 12288) and an uneven one through the
// operators against the CPU, in grids of one block an SM and of 7 blocks.
func TestModelMLPFused(t *testing.T) {
	b := gpu(t)
	if !b.fuse {
		t.Skip("fusion disabled")
	}
	r := newRand(t)
	for _, blocks := range []int{0, 7} {
		m := fuseModes(b)[0]
		m.mlp, m.mlpBlocks = true, blocks
		t.Run(fmt.Sprintf("model_blocks%d", blocks), func(t *testing.T) {
			defer b.setFuse(m)()
			if !b.mlp.on {
				t.Fatal("kernels/mlp.cu did not load")
			}
			cfg := smallConfig("Qwen3ForCausalLM")
			seed := r.Uint64()
			g := build(t, cfg, &testWeights{be: b, seed: seed}, b)
			c := build(t, cfg, &testWeights{be: cpuBe, seed: seed}, cpuBe)
			runs := b.mlp.runs
			replayed(t, b, func() { checkModels(t, g, c, bf16Model(t, cfg, seed, b.kvDT), prompts(r, cfg.VocabSize, 37), 16, 2e-2) })
			if b.mlp.runs == runs {
				t.Fatal("no MLP went through mlp_fused")
			}
			t.Logf("%d fused MLPs recorded", b.mlp.runs-runs)
		})
		for _, s := range []struct{ H, F int }{{4096, 12288}, {768, 1000}} {
			t.Run(fmt.Sprintf("ops_blocks%d_H%d_F%d", blocks, s.H, s.F), func(t *testing.T) {
				defer b.setFuse(m)()
				mlpOpsCase(t, b, r, s.H, s.F)
			})
		}
	}
}

// mlpOpsCase runs post-norm → gate, up → SwiGLU → down + residual for one
// token of hidden size H and F intermediate rows on both backends, twice
// (the second launch finds the scratch as the first left it), and
// compares every tensor the operators write.
func mlpOpsCase(t *testing.T, b *Backend, r *rand.Rand, H, F int) {
	x := act(t, b, r, 1, H, 1)
	nw := weight(t, b, r, backend.BF16, 1, H, 1.5, H)
	wg, wu := weight(t, b, r, backend.BF16, F, H, 0.05), weight(t, b, r, backend.BF16, F, H, 0.05)
	wd := weight(t, b, r, backend.BF16, H, F, 0.05)
	defer func() {
		for _, w := range []pair{wg, wu, wd} {
			b.Free(w.g)
		}
	}()
	h, g, u, mlp := out(t, b, 1, H), out(t, b, 1, F), out(t, b, 1, F), out(t, b, 1, H)
	run := func(be backend.Backend, P func(pair) backend.Tensor) {
		mlpOps(be, P(h), P(x), P(nw), P(g), P(u), P(mlp), P(wg), P(wu), P(wd), 1e-6)
	}
	b.mlpPrepare(tensor(wd.g))
	for launch := 0; launch < 2; launch++ {
		runs := b.mlp.runs
		run(b, func(p pair) backend.Tensor { return p.g })
		b.flush()
		if b.mlp.runs != runs+1 {
			t.Fatalf("launch %d: %d fused MLPs, want 1", launch, b.mlp.runs-runs)
		}
		run(cpuBe, func(p pair) backend.Tensor { return p.c })
		for _, c := range []struct {
			name string
			p    pair
		}{{"h", h}, {"swiglu", g}, {"up", u}, {"mlp", mlp}, {"x", x}} {
			compare(t, fmt.Sprintf("launch %d %s", launch, c.name), read(t, b, c.p.g), cpuF32(c.p), 2e-5)
		}
	}
}

// mlpOps is a Qwen3 layer's MLP as the model calls it: h = RMSNorm(x),
// the gate and up products of h, the SwiGLU into g, down of it, and the
// residual add into x.
func mlpOps(be backend.Backend, h, x, norm, g, u, mlp, wg, wu, wd backend.Tensor, eps float32) {
	be.RMSNorm(h, x, norm, eps)
	be.MatMul(g, h, wg)
	be.MatMul(u, h, wu)
	be.SwiGLU(g, g, u)
	be.MatMul(mlp, g, wd)
	be.Add(x, x, mlp)
}
