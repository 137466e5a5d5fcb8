package model

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/infernix/infernix/engine/backend"
	"github.com/infernix/infernix/engine/gguf"
)

// ggufArchs maps a GGUF general.architecture to the Hugging Face class and
// model_type whose builder loads it.
var ggufArchs = map[string][2]string{
	"qwen3":    {"Qwen3ForCausalLM", "qwen3"},
	"qwen3moe": {"Qwen3MoeForCausalLM", "qwen3_moe"},
}

// GGUFConfig writes the config.json a GGUF file's metadata describes, as
// llama.cpp's converter read it from the original; the result goes through
// ParseConfig like a checkpoint's own.
func GGUFConfig(f *gguf.File) ([]byte, error) {
	archV, _ := f.Meta["general.architecture"].Str()
	names, ok := ggufArchs[archV]
	if !ok {
		return nil, fmt.Errorf("GGUF general.architecture %q is not supported (supported: qwen3, qwen3moe)", archV)
	}
	var err error
	num := func(key string, need bool) float64 {
		v, ok := f.Meta[archV+"."+key]
		x, isNum := v.Float()
		if !ok || !isNum {
			if need && err == nil {
				err = fmt.Errorf("GGUF metadata %s.%s is missing or not a number", archV, key)
			}
			return 0
		}
		return x
	}
	c := map[string]any{
		"architectures":           []string{names[0]},
		"model_type":              names[1],
		"hidden_size":             int(num("embedding_length", true)),
		"num_hidden_layers":       int(num("block_count", true)),
		"num_attention_heads":     int(num("attention.head_count", true)),
		"max_position_embeddings": int(num("context_length", true)),
		"hidden_act":              "silu",
		"torch_dtype":             "bfloat16",
	}
	if v := num("attention.head_count_kv", false); v > 0 {
		c["num_key_value_heads"] = int(v)
	}
	if v := num("attention.key_length", false); v > 0 {
		c["head_dim"] = int(v)
	}
	if v := num("attention.layer_norm_rms_epsilon", false); v > 0 {
		c["rms_norm_eps"] = shortest32(v)
	}
	if v := num("rope.freq_base", false); v > 0 {
		c["rope_theta"] = shortest32(v)
	}
	if kind, _ := f.Meta[archV+".rope.scaling.type"].Str(); kind != "" && kind != "none" {
		rs := map[string]any{"rope_type": kind, "factor": num("rope.scaling.factor", true)}
		if v := num("rope.scaling.original_context_length", false); v > 0 {
			rs["original_max_position_embeddings"] = int(v)
		}
		c["rope_scaling"] = rs
	}
	emb := f.Tensor("token_embd.weight")
	if emb == nil || len(emb.Dims) != 2 {
		return nil, fmt.Errorf("GGUF tensor token_embd.weight is missing or not 2-D")
	}
	c["vocab_size"] = emb.Dims[1]
	c["tie_word_embeddings"] = f.Tensor("output.weight") == nil
	if archV == "qwen3moe" {
		c["num_experts"] = int(num("expert_count", true))
		c["num_experts_per_tok"] = int(num("expert_used_count", true))
		c["moe_intermediate_size"] = int(num("expert_feed_forward_length", true))
		norm := true // Qwen3-MoE normalises its top-k weights unless told otherwise
		if b, ok := f.Meta[archV+".expert_weights_norm"].Bool(); ok {
			norm = b
		}
		c["norm_topk_prob"] = norm
		var dense []int
		for i := 0; i < int(num("block_count", true)); i++ {
			if f.Tensor(fmt.Sprintf("blk.%d.ffn_gate_inp.weight", i)) == nil {
				dense = append(dense, i)
			}
		}
		c["mlp_only_layers"] = dense
		if len(dense) > 0 {
			c["intermediate_size"] = int(num("feed_forward_length", true))
		}
	} else {
		c["intermediate_size"] = int(num("feed_forward_length", true))
	}
	for key, field := range map[string]string{"bos_token_id": "bos_token_id", "eos_token_id": "eos_token_id"} {
		if v, ok := f.Meta["tokenizer.ggml."+key].Int(); ok {
			c[field] = v
		}
	}
	if err != nil {
		return nil, err
	}
	return json.MarshalIndent(c, "", "  ")
}

// shortest32 is the float64 of the shortest decimal that rounds to v's
// float32: GGUF stores 1e-6 as a float32, the original config said 1e-6.
func shortest32(v float64) float64 {
	x, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'g', -1, 32), 64)
	return x
}

