package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/infernix/infernix/engine/backend"
)

// fuseMode is one setting of the fusion switches (fuse.go) and of
// programmatic dependent launch.
type fuseMode struct {
	name  string
	fuse  bool
	fz    fuseParts
	pdl   bool
	fused bool // every fusion on: launch counts are checked
	wide  int  // gemvWide (split-K fused products; forced slice counts reach the small test shapes)
	// inKernelMerge: the folded decode attention's last split merges
	// (INFERNIX_CUDA_ATTN_DEFER=0) instead of attn_merge_splits.
	inKernelMerge bool
	// cluster: the folded decode attention's splits merge within
	// clusters of up to this many blocks (INFERNIX_CUDA_ATTN_CLUSTER).
	cluster int
	// mlp: one-token MLPs through mlp_fused (INFERNIX_CUDA_MLP=fused) in
	// grids of mlpBlocks blocks (0: one an SM).
	mlp       bool
	mlpBlocks int
	// oproj: a one-token decode attention's merge folded into the
	// o-projection (INFERNIX_CUDA_OPROJ=fold).
	oproj bool
}

func fuseModes(b *Backend) []fuseMode {
	all := fuseParts{gemvf: true, norm: true, resid: true, swiglu: true, attn: true, prep: true}
	noPrep := all
	noPrep.prep = false
	return []fuseMode{
		{name: "fused-pdl", fuse: true, fz: all, pdl: b.pdlOK, fused: true},
		{name: "fused-nopdl", fuse: true, fz: all, fused: true},
		{name: "merge-in-kernel", fuse: true, fz: all, pdl: b.pdlOK, fused: true, inKernelMerge: true},
		{name: "cluster-merge", fuse: true, fz: all, pdl: b.pdlOK, fused: true, cluster: 16},
		{name: "noprep", fuse: true, fz: noPrep, fused: true},
		{name: "oldgemv", fuse: true, fz: fuseParts{attn: true}, pdl: b.pdl},
		{name: "unfused", fuse: false, fz: all},
		{name: "wide2", fuse: true, fz: all, fused: true, wide: 2},
		{name: "wide3-pdl", fuse: true, fz: all, pdl: b.pdlOK, fused: true, wide: 3},
		{name: "wide4", fuse: true, fz: all, fused: true, wide: 4},
		{name: "mlp-fused", fuse: true, fz: all, pdl: b.pdlOK, fused: true, mlp: true},
		{name: "mlp-fused-7", fuse: true, fz: all, fused: true, mlp: true, mlpBlocks: 7},
		{name: "oproj-fold", fuse: true, fz: all, pdl: b.pdlOK, fused: true, oproj: true},
	}
}

// setFuse switches fusion, PDL and split-K products (captured graphs stay
// valid: records differ) and returns what restores the previous setting.
func (b *Backend) setFuse(m fuseMode) func() {
	b.flush()
	fuse, fz, pdl, wide, deferMerge, cluster, mlp, oproj := b.fuse, b.fz, b.pdl, b.gemvWide, b.attnDefer, b.attnCluster, b.mlp, b.oproj.on
	b.fuse, b.fz, b.pdl, b.gemvWide, b.attnCluster = m.fuse, m.fz, m.pdl && b.pdl, m.wide, 0
	b.mlp.on, b.mlp.blocks = m.mlp && b.mlpLoad(), m.mlpBlocks
	b.oproj.on = m.oproj
	if m.inKernelMerge {
		b.attnDefer = false
	}
	if m.cluster > 0 && b.pdlOK {
		b.attnCluster = m.cluster
	}
	return func() {
		b.flush()
		b.fuse, b.fz, b.pdl, b.gemvWide, b.attnDefer, b.attnCluster = fuse, fz, pdl, wide, deferMerge, cluster
		b.mlp.on, b.mlp.blocks = mlp.on, mlp.blocks
		b.oproj.on = oproj
	}
}

