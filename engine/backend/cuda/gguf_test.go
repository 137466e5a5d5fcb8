package cuda

import (
	"path/filepath"
	"testing"

	"github.com/infernix/infernix/engine/backend"
	"github.com/infernix/infernix/engine/convert"
	"github.com/infernix/infernix/engine/gguf"
	"github.com/infernix/infernix/engine/model"
)

// bf16Weights gives a CPU reference backend the CUDA backend's 16-bit weight
// type, so that a GGUF file's quantized tensors expand to the same bf16
// values on both.
type bf16Weights struct{ backend.Backend }

func (bf16Weights) HalfDType() backend.DType { return backend.BF16 }

// TestGGUFFixtures loads GGUF conversions of the BF16 fixtures on the GPU,
// where every quantized or f16 tensor becomes bf16 (so that the decode and
// prefill products take their fast paths), and holds them with
// TestFixtures' bound to the CPU backend given the same bf16 weights (the
// file's quantization error is the file's, not the backend's) and to the
// CPU in the GPU's formats. The fixtures' rows of 200
// are not whole blocks: those tensors are f16 in the file.
func TestGGUFFixtures(t *testing.T) {
	b := gpu(t)
	r := newRand(t)
	for _, name := range []string{"qwen3-untied-bf16", "qwen3moe-bf16"} {
		for _, typ := range []gguf.Type{gguf.Q8_0, gguf.Q4_0, gguf.F16} {
			t.Run(name+"-"+typ.String(), func(t *testing.T) {
				path := filepath.Join(t.TempDir(), "m.gguf")
				if err := convert.Write(filepath.Join("../../../tests/testdata/models", name), path, convert.Options{Type: typ}); err != nil {
					t.Fatal(err)
				}
				f, err := gguf.Open(path)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				raw, err := model.GGUFConfig(f)
				if err != nil {
					t.Fatal(err)
				}
				cfg, err := model.ParseConfig(raw)
				if err != nil {
					t.Fatal(err)
				}
				gw := &model.GGUFWeights{File: f, Be: b}
				g := build(t, cfg, gw, b)
				for _, tn := range []string{"model.layers.0.self_attn.q_proj.weight", "model.embed_tokens.weight"} {
					if dt := gguf2dt(t, gw, tn); dt != backend.BF16 {
						t.Fatalf("%s on the GPU: %v, want BF16", tn, dt)
					}
				}
				c := build(t, cfg, &model.GGUFWeights{File: f, Be: bf16Weights{cpuBe}}, cpuBe)
				emu := &bf16Inputs{Backend: cpuBe, on: true, kv: kvRounder(b.kvDT)}
				cf := build(t, cfg, &model.GGUFWeights{File: f, Be: bf16Weights{emu}}, emu)
				checkModels(t, g, c, cf, prompts(r, cfg.VocabSize, 40, 17, 5), 16, 2e-2)
			})
		}
	}
}

// gguf2dt is the dtype the loader gives tensor name on its backend.
func gguf2dt(t *testing.T, w *model.GGUFWeights, name string) backend.DType {
	cfg := w.File.Tensor(mustGGUFName(t, name))
	shape := make([]int, len(cfg.Dims))
	for i, d := range cfg.Dims {
		shape[len(shape)-1-i] = d
	}
	x, err := w.Tensor(name, shape...)
	if err != nil {
		t.Fatal(err)
	}
	return x.DType()
}

func mustGGUFName(t *testing.T, name string) string {
	g, _, ok := model.GGUFName(name)
	if !ok {
		t.Fatalf("no GGUF name for %s", name)
	}
	return g
}
