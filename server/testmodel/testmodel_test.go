package testmodel

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/infernix/infernix/engine/model"
	"github.com/infernix/infernix/engine/safetensors"
)

// TestBuild: the directory loads with the engine's own readers, has the
// shapes a Qwen3 model needs, and is byte-for-byte deterministic.
func TestBuild(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	if err := Build(a, Options{}); err != nil {
		t.Fatal(err)
	}
	if err := Build(b, Options{}); err != nil {
		t.Fatal(err)
	}
	wa, _ := os.ReadFile(filepath.Join(a, "model.safetensors"))
	wb, _ := os.ReadFile(filepath.Join(b, "model.safetensors"))
	if !bytes.Equal(wa, wb) {
		t.Error("two builds differ")
	}
	cfg, err := model.LoadConfig(a)
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil || cfg.VocabSize != Vocab || cfg.Arch() != "Qwen3ForCausalLM" {
		t.Fatalf("config: %v %+v", err, cfg)
	}
	set, err := safetensors.OpenDir(a)
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	lm := set.Get("lm_head.weight")
	if lm == nil || lm.DType != safetensors.BF16 || lm.Shape[0] != Vocab || lm.Shape[1] != Hidden {
		t.Fatalf("lm_head: %+v", lm)
	}
	// The added tokens' rows are zero, the others are not.
	row := func(id int) []byte { return lm.Data[id*Hidden*2 : (id+1)*Hidden*2] }
	if !bytes.Equal(row(IMEnd), make([]byte, Hidden*2)) || bytes.Equal(row(100), make([]byte, Hidden*2)) {
		t.Error("lm_head rows of added tokens must be zero, others random")
	}
	for _, f := range []string{"tokenizer.json", "tokenizer_config.json", "generation_config.json"} {
		if _, err := os.Stat(filepath.Join(a, f)); err != nil {
			t.Error(err)
		}
	}
}
