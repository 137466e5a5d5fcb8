package qwen3next

import (
	"fmt"

	"github.com/infernix/infernix/engine/backend"
)

// load reads every tensor of the decoder (and keeps the MTP head).
func (m *Model) load(l *loader) error {
	cfg := m.cfg
	H := cfg.HiddenSize
	m.embed = l.get("embed_tokens.weight", cfg.VocabSize, H)
	m.norm = l.zeroCentred("norm.weight", H)
	switch {
	case !cfg.TieWordEmbeddings && l.w.Has("lm_head.weight"):
		m.lmHead = l.top("lm_head.weight", cfg.VocabSize, H)
	case !cfg.TieWordEmbeddings && l.fw != nil:
		return fmt.Errorf("missing tensor \"lm_head.weight\" (expected shape [%d %d]; tie_word_embeddings is false)", cfg.VocabSize, H)
	default:
		m.lmHead = m.embed
	}
	nLin, nFull := 0, 0
	for i := range m.layers {
		p := fmt.Sprintf("layers.%d.", i)
		L := &m.layers[i]
		L.inputNorm = l.zeroCentred(p+"input_layernorm.weight", H)
		L.postNorm = l.zeroCentred(p+"post_attention_layernorm.weight", H)
		if cfg.LayerTypes[i] == "linear_attention" {
			L.lin = m.loadLinear(l, p+"linear_attn.")
			L.lin.state = nLin
			nLin++
		} else {
			L.att = m.loadFull(l, p+"self_attn.")
			L.att.kv = nFull
			nFull++
		}
		if sparse(cfg, m.arch, i) {
			L.moe = m.loadMoE(l, p+"mlp.")
		} else {
			I := cfg.IntermediateSize
			if I <= 0 {
				return fmt.Errorf("config.json: intermediate_size must be positive (layer %d has a dense MLP)", i)
			}
			L.gate = l.get(p+"mlp.gate_proj.weight", I, H)
			L.up = l.get(p+"mlp.up_proj.weight", I, H)
			L.down = l.get(p+"mlp.down_proj.weight", H, I)
		}
	}
	m.mtp = l.loadMTP()
	return l.err
}

// top reads a tensor outside the decoder prefix (lm_head).
func (l *loader) top(name string, shape ...int) backend.Tensor {
	if l.err != nil {
		return nil
	}
	t, err := l.w.Tensor(name, shape...)
	if err != nil {
		l.err = err
	}
	return t
}

func (m *Model) loadLinear(l *loader, p string) *linear {
	cfg, s := m.cfg, m.spec
	H := cfg.HiddenSize
	kd, vd, nv := s.KHeads*s.KDim, s.VHeads*s.VDim, s.VHeads
	K := cfg.LinearConvKernelDim
	L := &linear{}
	if l.fw != nil && l.has(p+"in_proj_qkvz.weight") {
		// Qwen3-Next's fused layout groups rows by key head:
		// [q dk | k dk | v r·dv | z r·dv] and [b r | a r], r = VHeads/KHeads.
		// Relayout once into the split (Qwen3.5) order the forward pass uses.
		r := nv / s.KHeads
		blk := 2*s.KDim + 2*r*s.VDim
		var qkv, z, b, a []int
		for part := 0; part < 3; part++ {
			for g := 0; g < s.KHeads; g++ {
				off, n := [3]int{0, s.KDim, 2 * s.KDim}[part], [3]int{s.KDim, s.KDim, r * s.VDim}[part]
				for j := 0; j < n; j++ {
					qkv = append(qkv, g*blk+off+j)
				}
			}
		}
		for g := 0; g < s.KHeads; g++ {
			for j := 0; j < r*s.VDim; j++ {
				z = append(z, g*blk+2*s.KDim+r*s.VDim+j)
			}
			for j := 0; j < r; j++ {
				b = append(b, g*2*r+j)
				a = append(a, g*2*r+r+j)
			}
		}
		fused := l.raw(p+"in_proj_qkvz.weight", 2*kd+2*vd, H)
		ba := l.raw(p+"in_proj_ba.weight", 2*nv, H)
		if fused != nil && ba != nil {
			L.qkv = l.permuted(fused, fused.Name+"[qkv]", qkv, H)
			L.z = l.permuted(fused, fused.Name+"[z]", z, H)
			L.b = l.permuted(ba, ba.Name+"[b]", b, H)
			L.a = l.permuted(ba, ba.Name+"[a]", a, H)
		}
	} else {
		L.qkv = l.get(p+"in_proj_qkv.weight", 2*kd+vd, H)
		L.z = l.get(p+"in_proj_z.weight", vd, H)
		L.b = l.get(p+"in_proj_b.weight", nv, H)
		L.a = l.get(p+"in_proj_a.weight", nv, H)
	}
	L.conv = l.get(p+"conv1d.weight", 2*kd+vd, 1, K)
	L.aLog = l.get(p+"A_log", nv)
	L.dtBias = l.get(p+"dt_bias", nv)
	L.norm = l.get(p+"norm.weight", s.VDim) // gated norm: plain weight, not 1+w
	L.out = l.get(p+"out_proj.weight", H, vd)
	return L
}

