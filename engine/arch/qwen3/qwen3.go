// Package qwen3 implements Qwen3ForCausalLM and Qwen3MoeForCausalLM: decoder
// layers of GQA attention with QK-norm and rotary embeddings, followed by a
// SwiGLU MLP or a top-k mixture of experts.
package qwen3

import (
	"fmt"
	"math"

	"github.com/infernix/infernix/engine/backend"
	"github.com/infernix/infernix/engine/model"
)

func init() {
	model.Register("Qwen3ForCausalLM", New)
	model.Register("Qwen3MoeForCausalLM", New)
}

type layer struct {
	inputNorm, postNorm backend.Tensor
	q, k, v, o          backend.Tensor
	qNorm, kNorm        backend.Tensor
	gate, up, down      backend.Tensor // dense MLP
	moe                 *backend.MoE   // or sparse MLP
}

// Model is a Qwen3 or Qwen3-MoE decoder bound to a backend.
type Model struct {
	model.Head // Forward, SampleLimits, ForwardSample over run
	cfg        *model.Config
	be         backend.Backend
	embed      backend.Tensor
	norm       backend.Tensor
	lmHead     backend.Tensor
	layers     []layer
	rope       *backend.Rope
	kv         backend.KVCache
	opt        model.Options

	// Activations sized for MaxBatchTokens.
	x, h, q, k, v, attn, gate, up, mlp backend.Tensor
	out, outNorm, logits               backend.Tensor
}

var (
	_ model.Model    = (*Model)(nil)
	_ model.Sampling = (*Model)(nil)
	_ model.Unread   = (*Model)(nil)
)

// UnreadPerToken (model.Unread): the embedding rows and routed experts a
// one-lane decode step skips.
func (m *Model) UnreadPerToken() int64 {
	moes := make([]*backend.MoE, 0, len(m.layers))
	for i := range m.layers {
		moes = append(moes, m.layers[i].moe)
	}
	return model.UnreadPerToken(m.embed, m.lmHead, moes...)
}

