package qwen3

import (
	"math"
	"testing"

	"github.com/infernix/infernix/engine/backend"
	"github.com/infernix/infernix/engine/backend/cpu"
	"github.com/infernix/infernix/engine/model"
	"github.com/infernix/infernix/engine/model/reftest"
)

func syntheticModel(t testing.TB, arch string) model.Model {
	t.Helper()
	cfg := &model.Config{Architectures: []string{arch}, VocabSize: 97, HiddenSize: 48, IntermediateSize: 80,
		NumHiddenLayers: 2, NumAttentionHeads: 4, NumKeyValueHeads: 2, HeadDim: 16, RMSNormEps: 1e-6,
		RopeTheta: 10000, MaxPositionEmbeddings: 512, HiddenAct: "silu", TieWordEmbeddings: true,
		NumExperts: 4, NumExpertsPerTok: 2, MoeIntermediateSize: 24, DecoderSparseStep: 1, NormTopkProb: true}
	be := cpu.New(2)
	m, err := New(cfg, &model.SyntheticWeights{Be: be, Seed: 7, Std: 0.3}, be, model.Options{KVBlocks: 16, MaxBatchTokens: 128})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestPrefillEqualsDecode checks that computing a prompt at once, in chunks,
// or one token at a time gives the same logits, and that two sequences in one
// batch do not see each other.
func TestPrefillEqualsDecode(t *testing.T) {
	for _, arch := range []string{"Qwen3ForCausalLM", "Qwen3MoeForCausalLM"} {
		t.Run(arch, func(t *testing.T) {
			m := syntheticModel(t, arch)
			tokens := make([]int32, 70)
			for i := range tokens {
				tokens[i] = int32((i*37 + 11) % 97)
			}
			all := reftest.Forward(t, m, []int32{3, 1}, tokens, 0)
			// Token by token in other blocks.
			for i := range tokens {
				r := reftest.Forward(t, m, []int32{5, 6}, tokens[i:i+1], i)
				if d := maxDiff(r[0], all[i]); d > 1e-4 {
					t.Fatalf("position %d: decode differs from prefill by %.2e", i, d)
				}
			}
			// Two sequences in one batch: chunk of seq A and a decode of seq B.
			b := &model.Batch{Attn: backend.AttnBatch{Blocks: [][]int32{{7, 8}, {5, 6}}}}
			for i := 40; i < 70; i++ {
				b.Tokens = append(b.Tokens, tokens[i])
				b.Attn.Seq = append(b.Attn.Seq, 0)
				b.Attn.Pos = append(b.Attn.Pos, int32(i))
			}
			b.Tokens = append(b.Tokens, tokens[10])
			b.Attn.Seq = append(b.Attn.Seq, 1)
			b.Attn.Pos = append(b.Attn.Pos, 10)
			b.Outputs = []int32{29, 30}
			// Seq A's first 40 tokens into blocks 7, 8.
			reftest.Forward(t, m, []int32{7, 8}, tokens[:40], 0)
			V := m.Config().VocabSize
			dst := make([]float32, 2*V)
			if err := m.Forward(b, dst); err != nil {
				t.Fatal(err)
			}
			if d := maxDiff(dst[:V], all[69]); d > 1e-4 {
				t.Fatalf("batched chunk differs by %.2e", d)
			}
			if d := maxDiff(dst[V:], all[10]); d > 1e-4 {
				t.Fatalf("batched decode differs by %.2e", d)
			}
		})
	}
}

func maxDiff(a, b []float32) float64 {
	var d float64
	for i := range a {
		d = math.Max(d, math.Abs(float64(a[i]-b[i])))
	}
	return d
}
