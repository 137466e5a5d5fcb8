// Package convert writes a Hugging Face Qwen3 / Qwen3-MoE checkpoint
// directory as one GGUF file, as llama.cpp's convert_hf_to_gguf.py and
// llama-quantize would: the config as GGUF metadata, the tokenizer's
// vocabulary, merges and token types, the chat template, and the weights
// under llama.cpp's tensor names in the asked type.
//
// Norm weights and other vectors stay F32 (as llama.cpp keeps them); a
// matrix whose rows are not whole blocks of the asked type is written F16.
// The quantizers are gguf.Quantize's round-to-nearest ones.
package convert

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/infernix/infernix/engine/backend"
	"github.com/infernix/infernix/engine/gguf"
	"github.com/infernix/infernix/engine/model"
	"github.com/infernix/infernix/engine/safetensors"
	"github.com/infernix/infernix/engine/tokenizer"
)

// ggufArch is the GGUF architecture of each supported model_type.
var ggufArch = map[string]string{"qwen3": "qwen3", "qwen3_moe": "qwen3moe"}

// fileType is general.file_type (llama_ftype) for a uniform file of a type.
var fileType = map[gguf.Type]uint32{
	gguf.F32: 0, gguf.F16: 1, gguf.Q4_0: 2, gguf.Q4_1: 3, gguf.Q8_0: 7, gguf.Q5_0: 8, gguf.Q5_1: 9,
	gguf.Q2_K: 10, gguf.Q3_K: 12, gguf.Q4_K: 15, gguf.Q5_K: 17, gguf.Q6_K: 18, gguf.BF16: 32,
}

// Options say how to write a checkpoint.
type Options struct {
	Type gguf.Type // the matrices' type

	// EmbeddingProbe writes a test model instead of the checkpoint: every
	// layer matrix zero (F32), so that each layer passes its input through,
	// and the output head an F32 copy of the embedding. Its logits are then a
	// function of one embedding row alone, read in Type: a check of a
	// reader's dequantisation against llama.cpp's without the rounding
	// llama.cpp applies to activations in quantized products.
	EmbeddingProbe bool
}

// Write converts the checkpoint in dir into the GGUF file out, reading
// and converting one tensor at a time.
func Write(dir, out string, opt Options) error {
	w, set, err := build(dir, opt)
	if err != nil {
		return err
	}
	defer set.Close()
	return w.WriteFile(out)
}

// Encode returns the GGUF image of the checkpoint in dir.
func Encode(dir string, opt Options) ([]byte, error) {
	w, set, err := build(dir, opt)
	if err != nil {
		return nil, err
	}
	defer set.Close()
	return w.Bytes()
}

// build returns the writer, whose tensors read set when written.
func build(dir string, opt Options) (*gguf.Writer, *safetensors.Set, error) {
	t := opt.Type
	if !t.Supported() {
		return nil, nil, fmt.Errorf("type %s is not supported (supported: %s)", t, gguf.SupportedTypes())
	}
	cfg, err := model.LoadConfig(dir)
	if err != nil {
		return nil, nil, err
	}
	arch, ok := ggufArch[cfg.ModelType]
	if !ok {
		return nil, nil, fmt.Errorf("model_type %q cannot be written as GGUF (supported: qwen3, qwen3_moe)", cfg.ModelType)
	}
	set, err := safetensors.OpenDir(dir)
	if err != nil {
		return nil, nil, err
	}
	w := &gguf.Writer{}
	w.String("general.architecture", arch)
	w.String("general.name", filepath.Base(filepath.Clean(dir)))
	w.Uint32("general.file_type", fileType[t])
	w.Uint32("general.quantization_version", 2)
	writeConfig(w, arch, cfg)
	err = writeTokenizer(w, dir, cfg)
	if err == nil {
		err = writeTensors(w, set, opt)
	}
	if err != nil {
		set.Close()
		return nil, nil, err
	}
	return w, set, nil
}

func writeConfig(w *gguf.Writer, arch string, cfg *model.Config) {
	k := func(s string) string { return arch + "." + s }
	w.Uint32(k("context_length"), uint32(cfg.MaxPositionEmbeddings))
	w.Uint32(k("embedding_length"), uint32(cfg.HiddenSize))
	w.Uint32(k("block_count"), uint32(cfg.NumHiddenLayers))
	w.Uint32(k("feed_forward_length"), uint32(cfg.IntermediateSize))
	w.Uint32(k("attention.head_count"), uint32(cfg.NumAttentionHeads))
	w.Uint32(k("attention.head_count_kv"), uint32(cfg.NumKeyValueHeads))
	w.Uint32(k("attention.key_length"), uint32(cfg.HeadDim))
	w.Uint32(k("attention.value_length"), uint32(cfg.HeadDim))
	w.Float32(k("rope.freq_base"), float32(cfg.Theta()))
	w.Float32(k("attention.layer_norm_rms_epsilon"), float32(cfg.RMSNormEps))
	if r := cfg.Rope(); r != nil && r.Kind() != "default" {
		w.String(k("rope.scaling.type"), r.Kind())
		w.Float32(k("rope.scaling.factor"), float32(r.Factor))
		if r.OriginalMaxPositionEmbeddings > 0 {
			w.Uint32(k("rope.scaling.original_context_length"), uint32(r.OriginalMaxPositionEmbeddings))
		}
	}
	if cfg.NumExperts > 0 {
		w.Uint32(k("expert_count"), uint32(cfg.NumExperts))
		w.Uint32(k("expert_used_count"), uint32(cfg.NumExpertsPerTok))
		w.Uint32(k("expert_feed_forward_length"), uint32(cfg.MoeIntermediateSize))
		w.Bool(k("expert_weights_norm"), cfg.NormTopkProb)
	}
}

