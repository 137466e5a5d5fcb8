// Package testmodel builds, at test time, a tiny random-weight Qwen3 model
// directory that the real engine can load: config.json, generation_config.json,
// model.safetensors (BF16, Hub tensor names) and the real Qwen3 tokenizer files
// copied from the repository's tests/testdata/qwen3-tokenizer.
//
// The weights are deterministic (a fixed PCG seed) so that greedy outputs are
// stable across runs. The model is untied: the lm_head rows of the added
// tokens (ids ≥ 151643: <|im_end|>, <think>, <tool_call> …) are zero so that
// their logits sit at 0 while ordinary tokens spread around it; sampling with
// the checkpoint's top_k never picks them and greedy practically never does.
// Random output is therefore plain text that neither stops early nor opens a
// think block or tool call, which keeps API tests on this model predictable.
package testmodel

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
)

// Shape of the model. Vocab is the real Qwen3 tokenizer's size (151,643 BPE
// tokens + 26 added tokens).
const (
	Vocab        = 151669
	Hidden       = 32
	Layers       = 2
	Heads        = 2
	KVHeads      = 1
	HeadDim      = 16
	Intermediate = 64
	MaxPositions = 4096

	// FirstAdded is the id of <|endoftext|>, the first added token.
	FirstAdded = 151643
	// IMEnd is <|im_end|>, the eos token of the chat template.
	IMEnd = 151645
)

// Options change what Build writes.
type Options struct {
	// Seed of the weights (0 = the default seed 1).
	Seed uint64
	// AllowSpecial keeps random lm_head rows for added tokens, so the model
	// may emit <|im_end|>, <think>, <tool_call> … like any other token.
	AllowSpecial bool
	// ChatTemplate replaces the tokenizer_config.json template when set
	// (written as chat_template.jinja, which the engine prefers).
	ChatTemplate string
}

// RepoRoot finds the module root (the directory holding go.mod) above the
// current working directory; tests run in their package directory.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("testmodel: go.mod not found above the working directory")
		}
		dir = parent
	}
}

// TokenizerDir is the vendored real Qwen3 tokenizer.
func TokenizerDir() (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "tests", "testdata", "qwen3-tokenizer"), nil
}

// Build writes the model into dir (created if needed).
func Build(dir string, opt Options) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tokDir, err := TokenizerDir()
	if err != nil {
		return err
	}
	for _, f := range []string{"tokenizer.json", "tokenizer_config.json"} {
		if err := copyFile(filepath.Join(tokDir, f), filepath.Join(dir, f)); err != nil {
			return fmt.Errorf("testmodel: %w", err)
		}
	}
	if opt.ChatTemplate != "" {
		if err := os.WriteFile(filepath.Join(dir, "chat_template.jinja"), []byte(opt.ChatTemplate), 0o644); err != nil {
			return err
		}
	}
	cfg := map[string]any{
		"architectures":           []string{"Qwen3ForCausalLM"},
		"model_type":              "qwen3",
		"vocab_size":              Vocab,
		"hidden_size":             Hidden,
		"intermediate_size":       Intermediate,
		"num_hidden_layers":       Layers,
		"num_attention_heads":     Heads,
		"num_key_value_heads":     KVHeads,
		"head_dim":                HeadDim,
		"hidden_act":              "silu",
		"rms_norm_eps":            1e-6,
		"rope_theta":              1000000.0,
		"max_position_embeddings": MaxPositions,
		"tie_word_embeddings":     false,
		"attention_bias":          false,
		"torch_dtype":             "bfloat16",
		"bos_token_id":            FirstAdded,
		"eos_token_id":            IMEnd,
	}
	gen := map[string]any{
		"eos_token_id": []int{IMEnd, FirstAdded},
		"temperature":  0.7, "top_p": 0.8, "top_k": 20, "do_sample": true,
	}
	for name, v := range map[string]any{"config.json": cfg, "generation_config.json": gen} {
		b, _ := json.MarshalIndent(v, "", "  ")
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return err
		}
	}
	return writeWeights(filepath.Join(dir, "model.safetensors"), opt)
}

var (
	shared     sync.Map // Options → *sharedDir
	sharedRoot string
	sharedMu   sync.Mutex
)

type sharedDir struct {
	once sync.Once
	dir  string
	err  error
}