// New builds the model from checkpoint weights.
func New(cfg *model.Config, w model.WeightSource, be backend.Backend, opt model.Options) (model.Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.AttentionBias {
		return nil, fmt.Errorf("config.json: attention_bias=true is not supported for %s", cfg.Arch())
	}
	isMoE := cfg.Arch() == "Qwen3MoeForCausalLM"
	if isMoE && (cfg.NumExperts <= 0 || cfg.NumExpertsPerTok <= 0 || cfg.NumExpertsPerTok > cfg.NumExperts || cfg.MoeIntermediateSize <= 0) {
		return nil, fmt.Errorf("config.json: %s needs num_experts > 0, 0 < num_experts_per_tok ≤ num_experts and moe_intermediate_size > 0", cfg.Arch())
	}
	if !isMoE && cfg.IntermediateSize <= 0 {
		return nil, fmt.Errorf("config.json: intermediate_size must be positive")
	}
	if opt.MaxBatchTokens <= 0 {
		opt.MaxBatchTokens = 512
	}
	if opt.KVBlocks <= 0 {
		opt.KVBlocks = (cfg.MaxPositionEmbeddings + backend.BlockSize - 1) / backend.BlockSize
	}
	H, hd := cfg.HiddenSize, cfg.HeadDim
	nh, nkv := cfg.NumAttentionHeads, cfg.NumKeyValueHeads
	m := &Model{cfg: cfg, be: be, opt: opt, layers: make([]layer, cfg.NumHiddenLayers)}
	m.Head = model.Head{Be: be, Vocab: cfg.VocabSize, Run: m.run}
	var err error
	get := func(name string, shape ...int) backend.Tensor {
		if err != nil {
			return nil
		}
		var t backend.Tensor
		t, err = w.Tensor(name, shape...)
		return t
	}
	m.embed = get("model.embed_tokens.weight", cfg.VocabSize, H)
	m.norm = get("model.norm.weight", H)
	if w.Has("lm_head.weight") && !cfg.TieWordEmbeddings {
		m.lmHead = get("lm_head.weight", cfg.VocabSize, H)
	} else if !cfg.TieWordEmbeddings && !isSynthetic(w) {
		return nil, fmt.Errorf("missing tensor \"lm_head.weight\" (expected shape [%d %d]; tie_word_embeddings is false)", cfg.VocabSize, H)
	} else {
		m.lmHead = m.embed
	}
	for i := range m.layers {
		p := fmt.Sprintf("model.layers.%d.", i)
		L := &m.layers[i]
		L.inputNorm = get(p+"input_layernorm.weight", H)
		L.postNorm = get(p+"post_attention_layernorm.weight", H)
		L.q = get(p+"self_attn.q_proj.weight", nh*hd, H)
		L.k = get(p+"self_attn.k_proj.weight", nkv*hd, H)
		L.v = get(p+"self_attn.v_proj.weight", nkv*hd, H)
		L.o = get(p+"self_attn.o_proj.weight", H, nh*hd)
		L.qNorm = get(p+"self_attn.q_norm.weight", hd)
		L.kNorm = get(p+"self_attn.k_norm.weight", hd)
		if isMoE && sparseLayer(cfg, i) {
			E, I := cfg.NumExperts, cfg.MoeIntermediateSize
			moe := &backend.MoE{TopK: cfg.NumExpertsPerTok, NormTopK: cfg.NormTopkProb,
				Gate: make([]backend.Tensor, E), Up: make([]backend.Tensor, E), Down: make([]backend.Tensor, E)}
			moe.Router = get(p+"mlp.gate.weight", E, H)
			for e := 0; e < E; e++ {
				ep := fmt.Sprintf("%smlp.experts.%d.", p, e)
				moe.Gate[e] = get(ep+"gate_proj.weight", I, H)
				moe.Up[e] = get(ep+"up_proj.weight", I, H)
				moe.Down[e] = get(ep+"down_proj.weight", H, I)
			}
			L.moe = moe
		} else {
			I := cfg.IntermediateSize
			L.gate = get(p+"mlp.gate_proj.weight", I, H)
			L.up = get(p+"mlp.up_proj.weight", I, H)
			L.down = get(p+"mlp.down_proj.weight", H, I)
		}
	}
	if err != nil {
		return nil, err
	}
	maxPos := opt.KVBlocks * backend.BlockSize
	if maxPos > cfg.MaxPositionEmbeddings {
		maxPos = cfg.MaxPositionEmbeddings
	}
	if m.rope, err = model.NewRope(cfg, hd, maxPos); err != nil {
		return nil, err
	}
	if m.kv, err = be.NewKVCache(backend.KVSpec{Layers: cfg.NumHiddenLayers, Blocks: opt.KVBlocks, KVHeads: nkv, HeadDim: hd}); err != nil {
		return nil, err
	}
	T := opt.MaxBatchTokens
	inter := max(cfg.IntermediateSize, 1)
	m.x, m.h = be.Alloc(T, H), be.Alloc(T, H)
	m.q, m.attn = be.Alloc(T, nh*hd), be.Alloc(T, nh*hd)
	m.k, m.v = be.Alloc(T, nkv*hd), be.Alloc(T, nkv*hd)
	m.gate, m.up = be.Alloc(T, inter), be.Alloc(T, inter)
	m.mlp = be.Alloc(T, H)
	m.out, m.outNorm = be.Alloc(T, H), be.Alloc(T, H)
	m.logits = be.Alloc(T, cfg.VocabSize)
	return m, nil
}

func isSynthetic(w model.WeightSource) bool {
	_, ok := w.(*model.SyntheticWeights)
	return ok
}