// TestFusedLayer runs the operator sequence of a decoder layer's products
// (input norm → q, k, v; o-projection + residual; post norm → gate, up →
// SwiGLU; down + residual; next input norm → q) on both backends, in every
// fusion mode, and compares every tensor, the intermediate ones (h, the
// gate and up products) included. With every fusion on, the sequence must
// take 5 launches (14 unfused), 4 where mlp_fused takes the MLP (one
// token, H a multiple of 256).
func TestFusedLayer(t *testing.T) {
	b := gpu(t)
	r := newRand(t)
	for _, m := range fuseModes(b) {
		for _, T := range []int{1, 2, 3, 8} {
			for _, H := range []int{512, 2056} {
				t.Run(fmt.Sprintf("%s/T%d_H%d", m.name, T, H), func(t *testing.T) {
					defer b.setFuse(m)()
					fusedLayerCase(t, b, r, T, H, m.fused)
				})
			}
		}
	}
}

// fusedLayerCase returns the GPU's tensors in the order it compares them.
func fusedLayerCase(t *testing.T, b *Backend, r *rand.Rand, T, H int, fused bool) [][]float32 {
	inter, qO, kO, vO := H+136, H, 40, 130
	x := act(t, b, r, T, H, 1)
	attn := act(t, b, r, T, qO, 1)
	n1, n2 := weight(t, b, r, backend.BF16, 1, H, 1.5, H), weight(t, b, r, backend.BF16, 1, H, 1.5, H)
	wq, wk, wv := weight(t, b, r, backend.BF16, qO, H, 0.05), weight(t, b, r, backend.BF16, kO, H, 0.05), weight(t, b, r, backend.BF16, vO, H, 0.05)
	wo := weight(t, b, r, backend.BF16, H, qO, 0.05)
	wg, wu := weight(t, b, r, backend.BF16, inter, H, 0.05), weight(t, b, r, backend.BF16, inter, H, 0.05)
	wd := weight(t, b, r, backend.BF16, H, inter, 0.05)
	defer func() {
		for _, w := range []pair{wq, wk, wv, wo, wg, wu, wd} {
			b.Free(w.g)
		}
	}()
	h, q, k, v := out(t, b, T, H), out(t, b, T, qO), out(t, b, T, kO), out(t, b, T, vO)
	g, u, mlp := out(t, b, T, inter), out(t, b, T, inter), out(t, b, T, H)
	run := func(be backend.Backend, pick func(pair) backend.Tensor) {
		P := pick
		be.RMSNorm(P(h), P(x), P(n1), 1e-6)
		be.MatMul(P(q), P(h), P(wq))
		be.MatMul(P(k), P(h), P(wk))
		be.MatMul(P(v), P(h), P(wv))
		be.MatMul(P(h), P(attn), P(wo))
		be.Add(P(x), P(x), P(h))
		mlpOps(be, P(h), P(x), P(n2), P(g), P(u), P(mlp), P(wg), P(wu), P(wd), 1e-5)
		be.RMSNorm(P(h), P(x), P(n1), 1e-6)
		be.MatMul(P(q), P(h), P(wq))
	}
	var outs [][]float32
	b.mlpPrepare(tensor(wd.g)) // down's transposed copy, where mlp_fused is on
	want, mr := 5, b.mlp.runs
	if b.mlp.on && T == 1 && H%256 == 0 {
		want = 4
	}
	l0 := b.launches
	run(b, func(p pair) backend.Tensor { return p.g })
	b.flush()
	if n := b.launches - l0; fused && n != want {
		t.Errorf("%d launches, want %d with every fusion on", n, want)
	}
	if n := b.mlp.runs - mr; fused && n != 5-want {
		t.Errorf("%d fused MLPs, want %d", n, 5-want)
	}
	run(cpuBe, func(p pair) backend.Tensor { return p.c })
	for _, c := range []struct {
		name string
		p    pair
	}{{"q", q}, {"k", k}, {"v", v}, {"h", h}, {"x", x}, {"swiglu", g}, {"up", u}, {"mlp", mlp}} {
		got := read(t, b, c.p.g)
		compare(t, c.name, got, cpuF32(c.p), 2e-5)
		outs = append(outs, got)
	}
	return outs
}

