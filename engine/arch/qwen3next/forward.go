package qwen3next

import (
	"fmt"
	"math"

	"github.com/infernix/infernix/engine/backend"
	"github.com/infernix/infernix/engine/model"
)

// run computes the batch up to the LM head and returns the logits of
// b.Outputs (nil when there are none), not yet read back (model.Head).
// Besides the block tables, b.Attn.Slots names each sequence's
// recurrent-state slot (nil: slot = sequence index); a sequence whose first
// token here is at position 0 starts from zero state.
func (m *Model) run(b *model.Batch) (backend.Tensor, error) {
	cfg, be := m.cfg, m.be
	T := len(b.Tokens)
	if T == 0 {
		return nil, nil
	}
	if err := m.check(b); err != nil {
		return nil, err
	}
	eps := float32(cfg.RMSNormEps)
	x, h, mlp := be.Rows(m.x, T), be.Rows(m.h, T), be.Rows(m.mlp, T)
	be.Embed(x, m.embed, b.Tokens)
	for li := range m.layers {
		L := &m.layers[li]
		be.RMSNorm(h, x, L.inputNorm, eps)
		if L.lin != nil {
			m.linearAttn(L.lin, h, &b.Attn, T)
		} else {
			m.fullAttn(L.att, h, b, T)
		}
		be.Add(x, x, h)
		be.RMSNorm(h, x, L.postNorm, eps)
		if L.moe != nil {
			be.MoE(mlp, h, L.moe)
		} else {
			g, u := be.Rows(m.gateT, T), be.Rows(m.upT, T)
			be.MatMul(g, h, L.gate)
			be.MatMul(u, h, L.up)
			be.SwiGLU(g, g, u)
			be.MatMul(mlp, g, L.down)
		}
		be.Add(x, x, mlp)
	}
	for i := 0; i < T; i++ {
		if i == T-1 || b.Attn.Seq[i+1] != b.Attn.Seq[i] {
			m.next[b.Attn.Slot(b.Attn.Seq[i])] = int(b.Attn.Pos[i]) + 1
		}
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

func (m *Model) check(b *model.Batch) error {
	cfg := m.cfg
	T := len(b.Tokens)
	if T > m.opt.MaxBatchTokens {
		return fmt.Errorf("batch of %d tokens exceeds the model's %d", T, m.opt.MaxBatchTokens)
	}
	if len(b.Attn.Pos) != T || len(b.Attn.Seq) != T {
		return fmt.Errorf("batch has %d tokens but %d positions and %d sequence ids", T, len(b.Attn.Pos), len(b.Attn.Seq))
	}
	for i, p := range b.Attn.Pos {
		if p < 0 || int(p) >= m.rope.MaxPos {
			return fmt.Errorf("position %d beyond the model's context of %d", p, m.rope.MaxPos)
		}
		if id := b.Tokens[i]; id < 0 || int(id) >= cfg.VocabSize {
			return fmt.Errorf("token id %d outside the vocabulary (size %d)", id, cfg.VocabSize)
		}
		s := b.Attn.Seq[i]
		if s < 0 || int(s) >= len(b.Attn.Blocks) || (b.Attn.Slots != nil && int(s) >= len(b.Attn.Slots)) {
			return fmt.Errorf("token %d names sequence %d without a block table or state slot", i, s)
		}
		if slot := b.Attn.Slot(s); slot < 0 || slot >= m.pool.Slots {
			return fmt.Errorf("sequence %d uses state slot %d; the model has %d", s, slot, m.pool.Slots)
		}
	}
	// Each sequence's first token must continue its slot's state, and no
	// two sequences may share a slot.
	clear(m.seen)
	for i := 0; i < T; i++ {
		if i > 0 && b.Attn.Seq[i] == b.Attn.Seq[i-1] {
			if b.Attn.Pos[i] != b.Attn.Pos[i-1]+1 {
				return fmt.Errorf("sequence %d: positions %d then %d (tokens of a sequence must be consecutive)", b.Attn.Seq[i], b.Attn.Pos[i-1], b.Attn.Pos[i])
			}
			continue
		}
		slot, p := b.Attn.Slot(b.Attn.Seq[i]), int(b.Attn.Pos[i])
		if m.seen[slot] {
			return fmt.Errorf("state slot %d used by two sequences of one batch (or a sequence split)", slot)
		}
		m.seen[slot] = true
		if p != 0 && m.next[slot] != p {
			return fmt.Errorf("sequence %d continues at position %d but its state slot %d holds the state after %d tokens (restore a snapshot or start from position 0)", b.Attn.Seq[i], p, slot, m.next[slot])
		}
	}
	for _, o := range b.Outputs {
		if o < 0 || int(o) >= T {
			return fmt.Errorf("output row %d outside the batch of %d tokens", o, T)
		}
	}
	return nil
}

// linearAttn replaces h with the Gated DeltaNet output of h.
func (m *Model) linearAttn(L *linear, h backend.Tensor, ab *backend.AttnBatch, T int) {
	be, s := m.be, m.spec
	qkv, conv := be.Rows(m.qkv, T), be.Rows(m.conv, T)
	z, core := be.Rows(m.z, T), be.Rows(m.core, T)
	a, bt := be.Rows(m.ba, T), be.Rows(m.bb, T)
	be.MatMul(qkv, h, L.qkv)
	be.MatMul(z, h, L.z)
	be.MatMul(bt, h, L.b)
	be.MatMul(a, h, L.a)
	m.rec.CausalConv1D(conv, qkv, L.conv, m.pool.Conv[L.state], ab)
	m.rec.GatedDeltaRule(core, conv, a, bt, L.aLog, L.dtBias, m.pool.Rec[L.state], ab, s)
	rows := T * s.VHeads
	ch, zh := be.Reshape(core, rows, s.VDim), be.Reshape(z, rows, s.VDim)
	m.rec.RMSNormGated(ch, ch, zh, L.norm, float32(m.cfg.RMSNormEps))
	be.MatMul(h, core, L.out)
}

// fullAttn replaces h with the gated attention output of h.
func (m *Model) fullAttn(L *full, h backend.Tensor, b *model.Batch, T int) {
	cfg, be := m.cfg, m.be
	hd, nh, nkv := cfg.HeadDim, cfg.NumAttentionHeads, cfg.NumKeyValueHeads
	eps := float32(cfg.RMSNormEps)
	qg, q, g := be.Rows(m.qg, T), be.Rows(m.q, T), be.Rows(m.g, T)
	k, v, attn := be.Rows(m.k, T), be.Rows(m.v, T), be.Rows(m.attn, T)
	// The three products of h first: a backend may run them as one.
	be.MatMul(qg, h, L.q)
	be.MatMul(k, h, L.k)
	be.MatMul(v, h, L.v)
	m.rec.SliceCols(q, qg, nh, 0, hd)
	m.rec.SliceCols(g, qg, nh, hd, hd)
	qh, kh := be.Reshape(q, T*nh, hd), be.Reshape(k, T*nkv, hd)
	be.RMSNorm(qh, qh, L.qNorm, eps)
	be.RMSNorm(kh, kh, L.kNorm, eps)
	be.RoPE(q, nh, b.Attn.Pos, m.rope)
	be.RoPE(k, nkv, b.Attn.Pos, m.rope)
	be.Attention(attn, q, k, v, m.kv, L.kv, &b.Attn, float32(1/math.Sqrt(float64(hd))))
	m.rec.MulSigmoid(attn, attn, g)
	be.MatMul(h, attn, L.o)
}
