package cuda

import (
	"testing"

	"github.com/infernix/infernix/engine/model/reftest"
)

// TestChainMatchesUnchained: decode steps with the one-token products
// chained into gemvf_chain (INFERNIX_CUDA_CHAIN=1), eager and replayed
// from graphs, give logits bit-identical to the unchained kernels (the
// same additions in the same order), and the chain does launch. The
// "rounds" case caps the grid at one block per SM on a model whose
// gate|up and LM head have more row groups than the grid has blocks, so
// blocks loop over several groups in a phase.
func TestChainMatchesUnchained(t *testing.T) {
	b := gpu(t)
	if b.k.gemvfChain == nil || !b.fuse || !b.fz.gemvf {
		t.Skip("no gemvf_chain, or the fused products are off")
	}
	if b.chainGrid() == 0 {
		t.Skip("gemvf_chain's grid is unknown here")
	}
	for _, c := range []struct {
		name         string
		perSM, inter int
		vocab        int
	}{{"default", 0, 512, 1000}, {"rounds", 1, 2304, 4000}} {
		t.Run(c.name, func(t *testing.T) {
			b.flush()
			b.flushChain()
			defer func(on bool, per int, g bool) {
				b.flush()
				b.flushChain()
				b.chainOn, b.chainPerSM, b.g.enabled = on, per, g
			}(b.chainOn, b.chainPerSM, b.g.enabled)
			b.chainPerSM = c.perSM
			r := newRand(t)
			cfg := smallConfig("Qwen3ForCausalLM")
			cfg.IntermediateSize, cfg.VocabSize = c.inter, c.vocab
			m := build(t, cfg, &testWeights{be: b, seed: r.Uint64()}, b)
			p := prompts(r, cfg.VocabSize, 30)[0]
			run := func(base int32, chain, graphs bool) [][]float32 {
				b.flush()
				b.flushChain()
				b.chainOn, b.g.enabled = chain, graphs
				l := []*lane{{blocks: []int32{base + 3, base + 1, base + 2, base}}}
				step(t, m, l, [][]int32{p})
				var out [][]float32
				next := int32(5)
				for s := 0; s < 10; s++ {
					lg := step(t, m, l, [][]int32{{next}})[0]
					out = append(out, append([]float32(nil), lg...))
					next = reftest.Argmax(lg)
				}
				return out
			}
			// A first pass sizes the decode scratch (see graphsMatchEager).
			run(16, false, false)
			plain := run(0, false, b.g.enabled)
			n0 := b.chainLaunches
			eager := run(8, true, false)
			n1 := b.chainLaunches
			graphed := run(24, true, true)
			if n1-n0 < 10*(cfg.NumHiddenLayers-1) {
				t.Fatalf("%d gemvf_chain launches over 10 eager decode steps of %d layers", n1-n0, cfg.NumHiddenLayers)
			}
			t.Logf("grid %d blocks (%d registers), %d chain launches eager, %d after", b.chainGrid(), b.k.gemvfChain.regs, n1-n0, b.chainLaunches-n1)
			for name, got := range map[string][][]float32{"chained": eager, "chained and graphed": graphed} {
				for s := range plain {
					for i := range plain[s] {
						if plain[s][i] != got[s][i] {
							t.Fatalf("%s: step %d logit %d: %v, unchained %v", name, s, i, got[s][i], plain[s][i])
						}
					}
				}
			}
		})
	}
}