// TestFusedAttention runs QK-norm, RoPE and attention as a Qwen3 layer
// calls them (and without the norms, as models without QK-norm do) over a
// prefill, a second sequence and decode steps of both, in every fusion
// mode, against the CPU: attention outputs, k after its norm and rotation,
// and q too where the backend writes it back. Fused, a decode step takes 2
// launches (prep kernel + attention), or 1 with the prep folded into the
// attention, 2 again when attn_merge_splits merges its splits; then q is
// not written back (Backend.Attention leaves q's contents unspecified).
func TestFusedAttention(t *testing.T) {
	b := gpu(t)
	r := newRand(t)
	for _, m := range fuseModes(b) {
		for _, c := range []struct{ kvh, G, hd, half int }{{2, 4, 128, 64}, {1, 8, 64, 32}, {2, 2, 40, 16}, {4, 1, 256, 128}, {1, 3, 128, 64}} {
			for _, norm := range []bool{true, false} {
				t.Run(fmt.Sprintf("%s/kvh%d_g%d_hd%d_norm%v", m.name, c.kvh, c.G, c.hd, norm), func(t *testing.T) {
					defer b.setFuse(m)()
					fusedAttentionCase(t, b, r, c.kvh, c.G, c.hd, c.half, norm, m.fused)
				})
			}
		}
	}
}

// attnOps is a Qwen3 layer's attention as the model calls it: the q and k
// head norms (where qn is given), their RoPEs, and the attention into o.
func attnOps(be backend.Backend, o, q, k, v, qn, kn backend.Tensor, cache backend.KVCache, ab *backend.AttnBatch, rope *backend.Rope, heads, kvh, hd int, scale float32) {
	T := len(ab.Pos)
	if qn != nil {
		qh, kh := be.Reshape(q, T*heads, hd), be.Reshape(k, T*kvh, hd)
		be.RMSNorm(qh, qh, qn, 1e-6)
		be.RMSNorm(kh, kh, kn, 1e-5)
	}
	be.RoPE(q, heads, ab.Pos, rope)
	be.RoPE(k, kvh, ab.Pos, rope)
	be.Attention(o, q, k, v, cache, 0, ab, scale)
}

// testRope is a RoPE table of rotary half-width half (base 10000) for
// positions below maxPos.
func testRope(half, maxPos int) *backend.Rope {
	rope := &backend.Rope{Half: half, MaxPos: maxPos, Cos: make([]float32, maxPos*half), Sin: make([]float32, maxPos*half)}
	for p := 0; p < maxPos; p++ {
		for i := 0; i < half; i++ {
			a := float64(p) * math.Pow(10000, -float64(2*i)/float64(2*half))
			rope.Cos[p*half+i], rope.Sin[p*half+i] = float32(math.Cos(a)), float32(math.Sin(a))
		}
	}
	return rope
}