// GGUFGenerationConfig reads the sampling defaults some GGUF files carry
// (general.sampling.*); the zero value when they carry none.
func GGUFGenerationConfig(f *gguf.File) *GenerationConfig {
	g := &GenerationConfig{}
	if v, ok := f.Meta["general.sampling.temp"].Float(); ok {
		g.Temperature = &v
	}
	if v, ok := f.Meta["general.sampling.top_p"].Float(); ok {
		g.TopP = &v
	}
	if v, ok := f.Meta["general.sampling.top_k"].Int(); ok {
		k := int(v)
		g.TopK = &k
	}
	if v, ok := f.Meta["general.sampling.min_p"].Float(); ok {
		g.MinP = &v
	}
	if v, ok := f.Meta["tokenizer.ggml.eos_token_id"].Int(); ok {
		g.EOSTokenID = IntList{int(v)}
	}
	if v, ok := f.Meta["tokenizer.ggml.eot_token_id"].Int(); ok && (len(g.EOSTokenID) == 0 || int(v) != g.EOSTokenID[0]) {
		g.EOSTokenID = append(g.EOSTokenID, int(v))
	}
	return g
}

// GGUFWeights serves a GGUF file's tensors under the Hugging Face names the
// architectures ask for. Q8_0 tensors stay Q8_0 on a backend that
// multiplies them (backend.QuantizedWeights: the CPU backend); other
// quantized tensors, and Q8_0 elsewhere, are expanded at load to the
// backend's 16-bit type (backend.HalfWeights: BF16 on CUDA; else f16, or
// f32 where a value exceeds f16's range), taking the memory of a 16-bit
// original. F16 tensors become BF16 on a BF16 backend, whose fast products
// take no f16.
type GGUFWeights struct {
	File  *gguf.File
	Be    backend.Backend
	Bytes int64 // what the tensors served so far take on the backend
	used  map[string]bool
}

var (
	hfLayer  = regexp.MustCompile(`^model\.layers\.(\d+)\.(.+)$`)
	hfExpert = regexp.MustCompile(`^mlp\.experts\.(\d+)\.(gate_proj|up_proj|down_proj)\.weight$`)
)

var ggufTop = map[string]string{
	"model.embed_tokens.weight": "token_embd.weight",
	"model.norm.weight":         "output_norm.weight",
	"lm_head.weight":            "output.weight",
}

var ggufLayer = map[string]string{
	"input_layernorm.weight":          "attn_norm.weight",
	"post_attention_layernorm.weight": "ffn_norm.weight",
	"self_attn.q_proj.weight":         "attn_q.weight",
	"self_attn.k_proj.weight":         "attn_k.weight",
	"self_attn.v_proj.weight":         "attn_v.weight",
	"self_attn.o_proj.weight":         "attn_output.weight",
	"self_attn.q_proj.bias":           "attn_q.bias",
	"self_attn.k_proj.bias":           "attn_k.bias",
	"self_attn.v_proj.bias":           "attn_v.bias",
	"self_attn.q_norm.weight":         "attn_q_norm.weight",
	"self_attn.k_norm.weight":         "attn_k_norm.weight",
	"mlp.gate_proj.weight":            "ffn_gate.weight",
	"mlp.up_proj.weight":              "ffn_up.weight",
	"mlp.down_proj.weight":            "ffn_down.weight",
	"mlp.gate.weight":                 "ffn_gate_inp.weight",
}

var ggufExperts = map[string]string{"gate_proj": "ffn_gate_exps.weight", "up_proj": "ffn_up_exps.weight", "down_proj": "ffn_down_exps.weight"}

// GGUFName maps a Hugging Face tensor name to its GGUF tensor and, for one
// expert of a stacked expert tensor, the expert's index (else -1).
func GGUFName(name string) (string, int, bool) {
	if g, ok := ggufTop[name]; ok {
		return g, -1, true
	}
	m := hfLayer.FindStringSubmatch(name)
	if m == nil {
		return "", -1, false
	}
	if g, ok := ggufLayer[m[2]]; ok {
		return "blk." + m[1] + "." + g, -1, true
	}
	if e := hfExpert.FindStringSubmatch(m[2]); e != nil {
		idx, _ := strconv.Atoi(e[1])
		return "blk." + m[1] + "." + ggufExperts[e[2]], idx, true
	}
	return "", -1, false
}

func (w *GGUFWeights) Has(name string) bool {
	g, _, ok := GGUFName(name)
	return ok && w.File.Tensor(g) != nil
}

func (w *GGUFWeights) Tensor(name string, shape ...int) (backend.Tensor, error) {
	dt, data, err := w.tensorData(name, shape)
	if err != nil {
		return nil, err
	}
	w.Bytes += int64(len(data))
	return w.Be.Upload(name, dt, shape, data)
}

