package qwen3

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

// writeTiny writes a small Qwen3 checkpoint, letting edit change the tensor
// list before writing.
func writeTiny(t *testing.T, edit func([]safetensors.WriteTensor) []safetensors.WriteTensor) string {
	t.Helper()
	dir := t.TempDir()
	cfg := map[string]any{"architectures": []string{"Qwen3ForCausalLM"}, "vocab_size": 11, "hidden_size": 8,
		"intermediate_size": 12, "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1,
		"head_dim": 4, "tie_word_embeddings": true, "max_position_embeddings": 64}
	b, _ := json.Marshal(cfg)
	os.WriteFile(filepath.Join(dir, "config.json"), b, 0o644)
	shapes := map[string][]int{
		"model.embed_tokens.weight": {11, 8}, "model.norm.weight": {8},
		"model.layers.0.input_layernorm.weight": {8}, "model.layers.0.post_attention_layernorm.weight": {8},
		"model.layers.0.self_attn.q_proj.weight": {8, 8}, "model.layers.0.self_attn.k_proj.weight": {4, 8},
		"model.layers.0.self_attn.v_proj.weight": {4, 8}, "model.layers.0.self_attn.o_proj.weight": {8, 8},
		"model.layers.0.self_attn.q_norm.weight": {4}, "model.layers.0.self_attn.k_norm.weight": {4},
		"model.layers.0.mlp.gate_proj.weight": {12, 8}, "model.layers.0.mlp.up_proj.weight": {12, 8},
		"model.layers.0.mlp.down_proj.weight": {8, 12},
	}
	var ts []safetensors.WriteTensor
	for name, shape := range shapes {
		n := 2
		for _, d := range shape {
			n *= d
		}
		data := make([]byte, n)
		for i := 1; i < n; i += 2 {
			data[i] = 0x3c // small bf16 values
		}
		ts = append(ts, safetensors.WriteTensor{Name: name, DType: safetensors.BF16, Shape: shape, Data: data})
	}
	if edit != nil {
		ts = edit(ts)
	}
	if err := safetensors.WriteFile(filepath.Join(dir, "model.safetensors"), ts, nil); err != nil {
		t.Fatal(err)
	}
	return dir
}

func build(dir string) error {
	cfg, err := model.LoadConfig(dir)
	if err != nil {
		return err
	}
	b, err := model.Lookup(cfg.Arch())
	if err != nil {
		return err
	}
	set, err := safetensors.OpenDir(dir)
	if err != nil {
		return err
	}
	defer set.Close()
	be := cpu.New(1)
	_, err = b(cfg, &model.FileWeights{Set: set, Be: be}, be, model.Options{KVBlocks: 1, MaxBatchTokens: 8})
	return err
}

func TestLoadErrors(t *testing.T) {
	drop := func(name string) func([]safetensors.WriteTensor) []safetensors.WriteTensor {
		return func(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
			out := ts[:0]
			for _, x := range ts {
				if x.Name != name {
					out = append(out, x)
				}
			}
			return out
		}
	}
	reshape := func(name string) func([]safetensors.WriteTensor) []safetensors.WriteTensor {
		return func(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
			for i := range ts {
				if ts[i].Name == name {
					ts[i].Shape = []int{ts[i].Shape[1], ts[i].Shape[0]}
				}
			}
			return ts
		}
	}
	f32 := func(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
		for i := range ts {
			if ts[i].Name == "model.norm.weight" {
				ts[i].DType, ts[i].Shape, ts[i].Data = safetensors.I8, []int{16}, make([]byte, 16)
			}
		}
		return ts
	}
	cases := []struct {
		name string
		edit func([]safetensors.WriteTensor) []safetensors.WriteTensor
		want string
	}{
		{"ok", nil, ""},
		{"missing tensor", drop("model.layers.0.self_attn.k_proj.weight"), `missing tensor "model.layers.0.self_attn.k_proj.weight" (expected shape [4 8])`},
		{"wrong shape", reshape("model.layers.0.mlp.down_proj.weight"), `tensor "model.layers.0.mlp.down_proj.weight" in model.safetensors has shape [12 8], expected [8 12]`},
		{"wrong dtype", f32, `has shape [16], expected [8]`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := build(writeTiny(t, c.edit))
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want %q", err, c.want)
			}
		})
	}
}

func TestUnsupportedArchitectureAndConfig(t *testing.T) {
	dir := writeTiny(t, nil)
	os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"architectures":["LlamaForCausalLM"]}`), 0o644)
	if err := build(dir); err == nil || !strings.Contains(err.Error(), `"LlamaForCausalLM" is not supported`) || !strings.Contains(err.Error(), "Qwen3ForCausalLM") {
		t.Fatalf("got %v", err)
	}
	os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"architectures":["Qwen3ForCausalLM"],"vocab_size":11,"hidden_size":8,"num_hidden_layers":1,"num_attention_heads":3,"num_key_value_heads":2,"intermediate_size":4}`), 0o644)
	if err := build(dir); err == nil || !strings.Contains(err.Error(), "multiple of num_key_value_heads") {
		t.Fatalf("got %v", err)
	}
	os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"architectures":`), 0o644)
	if err := build(dir); err == nil || !strings.Contains(err.Error(), "config.json") {
		t.Fatalf("got %v", err)
	}
}
