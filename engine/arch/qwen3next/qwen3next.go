// Package qwen3next implements the hybrid Qwen decoders: Qwen3-Next,
// Qwen3.5 (dense and MoE) and the language model of the Qwen3.5 multimodal
// checkpoints. Layers are either Gated DeltaNet linear attention (conv1d +
// gated delta rule, with per-sequence recurrent state in engine/state) or
// gated full attention (output gate in the query projection, partial rotary,
// zero-centred QK-norm) over the paged KV cache, each followed by a SwiGLU
// MLP or a top-k MoE with a sigmoid-gated shared expert.
package qwen3next

import (
	"fmt"

	"github.com/infernix/infernix/engine/backend"
	"github.com/infernix/infernix/engine/model"
	"github.com/infernix/infernix/engine/state"
)

func init() {
	for name := range archs {
		model.Register(name, New)
	}
}

// DefaultSlots is the number of recurrent-state slots (sequences in flight)
// a model gets when the KV pool does not limit it further. One slot of
// Qwen3.5-27B is ~150 MB, so this is deliberately small.
var DefaultSlots = 16

// Chunk is the chunk length of the chunked gated-delta-rule form used for
// prefill (transformers' 64).
const Chunk = 64

type linear struct {
	qkv, z, b, a backend.Tensor // in_proj (split layout)
	conv         backend.Tensor // [convDim, K]
	aLog, dtBias backend.Tensor
	norm, out    backend.Tensor
	state        int // index into the state pool's layers
}

type full struct {
	q, k, v, o   backend.Tensor // q: [heads*2*headDim, H], per head query then gate
	qNorm, kNorm backend.Tensor // zero-centred, stored as 1+w
	kv           int            // index into the KV cache's layers
}

type layer struct {
	inputNorm, postNorm backend.Tensor // 1+w
	lin                 *linear
	att                 *full
	gate, up, down      backend.Tensor
	moe                 *backend.MoE
}

// Model is a loaded hybrid decoder.
type Model struct {
	model.Head // Forward, SampleLimits, ForwardSample over run
	cfg        *model.Config
	arch       arch
	be         backend.Backend
	rec        backend.Recurrent
	opt        model.Options
	embed      backend.Tensor
	norm       backend.Tensor
	lmHead     backend.Tensor
	layers     []layer
	rope       *backend.Rope
	kv         backend.KVCache
	pool       *state.Pool
	spec       backend.GDNSpec
	mtp        map[string]backend.Tensor
	// next[slot] is the position the slot's state continues at (-1: none).
	// Forward refuses a continuation the state does not match, so a slot
	// mix-up or a prefix-cache hit without a restored snapshot is an error,
	// never silently wrong logits.
	next []int
	seen []bool // scratch of check

	// Activations sized for MaxBatchTokens.
	x, h, mlp, gateT, upT      backend.Tensor
	qkv, conv, z, ba, bb, core backend.Tensor
	qg, q, g, k, v, attn       backend.Tensor
	out, outNorm, logits       backend.Tensor
}

