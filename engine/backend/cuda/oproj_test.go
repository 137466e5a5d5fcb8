package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/infernix/infernix/engine/backend"
)

// TestAttnOProjFold runs a Qwen3 layer's attention half (QK-norm, RoPE,
// attention, o-projection, residual add) with INFERNIX_CUDA_OPROJ=fold
// (and fold-heads) against the CPU over a prefill and decode steps whose
// context is one split and several, for Qwen3-8B's head shape and
// smaller ones: the attention's output, the product and the sum must
// match, and a decode step of several splits must take 2 launches (the
// attention with its prep folded in, then attn_oproj) where it takes 3
// without the fold. Qwen3-8B's shape runs first and again last, so that
// each mode checks that launches with fewer output rows, whose shares
// share the scratch, left its row-group counters zero.
func TestAttnOProjFold(t *testing.T) {
	b := gpu(t)
	if !b.fuse || !b.attnTC || !b.attnDefer {
		t.Skip("fusion, the tensor-core decode attention or the deferred merge is off")
	}
	r := newRand(t)
	for _, mode := range []struct {
		name             string
		fold, headsFirst bool
	}{{"fold", true, false}, {"fold-heads", true, true}, {"unfolded", false, false}} {
		for _, c := range []struct{ kvh, G, hd, pre int }{{8, 4, 128, 600}, {2, 4, 128, 30}, {1, 8, 64, 300}, {2, 4, 32, 200}, {8, 4, 128, 600}} {
			m := fuseModes(b)[0]
			m.oproj = mode.fold
			t.Run(fmt.Sprintf("%s/kvh%d_g%d_hd%d_pre%d", mode.name, c.kvh, c.G, c.hd, c.pre), func(t *testing.T) {
				defer b.setFuse(m)()
				hf := b.oproj.headsFirst
				b.oproj.headsFirst = mode.headsFirst // INFERNIX_CUDA_OPROJ=fold-heads
				defer func() { b.oproj.headsFirst = hf }()
				oprojCase(t, b, r, c.kvh, c.G, c.hd, c.pre, mode.fold)
			})
		}
	}
}

func oprojCase(t *testing.T, b *Backend, r *rand.Rand, kvh, G, hd, pre int, fold bool) {
	heads, half := kvh*G, hd/2
	H := 4096
	if heads*hd < 4096 {
		H = 384
	}
	spec := backend.KVSpec{Layers: 1, Blocks: (pre+8)/64 + 2, KVHeads: kvh, HeadDim: hd}
	gc, err := b.NewKVCache(spec)
	if err != nil {
		t.Fatal(err)
	}
	cc, _ := cpuBe.NewKVCache(spec)
	rope := testRope(half, pre+8)
	qn, kn := weight(t, b, r, backend.BF16, 1, hd, 1.5, hd), weight(t, b, r, backend.BF16, 1, hd, 1.5, hd)
	wo := weight(t, b, r, backend.BF16, H, heads*hd, 0.05)
	defer b.Free(wo.g)
	table := make([]int32, spec.Blocks)
	for i, p := range r.Perm(spec.Blocks) {
		table[i] = int32(p)
	}
	scale := float32(1 / math.Sqrt(float64(hd)))
	x := act(t, b, r, pre, H, 1)
	for step := 0; step < 4; step++ {
		T, p0 := pre, 0
		if step > 0 {
			T, p0 = 1, pre+step-1
		}
		ab := &backend.AttnBatch{Blocks: [][]int32{table}}
		for i := 0; i < T; i++ {
			ab.Seq = append(ab.Seq, 0)
			ab.Pos = append(ab.Pos, int32(p0+i))
		}
		q, k, v := act(t, b, r, T, heads*hd, 2), act(t, b, r, T, kvh*hd, 2), act(t, b, r, T, kvh*hd, 1)
		o, h := out(t, b, T, heads*hd), out(t, b, T, H)
		xs := x
		if step > 0 {
			xs = act(t, b, r, 1, H, 1)
		}
		run := func(be backend.Backend, P func(pair) backend.Tensor, cache backend.KVCache) {
			attnOps(be, P(o), P(q), P(k), P(v), P(qn), P(kn), cache, ab, rope, heads, kvh, hd, scale)
			be.MatMul(P(h), P(o), P(wo))
			be.Add(P(xs), P(xs), P(h))
		}
		l0, runs := b.launches, b.oproj.runs
		run(b, func(p pair) backend.Tensor { return p.g }, gc)
		b.flush()
		n, folded := b.launches-l0, b.oproj.runs-runs
		run(cpuBe, func(p pair) backend.Tensor { return p.c }, cc)
		compare(t, fmt.Sprintf("step %d attention", step), read(t, b, o.g), cpuF32(o), 1e-2)
		compare(t, fmt.Sprintf("step %d o-projection", step), read(t, b, h.g), cpuF32(h), 1e-2)
		compare(t, fmt.Sprintf("step %d sum", step), read(t, b, xs.g), cpuF32(xs), 1e-2)
		if step < 2 {
			continue // the prefill, and the step that makes the fold's scratch
		}
		splits := pre/64 + 1
		want, wantFold := 3, 0
		switch {
		case splits == 1:
			want = 2 // one split writes o: no merge, nothing to fold
		case fold:
			want, wantFold = 2, 1
		}
		if n != want || folded != wantFold {
			t.Errorf("step %d (%d splits): %d launches, %d through attn_oproj; want %d, %d", step, splits, n, folded, want, wantFold)
		}
	}
}

// TestModelOProjFold decodes one lane of a small random Qwen3 with
// INFERNIX_CUDA_OPROJ=fold, through captured graphs, against the CPU as
// the other model tests do, from prompts long enough that its decode
// attention splits (so that attn_oproj takes every layer's o-projection).
func TestModelOProjFold(t *testing.T) {
	b := gpu(t)
	if !b.fuse {
		t.Skip("fusion disabled")
	}
	r := newRand(t)
	m := fuseModes(b)[0]
	m.oproj = true
	defer b.setFuse(m)()
	cfg := smallConfig("Qwen3ForCausalLM")
	seed := r.Uint64()
	g := build(t, cfg, &testWeights{be: b, seed: seed}, b)
	c := build(t, cfg, &testWeights{be: cpuBe, seed: seed}, cpuBe)
	runs := b.oproj.runs
	replayed(t, b, func() {
		checkModels(t, g, c, bf16Model(t, cfg, seed, b.kvDT), prompts(r, cfg.VocabSize, 150), 16, 2e-2)
	})
	if b.oproj.runs == runs {
		t.Fatal("no o-projection went through attn_oproj")
	}
	t.Logf("%d folded o-projections recorded", b.oproj.runs-runs)
}
