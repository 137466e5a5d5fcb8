package cuda

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/infernix/infernix/engine/model"
)

// hybridConfig is a committed tiny hybrid fixture's config with the real
// models' head dims (linear attention 128/128, gated attention 256 with a
// quarter rotated) and a wider hidden size, for random weights.
func hybridConfig(t *testing.T, fixture string) *model.Config {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("../../../tests/testdata/models", fixture, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := json.Unmarshal(data, &c); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]any{"hidden_size": 256, "intermediate_size": 384, "head_dim": 256,
		"num_attention_heads": 4, "num_key_value_heads": 2, "linear_key_head_dim": 128, "linear_value_head_dim": 128,
		"linear_num_key_heads": 2, "linear_num_value_heads": 4, "moe_intermediate_size": 96,
		"shared_expert_intermediate_size": 80, "max_position_embeddings": 4096, "vocab_size": 1000} {
		c[k] = v
	}
	raw, _ := json.Marshal(c)
	cfg, err := model.ParseConfig(raw)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestModelHybrid runs random Qwen3.5, Qwen3.5-MoE and Qwen3-Next models of
// real head dims on the GPU against the CPU backend (checkModels: chunked
// prefills that continue their recurrent state, then several lanes decoding
// together, each in its own state slot; a step past 2e-2 is held to the CPU
// in the GPU's number formats), and checks that decode steps were replayed
// from captured graphs; then again with every product's inputs in f32
// (checkF32Products), held to 2e-2 with no allowance for formats.
func TestModelHybrid(t *testing.T) {
	b := gpu(t)
	r := newRand(t)
	for _, fixture := range []string{"qwen35-tiny", "qwen35moe-tiny", "qwen3next-tiny"} {
		t.Run(fixture, func(t *testing.T) {
			cfg := hybridConfig(t, fixture)
			seed := r.Uint64()
			g := build(t, cfg, &testWeights{be: b, seed: seed}, b)
			c := build(t, cfg, &testWeights{be: cpuBe, seed: seed}, cpuBe)
			// The CPU in the GPU's formats, which a step past 2e-2 is held to
			// (TestFixtures): on the CPU alone it moves the dense model's
			// 70-token prefill by ~0.09.
			emu := formatBackend(b)
			cf := build(t, cfg, &testWeights{be: emu, seed: seed}, emu)
			replayed(t, b, func() { checkModels(t, g, c, cf, prompts(r, cfg.VocabSize, 70, 33, 9), 24, 2e-2) })
			kv := kvFormatBackend(b)
			ckv := build(t, cfg, &testWeights{be: kv, seed: seed}, kv)
			checkF32Products(t, b, g, ckv, prompts(r, cfg.VocabSize, 70, 33, 9), 24, 2e-2)
		})
	}
}