// tensorData finds name's GGUF tensor (or expert slice), checks its dims
// against shape and returns its bytes in the dtype the backend will hold.
func (w *GGUFWeights) tensorData(name string, shape []int) (backend.DType, []byte, error) {
	g, expert, ok := GGUFName(name)
	t := w.File.Tensor(g)
	if !ok || t == nil {
		return 0, nil, fmt.Errorf("missing tensor %q (GGUF %q, expected shape %v)", name, g, shape)
	}
	// GGUF dims run the other way: [in, out(, experts)].
	want := make([]int, len(shape))
	for i, d := range shape {
		want[len(shape)-1-i] = d
	}
	data, dims := t.Data, t.Dims
	if expert >= 0 {
		if len(dims) != len(want)+1 || expert >= dims[len(dims)-1] {
			return 0, nil, fmt.Errorf("GGUF tensor %q has dims %v: no expert %d of shape %v", g, dims, expert, want)
		}
		per := t.Type.RowBytes(t.Elements() / dims[len(dims)-1])
		data, dims = data[expert*per:(expert+1)*per], dims[:len(dims)-1]
	}
	if !slices.Equal(dims, want) {
		return 0, nil, fmt.Errorf("GGUF tensor %q has dims %v, expected %v (Hugging Face %s %v)", g, dims, want, name, shape)
	}
	if w.used == nil {
		w.used = map[string]bool{}
	}
	w.used[g] = true
	half := backend.F16
	if h, ok := w.Be.(backend.HalfWeights); ok {
		half = h.HalfDType()
	}
	switch t.Type {
	case gguf.F32:
		return backend.F32, data, nil
	case gguf.F16:
		if half == backend.F16 {
			return backend.F16, data, nil
		}
	case gguf.BF16:
		return backend.BF16, data, nil
	case gguf.Q8_0:
		if q, ok := w.Be.(backend.QuantizedWeights); ok && q.Quantized(backend.Q8_0) {
			return backend.Q8_0, data, nil
		}
	}
	n := 1
	for _, d := range shape {
		n *= d
	}
	out, dt, err := expand(t.Type, data, n, half)
	if err != nil {
		return 0, nil, fmt.Errorf("GGUF tensor %q: %w", g, err)
	}
	return dt, out, nil
}

// expand dequantizes n elements of type typ into half (F16 or BF16) bytes;
// f16 becomes f32 where a value is beyond its range. In parallel chunks of
// whole blocks, each through a small f32 buffer, so that an embedding of
// billions of values needs no f32 copy of itself.
func expand(typ gguf.Type, data []byte, n int, half backend.DType) ([]byte, backend.DType, error) {
	const chunk = 1 << 16 // elements; a multiple of every block size
	out := make([]byte, 2*n)
	var (
		mu       sync.Mutex
		firstErr error
		overflow atomic.Bool
		wg       sync.WaitGroup
	)
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	for lo := 0; lo < n; lo += chunk {
		hi := min(lo+chunk, n)
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			vals := make([]float32, hi-lo)
			src := data[typ.RowBytes(lo):typ.RowBytes(hi)]
			if err := gguf.Dequantize(typ, src, vals); err != nil {
				mu.Lock()
				firstErr = err
				mu.Unlock()
				return
			}
			if half == backend.BF16 {
				for i, v := range vals {
					binary.LittleEndian.PutUint16(out[2*(lo+i):], backend.Float32ToBF16(v))
				}
				return
			}
			for i, v := range vals {
				if v > 65504 || v < -65504 {
					overflow.Store(true)
				}
				binary.LittleEndian.PutUint16(out[2*(lo+i):], backend.Float32ToHalf(v))
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return nil, 0, firstErr
	}
	if !overflow.Load() {
		return out, half, nil
	}
	vals := make([]float32, n)
	if err := gguf.Dequantize(typ, data, vals); err != nil {
		return nil, 0, err
	}
	out = make([]byte, 4*n)
	for i, v := range vals {
		binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(v))
	}
	return out, backend.F32, nil
}

// Unused lists the file's tensors never requested.
func (w *GGUFWeights) Unused() []string {
	var out []string
	for _, t := range w.File.Tensors {
		if !w.used[t.Name] {
			out = append(out, t.Name)
		}
	}
	return out
}

// GGUFLoadedBytes is the memory a file's tensors take once loaded on a
// backend without quantized weights: plain types as stored, quantized ones
// expanded to 16 bits (an upper bound where Q8_0 stays as stored).
func GGUFLoadedBytes(f *gguf.File) int64 {
	var n int64
	for _, t := range f.Tensors {
		switch t.Type {
		case gguf.F32, gguf.F16, gguf.BF16:
			n += int64(len(t.Data))
		default:
			n += 2 * int64(t.Elements())
		}
	}
	return n
}
