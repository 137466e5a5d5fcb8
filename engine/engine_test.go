package engine

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const testdata = "../tests/testdata"

func TestLoad(t *testing.T) {
	e, err := Load(filepath.Join(testdata, "models", "demo"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if e.Tokenizer == nil || e.Template == nil || e.Config.Arch() != "Qwen3ForCausalLM" || e.WeightBytes == 0 {
		t.Fatalf("incomplete engine: %+v", e)
	}
	stops := e.StopTokens()
	imEnd, _ := e.Tokenizer.TokenID("<|im_end|>")
	if len(stops) == 0 || stops[0] != imEnd {
		t.Fatalf("stop tokens %v, want <|im_end|> (%d) first", stops, imEnd)
	}
	if e.EOS() != "<|im_end|>" {
		t.Fatalf("EOS %q", e.EOS())
	}
	// A fixture model has no tokenizer: it loads, without text support.
	f, err := Load(filepath.Join(testdata, "models", "qwen3-tied-f32"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Tokenizer != nil || f.Template != nil {
		t.Fatal("fixture model should have no tokenizer or template")
	}
}

func TestLoadErrors(t *testing.T) {
	empty := t.TempDir()
	notDir := filepath.Join(empty, "file")
	os.WriteFile(notDir, []byte("x"), 0o644)
	hybrid := t.TempDir()
	os.WriteFile(filepath.Join(hybrid, "config.json"), []byte(`{"architectures":["MistralForCausalLM"]}`), 0o644)
	cases := []struct {
		dir  string
		opt  Options
		want string
	}{
		{"/does/not/exist", Options{}, "model directory"},
		{notDir, Options{}, "not a directory"},
		{empty, Options{}, "config.json"},
		{hybrid, Options{}, `"MistralForCausalLM" is not supported`},
		{filepath.Join(testdata, "models", "demo"), Options{Device: "tpu"}, `--device "tpu"`},
		{filepath.Join(testdata, "models", "demo"), Options{ChatTemplate: "/no/such.jinja"}, "--chat-template"},
	}
	for _, c := range cases {
		e, err := Load(c.dir, c.opt)
		if err == nil {
			e.Close()
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Load(%s): %v, want %q", c.dir, err, c.want)
		}
	}
}

// DecodeBytes leaves out what a one-lane decode step does not read: all but
// one row of an untied embedding table and the routed experts past top-k.
func TestDecodeBytes(t *testing.T) {
	for _, tc := range []struct {
		model  string
		unread int64
	}{
		{"qwen3-tied-f32", 0},
		{"qwen3-untied-bf16", 999 * 96 * 2},             // vocab 1000 × hidden 96, bf16
		{"qwen3moe-bf16", 511*64*2 + 2*(8-2)*3*48*64*2}, // 2 layers, 8 experts, top 2, 48 × 64 each
	} {
		e, err := Load(filepath.Join(testdata, "models", tc.model), Options{})
		if err != nil {
			t.Fatal(err)
		}
		if e.WeightBytes <= tc.unread || e.DecodeBytes != e.WeightBytes-tc.unread {
			t.Errorf("%s: %d of %d bytes read a decode step, want %d unread", tc.model, e.DecodeBytes, e.WeightBytes, tc.unread)
		}
		e.Close()
	}
}