// writeTokenizer stores tokenizer.json's vocabulary as llama.cpp does for
// Qwen: every id up to vocab_size (unfilled ones as [PADn], unused),
// added tokens as control (special) or user-defined tokens.
// A checkpoint without tokenizer.json gets no tokenizer keys: Infernix
// loads such a file for token-id work, llama.cpp does not.
func writeTokenizer(w *gguf.Writer, dir string, cfg *model.Config) error {
	raw, err := os.ReadFile(filepath.Join(dir, "tokenizer.json"))
	if os.IsNotExist(err) {
		if len(cfg.EOSTokenID) > 0 {
			w.Uint32("tokenizer.ggml.eos_token_id", uint32(cfg.EOSTokenID[0]))
		}
		return nil
	}
	if err != nil {
		return err
	}
	var tj struct {
		Model struct {
			Type   string          `json:"type"`
			Vocab  map[string]int  `json:"vocab"`
			Merges json.RawMessage `json:"merges"`
		} `json:"model"`
		AddedTokens []struct {
			ID      int    `json:"id"`
			Content string `json:"content"`
			Special bool   `json:"special"`
		} `json:"added_tokens"`
	}
	if err := json.Unmarshal(raw, &tj); err != nil {
		return fmt.Errorf("tokenizer.json: %v", err)
	}
	if tj.Model.Type != "BPE" {
		return fmt.Errorf("tokenizer.json: model type %q cannot be written as GGUF (only BPE)", tj.Model.Type)
	}
	if _, err := tokenizer.Parse(raw); err != nil { // the split it uses must be Qwen's
		return err
	}
	n := cfg.VocabSize
	for _, id := range tj.Model.Vocab {
		n = max(n, id+1)
	}
	tokens := make([]string, n)
	kinds := make([]int32, n)
	for s, id := range tj.Model.Vocab {
		tokens[id], kinds[id] = s, gguf.TokenNormal
	}
	for _, a := range tj.AddedTokens {
		if a.ID < 0 || a.ID >= n {
			return fmt.Errorf("tokenizer.json: added token %q has id %d outside the vocabulary of %d", a.Content, a.ID, n)
		}
		tokens[a.ID], kinds[a.ID] = a.Content, gguf.TokenUserDefined
		if a.Special {
			kinds[a.ID] = gguf.TokenControl
		}
	}
	for id := range tokens {
		if kinds[id] == 0 {
			tokens[id], kinds[id] = fmt.Sprintf("[PAD%d]", id), gguf.TokenUnused
		}
	}
	var merges []string
	var asPairs [][2]string
	if err := json.Unmarshal(tj.Model.Merges, &asPairs); err == nil {
		for _, p := range asPairs {
			merges = append(merges, p[0]+" "+p[1])
		}
	} else if err := json.Unmarshal(tj.Model.Merges, &merges); err != nil {
		return fmt.Errorf("tokenizer.json: merges: %v", err)
	}
	w.String("tokenizer.ggml.model", "gpt2")
	w.String("tokenizer.ggml.pre", gguf.QwenPreTokenizer)
	w.Strings("tokenizer.ggml.tokens", tokens)
	w.Int32s("tokenizer.ggml.token_type", kinds)
	w.Strings("tokenizer.ggml.merges", merges)
	var tc *tokenizer.Config
	if _, err := os.Stat(filepath.Join(dir, "tokenizer_config.json")); err == nil {
		if tc, err = tokenizer.LoadConfig(dir); err != nil {
			return err
		}
	}
	id := func(s string) (int, bool) {
		for i, t := range tokens {
			if s != "" && t == s {
				return i, true
			}
		}
		return 0, false
	}
	if len(cfg.EOSTokenID) > 0 {
		w.Uint32("tokenizer.ggml.eos_token_id", uint32(cfg.EOSTokenID[0]))
	} else if tc != nil {
		if i, ok := id(tc.EOSToken); ok {
			w.Uint32("tokenizer.ggml.eos_token_id", uint32(i))
		}
	}
	if tc != nil {
		if i, ok := id(tc.PadToken); ok {
			w.Uint32("tokenizer.ggml.padding_token_id", uint32(i))
		}
		if i, ok := id(tc.BOSToken); ok {
			w.Uint32("tokenizer.ggml.bos_token_id", uint32(i))
		}
		w.Bool("tokenizer.ggml.add_bos_token", tc.AddBOSToken)
		if tc.ChatTemplate != "" {
			w.String("tokenizer.chat_template", tc.ChatTemplate)
		}
	}
	return nil
}