// Dir returns a model directory built once per test binary for these
// options (the directory lives until the process exits: call Cleanup from
// TestMain to remove it).
func Dir(tb testing.TB, opt Options) string {
	tb.Helper()
	v, _ := shared.LoadOrStore(opt, &sharedDir{})
	s := v.(*sharedDir)
	s.once.Do(func() {
		sharedMu.Lock()
		if sharedRoot == "" {
			sharedRoot, s.err = os.MkdirTemp("", "infernix-testmodel-")
		}
		root := sharedRoot
		sharedMu.Unlock()
		if s.err != nil {
			return
		}
		s.dir, s.err = os.MkdirTemp(root, "model-")
		if s.err == nil {
			s.err = Build(s.dir, opt)
		}
	})
	if s.err != nil {
		tb.Fatalf("building the test model: %v", s.err)
	}
	return s.dir
}

// Cleanup removes the directories made by Dir.
func Cleanup() {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if sharedRoot != "" {
		os.RemoveAll(sharedRoot)
		sharedRoot = ""
	}
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

type tensorSpec struct {
	name  string
	shape []int
	std   float64 // 0: a norm weight (1 + small noise)
}

func specs() []tensorSpec {
	H, hd := Hidden, HeadDim
	s := []tensorSpec{
		{"model.embed_tokens.weight", []int{Vocab, H}, 1},
		{"model.norm.weight", []int{H}, 0},
		{"lm_head.weight", []int{Vocab, H}, 0.5},
	}
	for i := 0; i < Layers; i++ {
		p := fmt.Sprintf("model.layers.%d.", i)
		s = append(s,
			tensorSpec{p + "input_layernorm.weight", []int{H}, 0},
			tensorSpec{p + "post_attention_layernorm.weight", []int{H}, 0},
			tensorSpec{p + "self_attn.q_proj.weight", []int{Heads * hd, H}, 0.2},
			tensorSpec{p + "self_attn.k_proj.weight", []int{KVHeads * hd, H}, 0.2},
			tensorSpec{p + "self_attn.v_proj.weight", []int{KVHeads * hd, H}, 0.2},
			tensorSpec{p + "self_attn.o_proj.weight", []int{H, Heads * hd}, 0.2},
			tensorSpec{p + "self_attn.q_norm.weight", []int{hd}, 0},
			tensorSpec{p + "self_attn.k_norm.weight", []int{hd}, 0},
			tensorSpec{p + "mlp.gate_proj.weight", []int{Intermediate, H}, 0.2},
			tensorSpec{p + "mlp.up_proj.weight", []int{Intermediate, H}, 0.2},
			tensorSpec{p + "mlp.down_proj.weight", []int{H, Intermediate}, 0.2},
		)
	}
	return s
}

// writeWeights writes a safetensors file: an 8-byte little-endian header
// length, the JSON header (names → dtype, shape, data_offsets), then the data.
func writeWeights(path string, opt Options) error {
	seed := opt.Seed
	if seed == 0 {
		seed = 1
	}
	ts := specs()
	sort.Slice(ts, func(i, j int) bool { return ts[i].name < ts[j].name })
	type entry struct {
		DType       string   `json:"dtype"`
		Shape       []int    `json:"shape"`
		DataOffsets [2]int64 `json:"data_offsets"`
	}
	header := map[string]any{"__metadata__": map[string]string{"format": "pt"}}
	var off int64
	for _, t := range ts {
		n := int64(2)
		for _, d := range t.shape {
			n *= int64(d)
		}
		header[t.name] = entry{"BF16", t.shape, [2]int64{off, off + n}}
		off += n
	}
	hb, err := json.Marshal(header)
	if err != nil {
		return err
	}
	for len(hb)%8 != 0 { // data starts 8-aligned, as the Python writer does
		hb = append(hb, ' ')
	}
	data := make([]byte, 8+len(hb)+int(off))
	binary.LittleEndian.PutUint64(data, uint64(len(hb)))
	copy(data[8:], hb)
	p := data[8+len(hb):]
	r := rand.New(rand.NewPCG(seed, 0x1f2e3d4c))
	for _, t := range ts {
		n := 1
		for _, d := range t.shape {
			n *= d
		}
		for i := 0; i < n; i++ {
			v := 1 + 0.1*r.NormFloat64()
			if t.std > 0 {
				v = t.std * r.NormFloat64()
			}
			if t.name == "lm_head.weight" && !opt.AllowSpecial && i/Hidden >= FirstAdded {
				v = 0
			}
			binary.LittleEndian.PutUint16(p, bf16(float32(v)))
			p = p[2:]
		}
	}
	return os.WriteFile(path, data, 0o644)
}

// bf16 rounds to nearest even.
func bf16(f float32) uint16 {
	b := math.Float32bits(f)
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}