func fusedAttentionCase(t *testing.T, b *Backend, r *rand.Rand, kvh, G, hd, half int, norm, fused bool) {
	heads := kvh * G
	spec := backend.KVSpec{Layers: 1, Blocks: 12, KVHeads: kvh, HeadDim: hd}
	gc, err := b.NewKVCache(spec)
	if err != nil {
		t.Fatal(err)
	}
	cc, _ := cpuBe.NewKVCache(spec)
	rope := testRope(half, 700)
	qn, kn := weight(t, b, r, backend.BF16, 1, hd, 1.5, hd), weight(t, b, r, backend.BF16, 1, hd, 1.5, hd)
	perm := r.Perm(spec.Blocks)
	tables := [][]int32{{int32(perm[3]), int32(perm[0]), int32(perm[7]), int32(perm[1]), int32(perm[9]), int32(perm[4]), int32(perm[11]), int32(perm[5]), int32(perm[6]), int32(perm[10]), int32(perm[8])}, {int32(perm[2])}}
	type tok struct{ seq, pos int }
	steps := [][]tok{}
	var pre []tok
	for p := 0; p < 600; p++ {
		pre = append(pre, tok{0, p})
	}
	steps = append(steps, pre, []tok{{1, 0}, {1, 1}, {1, 2}}, []tok{{0, 600}, {1, 3}}, []tok{{0, 601}, {1, 4}}, []tok{{0, 602}}, []tok{{0, 603}})
	scale := float32(1 / math.Sqrt(float64(hd)))
	for si, toks := range steps {
		T := len(toks)
		ab := &backend.AttnBatch{Blocks: tables}
		for _, x := range toks {
			ab.Seq = append(ab.Seq, int32(x.seq))
			ab.Pos = append(ab.Pos, int32(x.pos))
		}
		q := act(t, b, r, T, heads*hd, 2)
		k := act(t, b, r, T, kvh*hd, 2)
		v := act(t, b, r, T, kvh*hd, 1)
		o := out(t, b, T, heads*hd)
		run := func(be backend.Backend, P func(pair) backend.Tensor, cache backend.KVCache) {
			var nq, nk backend.Tensor
			if norm {
				nq, nk = P(qn), P(kn)
			}
			attnOps(be, P(o), P(q), P(k), P(v), nq, nk, cache, ab, rope, heads, kvh, hd, scale)
		}
		l0, c0 := b.launches, b.clusterRuns
		run(b, func(p pair) backend.Tensor { return p.g }, gc)
		b.flush()
		clustered := b.clusterRuns > c0
		// The last two steps decode one token: the prep is its own kernel,
		// or folded into the tensor-core decode attention where that
		// kernel exists for the head shape (attention.go).
		want, what := 2, "prep + attention"
		folded := fused && b.attnTC && b.fz.prep && hd%16 == 0 && hd <= 128
		if folded {
			want, what = 1, "attention with the prep folded in"
			if b.attnDefer && !clustered {
				want, what = 2, "attention with the prep folded in + attn_merge_splits"
			}
		}
		if n := b.launches - l0; fused && si >= len(steps)-2 && n != want {
			t.Errorf("step %d: %d launches, want %d (%s)", si, n, want, what)
		}
		run(cpuBe, func(p pair) backend.Tensor { return p.c }, cc)
		// Decode steps (one token per sequence) with the fold and the
		// deferred merge leave q as it came (the splits read it raw).
		if !(folded && (b.attnDefer || clustered) && distinct(ab.Seq)) {
			compare(t, fmt.Sprintf("step %d q", si), read(t, b, q.g), cpuF32(q), 1e-5)
		}
		compare(t, fmt.Sprintf("step %d k", si), read(t, b, k.g), cpuF32(k), 1e-5)
		compare(t, fmt.Sprintf("step %d attention", si), read(t, b, o.g), cpuF32(o), 1e-2)
		// Decode steps of the tensor-core fold (head dims that are
		// multiples of 16 up to 128) merge within clusters when asked.
		if folded && b.attnCluster > 1 && distinct(ab.Seq) && si >= len(steps)-4 && !clustered {
			t.Errorf("step %d: INFERNIX_CUDA_ATTN_CLUSTER=%d, but the decode attention was not launched in clusters", si, b.attnCluster)
		}
	}
}

