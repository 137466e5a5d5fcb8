package qwen3next

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/infernix/infernix/engine/backend/cpu"
	"github.com/infernix/infernix/engine/model"
	"github.com/infernix/infernix/engine/safetensors"
)

// TestMTPLoaded: the fixtures' `mtp.*` tensors are kept, nothing else is left.
func TestMTPLoaded(t *testing.T) {
	for _, name := range hybridModels {
		m := loadModel(t, name, model.Options{KVBlocks: 4, MaxBatchTokens: 16})
		set, err := safetensors.OpenDir(filepath.Join(fixtures, "models", name))
		if err != nil {
			t.Fatal(err)
		}
		want := 0
		for _, n := range set.Names() {
			if strings.HasPrefix(n, "mtp.") {
				want++
			}
		}
		set.Close()
		if want == 0 || len(m.MTP()) != want {
			t.Errorf("%s: %d MTP tensors kept, checkpoint has %d", name, len(m.MTP()), want)
		}
		if m.Multimodal() || m.CheckImages(1) == nil || m.CheckImages(0) != nil {
			t.Errorf("%s: text-only model's image handling is wrong", name)
		}
	}
}

// TestMultimodalCheckpoint rewrites qwen35-tiny as a Qwen3_5ForConditionalGeneration
// checkpoint (text config nested, decoder under model.language_model., a
// vision tensor) and checks it loads to the same logits and refuses images.
func TestMultimodalCheckpoint(t *testing.T) {
	src := filepath.Join(fixtures, "models", "qwen35-tiny")
	dir := t.TempDir()
	text, err := os.ReadFile(filepath.Join(src, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var tc map[string]any
	if err := json.Unmarshal(text, &tc); err != nil {
		t.Fatal(err)
	}
	delete(tc, "architectures")
	top := map[string]any{
		"architectures":       []string{"Qwen3_5ForConditionalGeneration"},
		"model_type":          "qwen3_5",
		"text_config":         tc,
		"tie_word_embeddings": tc["tie_word_embeddings"],
		"vision_config":       map[string]any{"depth": 1, "hidden_size": 8},
		"image_token_id":      5,
	}
	data, _ := json.Marshal(top)
	if err := os.WriteFile(filepath.Join(dir, "config.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	set, err := safetensors.OpenDir(src)
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	var out []safetensors.WriteTensor
	for _, n := range set.Names() {
		st := set.Get(n)
		name := n
		if rest, ok := strings.CutPrefix(n, "model."); ok {
			name = "model.language_model." + rest
		}
		out = append(out, safetensors.WriteTensor{Name: name, DType: st.DType, Shape: st.Shape, Data: st.Data})
	}
	out = append(out, safetensors.WriteTensor{Name: "model.visual.patch_embed.proj.weight", DType: safetensors.F32, Shape: []int{2}, Data: make([]byte, 8)})
	if err := safetensors.WriteFile(filepath.Join(dir, "model.safetensors"), out, nil); err != nil {
		t.Fatal(err)
	}
	mm := loadModel(t, dir, model.Options{KVBlocks: 4, MaxBatchTokens: 64})
	if !mm.Multimodal() || mm.Config().HiddenSize != 64 {
		t.Fatalf("multimodal=%v hidden=%d", mm.Multimodal(), mm.Config().HiddenSize)
	}
	if err := mm.CheckImages(2); err == nil || !strings.Contains(err.Error(), "not supported yet") {
		t.Errorf("CheckImages: %v", err)
	}
	plain := loadModel(t, "qwen35-tiny", model.Options{KVBlocks: 4, MaxBatchTokens: 64})
	toks := loadRef(t, "qwen35-tiny").Prompts[0].Tokens
	a := (&seq{m: mm, blocks: []int32{0}}).run(t, toks, 0)
	b := (&seq{m: plain, blocks: []int32{0}}).run(t, toks, 0)
	if d := maxAbsDiff(a, b); d != 0 {
		t.Errorf("multimodal checkpoint's logits differ by %.2e", d)
	}
}

// TestSyntheticQwen35 builds a Qwen3.5-shaped model from synthetic weights
// (the benchmark path) and runs a prefill and a decode step.
func TestSyntheticQwen35(t *testing.T) {
	m := syntheticModel(t, "Qwen3_5MoeForCausalLM", 4)
	s := &seq{m: m, blocks: []int32{0, 1}}
	toks := make([]int32, 70)
	for i := range toks {
		toks[i] = int32(i * 7 % 1000)
	}
	s.run(t, toks, 0)
	s.run(t, []int32{3}, 70)
}

// syntheticModel is a small Qwen3.5-family config with synthetic weights.
func syntheticModel(t testing.TB, arch string, layers int) *Model {
	t.Helper()
	types := make([]string, layers)
	for i := range types {
		types[i] = "linear_attention"
		if i%4 == 3 {
			types[i] = "full_attention"
		}
	}
	cfgJSON, _ := json.Marshal(map[string]any{
		"architectures": []string{arch}, "vocab_size": 1024, "hidden_size": 256, "intermediate_size": 512,
		"num_hidden_layers": layers, "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 64,
		"layer_types": types, "linear_num_key_heads": 4, "linear_num_value_heads": 8,
		"linear_key_head_dim": 32, "linear_value_head_dim": 32, "linear_conv_kernel_dim": 4,
		"num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 128,
		"shared_expert_intermediate_size": 128, "max_position_embeddings": 4096,
		"rope_parameters": map[string]any{"rope_type": "default", "rope_theta": 1e7, "partial_rotary_factor": 0.25},
	})
	cfg, err := model.ParseConfig(cfgJSON)
	if err != nil {
		t.Fatal(err)
	}
	be := cpu.New(0)
	mm, err := New(cfg, &model.SyntheticWeights{Be: be, Seed: 1}, be, model.Options{KVBlocks: 16, MaxBatchTokens: 256})
	if err != nil {
		t.Fatal(err)
	}
	return mm.(*Model)
}