func (m *Model) loadFull(l *loader, p string) *full {
	cfg := m.cfg
	H, hd, nh, nkv := cfg.HiddenSize, cfg.HeadDim, cfg.NumAttentionHeads, cfg.NumKeyValueHeads
	return &full{
		q:     l.get(p+"q_proj.weight", nh*hd*2, H),
		k:     l.get(p+"k_proj.weight", nkv*hd, H),
		v:     l.get(p+"v_proj.weight", nkv*hd, H),
		o:     l.get(p+"o_proj.weight", H, nh*hd),
		qNorm: l.zeroCentred(p+"q_norm.weight", hd),
		kNorm: l.zeroCentred(p+"k_norm.weight", hd),
	}
}

func (m *Model) loadMoE(l *loader, p string) *backend.MoE {
	cfg := m.cfg
	H, E, I, S := cfg.HiddenSize, cfg.NumExperts, cfg.MoeIntermediateSize, cfg.SharedExpertSize
	// Qwen3.5-MoE's router always renormalises the top-k; Qwen3-Next's
	// follows norm_topk_prob.
	norm := cfg.NormTopkProb || !m.arch.perLayer
	moe := &backend.MoE{TopK: cfg.NumExpertsPerTok, NormTopK: norm,
		Gate: make([]backend.Tensor, E), Up: make([]backend.Tensor, E), Down: make([]backend.Tensor, E)}
	moe.Router = l.get(p+"gate.weight", E, H)
	if l.fw != nil && l.has(p+"experts.gate_up_proj") {
		// Fused 3-D experts: gate_up [E, 2I, H] (gate rows first), down [E, H, I].
		gu := l.raw(p+"experts.gate_up_proj", E, 2*I, H)
		dn := l.raw(p+"experts.down_proj", E, H, I)
		if gu != nil && dn != nil {
			for e := 0; e < E; e++ {
				moe.Gate[e] = l.rowsOf(gu, fmt.Sprintf("%s[%d].gate", gu.Name, e), e*2*I, e*2*I+I, H)
				moe.Up[e] = l.rowsOf(gu, fmt.Sprintf("%s[%d].up", gu.Name, e), e*2*I+I, (e+1)*2*I, H)
				moe.Down[e] = l.rowsOf(dn, fmt.Sprintf("%s[%d]", dn.Name, e), e*H, (e+1)*H, I)
			}
		}
	} else {
		for e := 0; e < E; e++ {
			ep := fmt.Sprintf("%sexperts.%d.", p, e)
			moe.Gate[e] = l.get(ep+"gate_proj.weight", I, H)
			moe.Up[e] = l.get(ep+"up_proj.weight", I, H)
			moe.Down[e] = l.get(ep+"down_proj.weight", H, I)
		}
	}
	if S > 0 {
		moe.SharedGate = l.get(p+"shared_expert.gate_proj.weight", S, H)
		moe.SharedUp = l.get(p+"shared_expert.up_proj.weight", S, H)
		moe.SharedDown = l.get(p+"shared_expert.down_proj.weight", H, S)
		moe.SharedExpertGate = l.get(p+"shared_expert_gate.weight", 1, H)
	}
	return moe
}