// TestGemvfVariants: the fused products compiled with other GF_RW / GF_U /
// GF_PIPE (gemvf_variant.go) give bit-identical results to the default ones
// over a decoder layer's products, and every variant (GF_KS too, which adds
// in another order) equals the CPU, with every fusion on.
func TestGemvfVariants(t *testing.T) {
	b := gpu(t)
	if !b.fuse {
		t.Skip("fusion disabled")
	}
	m := fuseModes(b)[1] // fused, no PDL
	defer b.setFuse(m)()
	defer func(v gemvfVariant) {
		if err := b.useGemvfVariant(v); err != nil {
			t.Error(err)
		}
	}(b.gemvf)
	seed := uint64(newRand(t).Uint32())
	want := map[string][][]float32{}
	// pass runs every case with the variant spec: the first variant to
	// reach a key sets its bits, the others must match them.
	pass := func(spec, what string) {
		v, err := parseGemvfVariant(spec)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.useGemvfVariant(v); err != nil {
			t.Fatal(err)
		}
		for _, T := range []int{1, 3, 8} {
			for _, H := range []int{512, 2056} {
				// Variants with the same GF_KS add in the same order;
				// fusedLayerCase checks every one against the CPU.
				key := fmt.Sprintf("T%d_H%d_ks%d_%d_%d", T, H, v.ks, v.ksr, v.kss)
				r := rand.New(rand.NewPCG(seed, uint64(T*10000+H)))
				got := fusedLayerCase(t, b, r, T, H, true)
				if w, ok := want[key]; !ok {
					want[key] = got
				} else if i, j, ok := firstDiff(w, got); !ok {
					t.Errorf("%s %s %s: tensor %d element %d is %v, default %v", what, v.name(), key, i, j, got[i][j], w[i][j])
				}
			}
		}
	}
	for _, spec := range append([]string{""}, benchGemvfVariants...) {
		pass(spec, "variant")
	}
	// The default variant with the products looped over a grid of 7 blocks
	// (INFERNIX_CUDA_GEMV_WAVE; 7 so that even the smallest product loops,
	// unevenly): the same bits.
	defer func(w, c int) { b.gemvWave, b.gemvWaveCap = w, c }(b.gemvWave, b.gemvWaveCap)
	b.gemvWave, b.gemvWaveCap = 64, 7
	pass("", "looped over 7 blocks,")
}

// firstDiff finds the first element where a and b differ (ok when none).
func firstDiff(a, b [][]float32) (int, int, bool) {
	for i := range a {
		for j := range a[i] {
			if math.Float32bits(a[i][j]) != math.Float32bits(b[i][j]) {
				return i, j, false
			}
		}
	}
	return 0, 0, true
}

func TestGemvWaveGrid(t *testing.T) {
	for _, c := range []struct{ total, resident, grid, nvb int }{
		{1536, 1056, 768, 1536},  // Qwen3-8B gate|up on an H200: two blocks each
		{9496, 1056, 1056, 9496}, // its LM head: nine each, the last eight blocks eight
		{256, 1056, 256, 0},      // one wave already: no loop
		{1056, 1056, 1056, 0},
		{1057, 1056, 529, 1057},
		{8, 7, 4, 8},
		{100, 0, 100, 0}, // resident unknown
	} {
		if grid, nvb := gemvWaveGrid(c.total, c.resident, 8); c.total == 9496 && (grid != c.total || nvb != 0) {
			t.Errorf("gemvWaveGrid(%d, %d, 8) = %d, %d: loops more than 8 blocks a block", c.total, c.resident, grid, nvb)
		}
		grid, nvb := gemvWaveGrid(c.total, c.resident, 64)
		if grid != c.grid || nvb != c.nvb {
			t.Errorf("gemvWaveGrid(%d, %d) = %d, %d; want %d, %d", c.total, c.resident, grid, nvb, c.grid, c.nvb)
		}
		if nvb > 0 && (grid > c.resident || (nvb+grid-1)/grid*grid-nvb >= grid) {
			t.Errorf("gemvWaveGrid(%d, %d): grid %d is more than a wave or leaves a block idle", c.total, c.resident, grid)
		}
	}
}