var (
	_ model.Model    = (*Model)(nil)
	_ model.Sampling = (*Model)(nil)
	_ model.Unread   = (*Model)(nil)
	_ state.Stateful = (*Model)(nil)
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

// New builds a hybrid model from checkpoint weights.
func New(top *model.Config, w model.WeightSource, be backend.Backend, opt model.Options) (model.Model, error) {
	a, ok := archs[top.Arch()]
	if !ok {
		return nil, fmt.Errorf("qwen3next: unknown architecture %q", top.Arch())
	}
	cfg, err := textConfig(top, a)
	if err != nil {
		return nil, err
	}
	if err := checkHybrid(cfg, a); err != nil {
		return nil, err
	}
	rec, ok := be.(backend.Recurrent)
	if !ok {
		return nil, fmt.Errorf("backend %s cannot run %s: it lacks the linear-attention (Gated DeltaNet) operators", be.Name(), cfg.Arch())
	}
	if opt.MaxBatchTokens <= 0 {
		opt.MaxBatchTokens = 512
	}
	if opt.KVBlocks <= 0 {
		opt.KVBlocks = (cfg.MaxPositionEmbeddings + backend.BlockSize - 1) / backend.BlockSize
	}
	m := &Model{cfg: cfg, arch: a, be: be, rec: rec, opt: opt, layers: make([]layer, cfg.NumHiddenLayers)}
	m.Head = model.Head{Be: be, Vocab: cfg.VocabSize, Run: m.run}
	m.spec = backend.GDNSpec{KHeads: cfg.LinearNumKeyHeads, VHeads: cfg.LinearNumValueHeads,
		KDim: cfg.LinearKeyHeadDim, VDim: cfg.LinearValueHeadDim, Chunk: Chunk}
	if c, ok := be.(backend.GDNShapeChecker); ok {
		if err := c.CheckGDN(m.spec); err != nil {
			return nil, err
		}
	}
	fw, _ := w.(*model.FileWeights)
	l := &loader{w: w, fw: fw, be: be, prefix: a.prefix}
	if err := m.load(l); err != nil {
		return nil, err
	}
	maxPos := min(opt.KVBlocks*backend.BlockSize, cfg.MaxPositionEmbeddings)
	rot := int(float64(cfg.HeadDim) * partialRotary(cfg))
	if m.rope, err = model.NewRope(cfg, rot, maxPos); err != nil {
		return nil, err
	}
	nFull, nLin := 0, 0
	for i := range m.layers {
		if m.layers[i].att != nil {
			nFull++
		} else {
			nLin++
		}
	}
	if m.kv, err = be.NewKVCache(backend.KVSpec{Layers: max(nFull, 1), Blocks: opt.KVBlocks, KVHeads: cfg.NumKeyValueHeads, HeadDim: cfg.HeadDim}); err != nil {
		return nil, err
	}
	K, s := cfg.LinearConvKernelDim, m.spec
	convDim := 2*s.KHeads*s.KDim + s.VHeads*s.VDim
	slots := max(1, min(DefaultSlots, opt.KVBlocks))
	if m.pool, err = state.NewPool(be, slots, nLin, K-1, convDim, s.VHeads*s.VDim, s.KDim, m.fingerprint(l)); err != nil {
		return nil, err
	}
	m.next, m.seen = make([]int, slots), make([]bool, slots)
	for i := range m.next {
		m.next[i] = -1
	}
	m.alloc(convDim)
	return m, nil
}

func (m *Model) alloc(convDim int) {
	cfg, be, T := m.cfg, m.be, m.opt.MaxBatchTokens
	H, hd, nh, nkv := cfg.HiddenSize, cfg.HeadDim, cfg.NumAttentionHeads, cfg.NumKeyValueHeads
	vd, nv := m.spec.VHeads*m.spec.VDim, m.spec.VHeads
	inter := max(cfg.IntermediateSize, 1)
	m.x, m.h, m.mlp = be.Alloc(T, H), be.Alloc(T, H), be.Alloc(T, H)
	m.gateT, m.upT = be.Alloc(T, inter), be.Alloc(T, inter)
	m.qkv, m.conv = be.Alloc(T, convDim), be.Alloc(T, convDim)
	m.z, m.core = be.Alloc(T, vd), be.Alloc(T, vd)
	m.ba, m.bb = be.Alloc(T, nv), be.Alloc(T, nv)
	m.qg = be.Alloc(T, 2*nh*hd)
	m.q, m.g, m.attn = be.Alloc(T, nh*hd), be.Alloc(T, nh*hd), be.Alloc(T, nh*hd)
	m.k, m.v = be.Alloc(T, nkv*hd), be.Alloc(T, nkv*hd)
	m.out, m.outNorm = be.Alloc(T, H), be.Alloc(T, H)
	m.logits = be.Alloc(T, cfg.VocabSize)
}

func (m *Model) Config() *model.Config { return m.cfg }
func (m *Model) MaxBatchTokens() int   { return m.opt.MaxBatchTokens }
func (m *Model) KVBlocks() int         { return m.opt.KVBlocks }

// MaxPositions is the longest sequence the rotary table covers.
func (m *Model) MaxPositions() int { return m.rope.MaxPos }

// MTP returns the multi-token-prediction weights (`mtp.*`), loaded but not
// run yet; nil when the checkpoint has none.
func (m *Model) MTP() map[string]backend.Tensor { return m.mtp }

// Multimodal reports whether the checkpoint has a vision tower (not loaded).
func (m *Model) Multimodal() bool { return m.arch.multimodal }

// CheckImages returns the error to show when a request carries images: no
// vision support yet, whatever the checkpoint.
func (m *Model) CheckImages(n int) error {
	if n == 0 {
		return nil
	}
	if m.arch.multimodal {
		return fmt.Errorf("%s: image input is not supported yet (only the language model of this checkpoint is loaded)", m.cfg.Arch())
	}
	return fmt.Errorf("%s is a text-only model: it cannot take images", m.cfg.Arch())
}

// StateSlots implements state.Stateful.
func (m *Model) StateSlots() int { return m.pool.Slots }

// Snapshot implements state.Stateful: the linear layers' conv and recurrent
// state of slot after pos tokens (full-attention KV stays in the blocks).
// pos must be the number of tokens the slot has run.
func (m *Model) Snapshot(slot, pos int) ([]byte, error) {
	if slot >= 0 && slot < len(m.next) && m.next[slot] != pos {
		return nil, fmt.Errorf("state slot %d holds the state after %d tokens, not %d", slot, m.next[slot], pos)
	}
	return m.pool.Snapshot(slot, pos)
}

// Restore implements state.Stateful.
func (m *Model) Restore(slot int, snap []byte) (int, error) {
	pos, err := m.pool.Restore(slot, snap)
	if err == nil {
		m.next[slot] = pos
	}
	return pos, err
}

// ReleaseSlot marks a slot free (its sequence finished or was preempted);
// only a sequence starting at position 0 or a Restore can use it again.
func (m *Model) ReleaseSlot(slot int) {
	if slot >= 0 && slot < len(m.next) {
		m.next[slot] = -1
	}
}

// fingerprint identifies the state layout and, for files, the weights (a
// digest of every linear layer's A_log and the start of the embeddings).
func (m *Model) fingerprint(l *loader) uint64 {
	c := m.cfg
	parts := []any{"qwen3next-state", c.Arch(), c.HiddenSize, c.NumHiddenLayers, c.LayerTypes, m.spec, c.LinearConvKernelDim, c.VocabSize}
	if l.fw != nil {
		if t := l.fw.Set.Get(l.fw.Prefix + l.prefix + "embed_tokens.weight"); t != nil {
			parts = append(parts, string(t.Data[:min(len(t.Data), 4096)]))
		}
		for i, lt := range c.LayerTypes {
			if lt == "linear_attention" {
				if t := l.fw.Set.Get(fmt.Sprintf("%s%slayers.%d.linear_attn.A_log", l.fw.Prefix, l.prefix, i)); t != nil {
					parts = append(parts, string(t.Data))
				}
			}
		}
	}
	return state.Fingerprint(parts...)
}

// KVCache exposes the full-attention layers' KV pool to the prefix cache
// (backend.KVCacheOwner); the linear layers' state travels as snapshots.
func (m *Model) KVCache() backend.KVCache { return m.kv }