// writeTensors writes every tensor the architecture reads, experts
// stacked as llama.cpp stores them.
func writeTensors(w *gguf.Writer, set *safetensors.Set, opt Options) error {
	t := opt.Type
	type stack struct {
		name    string
		experts map[int]*safetensors.Tensor
	}
	stacks := map[string]*stack{}
	names := set.Names()
	sort.Strings(names)
	var order []string // GGUF names in first-seen order
	plain := map[string]*safetensors.Tensor{}
	for _, n := range names {
		g, expert, ok := model.GGUFName(n)
		if !ok {
			return fmt.Errorf("tensor %q has no GGUF name", n)
		}
		if expert < 0 {
			plain[g] = set.Get(n)
			order = append(order, g)
			continue
		}
		s := stacks[g]
		if s == nil {
			s = &stack{name: g, experts: map[int]*safetensors.Tensor{}}
			stacks[g] = s
			order = append(order, g)
		}
		s.experts[expert] = set.Get(n)
	}
	if _, ok := plain["output.weight"]; opt.EmbeddingProbe && !ok {
		plain["output.weight"] = plain["token_embd.weight"]
		order = append(order, "output.weight")
	}
	sort.SliceStable(order, func(i, j int) bool { return tensorRank(order[i]) < tensorRank(order[j]) })
	for _, g := range order {
		var shape []int
		var parts []*safetensors.Tensor
		if st := plain[g]; st != nil {
			shape, parts = st.Shape, []*safetensors.Tensor{st}
		} else {
			s := stacks[g]
			for e := 0; e < len(s.experts); e++ {
				st := s.experts[e]
				if st == nil {
					return fmt.Errorf("GGUF %s: expert %d of %d is missing", g, e, len(s.experts))
				}
				parts = append(parts, st)
			}
			shape = append([]int{len(parts)}, parts[0].Shape...)
		}
		dims := make([]int, len(shape))
		for i, d := range shape {
			dims[len(shape)-1-i] = d
		}
		tt := t
		zero := false
		switch {
		case len(dims) == 1 || strings.HasSuffix(g, "ffn_gate_inp.weight"): // llama.cpp keeps routers unquantized
			tt = gguf.F32
		case opt.EmbeddingProbe && g != "token_embd.weight":
			tt, zero = gguf.F32, strings.HasPrefix(g, "blk.")
		case dims[0]%t.BlockSize() != 0:
			tt = gguf.F16
		}
		w.TensorFunc(g, dims, tt, func() ([]byte, error) {
			var vals []float32
			for _, st := range parts {
				if !slices.Equal(st.Shape, parts[0].Shape) {
					return nil, fmt.Errorf("GGUF %s: experts of shapes %v and %v", g, parts[0].Shape, st.Shape)
				}
				v, err := floats(st)
				if err != nil {
					return nil, err
				}
				if len(parts) == 1 {
					vals = v
				} else {
					vals = append(vals, v...)
				}
			}
			if zero {
				clear(vals)
			}
			b, err := quantize(tt, vals, dims[0])
			if err != nil {
				return nil, fmt.Errorf("GGUF %s: %w", g, err)
			}
			return b, nil
		})
	}
	return nil
}

// quantize is gguf.Quantize over rows of rowLen values, in parallel
// chunks of whole rows.
func quantize(t gguf.Type, vals []float32, rowLen int) ([]byte, error) {
	rows := len(vals) / rowLen
	per := max(1, (1<<20)/rowLen) // rows a chunk
	out := make([]byte, t.RowBytes(len(vals)))
	rb := t.RowBytes(rowLen)
	var wg sync.WaitGroup
	errs := make([]error, (rows+per-1)/per)
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	for c := range errs {
		lo, hi := c*per, min((c+1)*per, rows)
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			errs[c] = gguf.QuantizeInto(t, vals[lo*rowLen:hi*rowLen], out[lo*rb:hi*rb])
		}()
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// tensorRank orders tensors as llama.cpp's converter does: embedding,
// layers in order, output norm, output.
func tensorRank(g string) int {
	switch g {
	case "token_embd.weight":
		return -1
	case "output_norm.weight":
		return 1 << 30
	case "output.weight":
		return 1<<30 + 1
	}
	var layer int
	fmt.Sscanf(g, "blk.%d.", &layer)
	return layer
}

// floats reads a safetensors tensor as float32.
func floats(t *safetensors.Tensor) ([]float32, error) {
	n := t.Elems()
	out := make([]float32, n)
	d := t.Data
	switch t.DType {
	case safetensors.F32:
		for i := range out {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(d[4*i:]))
		}
	case safetensors.F16:
		for i := range out {
			out[i] = backend.HalfToFloat32(binary.LittleEndian.Uint16(d[2*i:]))
		}
	case safetensors.BF16:
		for i := range out {
			out[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(d[2*i:])) << 16)
		}
	default:
		return nil, fmt.Errorf("tensor %q: dtype %s cannot be converted (F32, F16, BF16)", t.Name, t.DType)
	}
	return out, nil
}