// sparseLayer follows transformers: a layer is MoE unless listed in
// mlp_only_layers, every decoder_sparse_step-th layer.
func sparseLayer(cfg *model.Config, i int) bool {
	for _, d := range cfg.MlpOnlyLayers {
		if d == i {
			return false
		}
	}
	return cfg.NumExperts > 0 && (i+1)%cfg.DecoderSparseStep == 0
}

func (m *Model) Config() *model.Config { return m.cfg }
func (m *Model) MaxBatchTokens() int   { return m.opt.MaxBatchTokens }
func (m *Model) KVBlocks() int         { return m.opt.KVBlocks }

// KVCache exposes the KV pool to the prefix cache (backend.KVCacheOwner).
func (m *Model) KVCache() backend.KVCache { return m.kv }

// MaxPositions is the longest sequence the rotary table covers.
func (m *Model) MaxPositions() int { return m.rope.MaxPos }

// run computes the batch up to the LM head and returns the logits of
// b.Outputs (nil when there are none), not yet read back (model.Head).
func (m *Model) run(b *model.Batch) (backend.Tensor, error) {
	cfg, be := m.cfg, m.be
	T := len(b.Tokens)
	if T == 0 {
		return nil, nil
	}
	if T > m.opt.MaxBatchTokens {
		return nil, fmt.Errorf("batch of %d tokens exceeds the model's %d", T, m.opt.MaxBatchTokens)
	}
	for i, p := range b.Attn.Pos {
		if int(p) >= m.rope.MaxPos {
			return nil, fmt.Errorf("position %d beyond the model's context of %d", p, m.rope.MaxPos)
		}
		if id := b.Tokens[i]; id < 0 || int(id) >= cfg.VocabSize {
			return nil, fmt.Errorf("token id %d outside the vocabulary (size %d)", id, cfg.VocabSize)
		}
	}
	hd := cfg.HeadDim
	nh, nkv := cfg.NumAttentionHeads, cfg.NumKeyValueHeads
	eps := float32(cfg.RMSNormEps)
	scale := float32(1 / math.Sqrt(float64(hd)))
	x, h := be.Rows(m.x, T), be.Rows(m.h, T)
	q, k, v, attn := be.Rows(m.q, T), be.Rows(m.k, T), be.Rows(m.v, T), be.Rows(m.attn, T)
	mlp := be.Rows(m.mlp, T)
	be.Embed(x, m.embed, b.Tokens)
	for li := range m.layers {
		L := &m.layers[li]
		be.RMSNorm(h, x, L.inputNorm, eps)
		be.MatMul(q, h, L.q)
		be.MatMul(k, h, L.k)
		be.MatMul(v, h, L.v)
		qh, kh := be.Reshape(q, T*nh, hd), be.Reshape(k, T*nkv, hd)
		be.RMSNorm(qh, qh, L.qNorm, eps)
		be.RMSNorm(kh, kh, L.kNorm, eps)
		be.RoPE(q, nh, b.Attn.Pos, m.rope)
		be.RoPE(k, nkv, b.Attn.Pos, m.rope)
		be.Attention(attn, q, k, v, m.kv, li, &b.Attn, scale)
		be.MatMul(h, attn, L.o)
		be.Add(x, x, h)
		be.RMSNorm(h, x, L.postNorm, eps)
		if L.moe != nil {
			be.MoE(mlp, h, L.moe)
		} else {
			g, u := be.Rows(m.gate, T), be.Rows(m.up, T)
			be.MatMul(g, h, L.gate)
			be.MatMul(u, h, L.up)
			be.SwiGLU(g, g, u)
			be.MatMul(mlp, g, L.down)
		}
		be.Add(x, x, mlp)
	}
	n := len(b.Outputs)
	if n == 0 {
		return nil, nil
	}
	out, outNorm, logits := be.Rows(m.out, n), be.Rows(m.outNorm, n), be.Rows(m.logits, n)
	be.Gather(out, x, b.Outputs)
	be.RMSNorm(outNorm, out, m.norm, eps)
	be.MatMul(logits, outNorm, m.lmHead)
	return logits, nil
}
