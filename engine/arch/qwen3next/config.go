package qwen3next

import (
	"encoding/json"
	"fmt"

	"github.com/infernix/infernix/engine/model"
)

// arch describes how one registered architecture name maps onto the shared
// implementation.
type arch struct {
	moe        bool   // every layer (subject to decoder_sparse_step) is a sparse MoE
	perLayer   bool   // Qwen3-Next: decoder_sparse_step / mlp_only_layers decide
	prefix     string // where the decoder's weights live
	multimodal bool   // a vision tower exists in the checkpoint (not loaded)
}

var archs = map[string]arch{
	"Qwen3NextForCausalLM":               {moe: true, perLayer: true, prefix: "model."},
	"Qwen3_5ForCausalLM":                 {prefix: "model."},
	"Qwen3_5MoeForCausalLM":              {moe: true, prefix: "model."},
	"Qwen3_5ForConditionalGeneration":    {prefix: "model.language_model.", multimodal: true},
	"Qwen3_5MoeForConditionalGeneration": {moe: true, prefix: "model.language_model.", multimodal: true},
}

// textConfig returns the decoder's config: the checkpoint's own, or for the
// multimodal checkpoints their text_config with transformers' defaults filled.
func textConfig(cfg *model.Config, a arch) (*model.Config, error) {
	if !a.multimodal {
		return cfg, nil
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(cfg.Raw(), &top); err != nil {
		return nil, fmt.Errorf("config.json: %v", err)
	}
	raw, ok := top["text_config"]
	if !ok {
		return nil, fmt.Errorf("config.json: %s needs a text_config block", cfg.Arch())
	}
	tc, err := model.ParseConfig(raw)
	if err != nil {
		return nil, fmt.Errorf("config.json text_config: %v", err)
	}
	tc.Architectures = cfg.Architectures
	if _, ok := top["tie_word_embeddings"]; ok {
		tc.TieWordEmbeddings = cfg.TieWordEmbeddings
	}
	if len(tc.EOSTokenID) == 0 {
		tc.EOSTokenID = cfg.EOSTokenID
	}
	return tc, nil
}

// partialRotary is partial_rotary_factor wherever the checkpoint put it
// (0.25 is the default of all three transformers configs).
func partialRotary(c *model.Config) float64 {
	if c.PartialRotaryFactor > 0 {
		return c.PartialRotaryFactor
	}
	if r := c.Rope(); r != nil && r.PartialRotaryFactor > 0 {
		return r.PartialRotaryFactor
	}
	return 0.25
}

// checkHybrid validates the linear-attention fields and layer_types.
func checkHybrid(c *model.Config, a arch) error {
	if err := c.Validate(); err != nil {
		return err
	}
	if c.AttentionBias {
		return fmt.Errorf("config.json: attention_bias=true is not supported for %s", c.Arch())
	}
	if len(c.LayerTypes) == 0 && c.FullAttentionInterval > 0 {
		for i := 0; i < c.NumHiddenLayers; i++ {
			t := "linear_attention"
			if (i+1)%c.FullAttentionInterval == 0 {
				t = "full_attention"
			}
			c.LayerTypes = append(c.LayerTypes, t)
		}
	}
	if len(c.LayerTypes) != c.NumHiddenLayers {
		return fmt.Errorf("config.json: layer_types has %d entries for %d layers", len(c.LayerTypes), c.NumHiddenLayers)
	}
	for i, t := range c.LayerTypes {
		if t != "linear_attention" && t != "full_attention" {
			return fmt.Errorf("config.json: layer_types[%d] = %q (want linear_attention or full_attention)", i, t)
		}
	}
	for _, f := range []struct {
		n string
		v int
	}{{"linear_num_key_heads", c.LinearNumKeyHeads}, {"linear_num_value_heads", c.LinearNumValueHeads},
		{"linear_key_head_dim", c.LinearKeyHeadDim}, {"linear_value_head_dim", c.LinearValueHeadDim},
		{"linear_conv_kernel_dim", c.LinearConvKernelDim}} {
		if f.v <= 0 {
			return fmt.Errorf("config.json: %s must be a positive integer (got %d)", f.n, f.v)
		}
	}
	if c.LinearNumValueHeads%c.LinearNumKeyHeads != 0 {
		return fmt.Errorf("config.json: linear_num_value_heads (%d) must be a multiple of linear_num_key_heads (%d)", c.LinearNumValueHeads, c.LinearNumKeyHeads)
	}
	if c.LinearConvKernelDim > 17 {
		return fmt.Errorf("config.json: linear_conv_kernel_dim %d is too large", c.LinearConvKernelDim)
	}
	if a.moe && (c.NumExperts <= 0 || c.NumExpertsPerTok <= 0 || c.NumExpertsPerTok > c.NumExperts || c.MoeIntermediateSize <= 0) {
		return fmt.Errorf("config.json: %s needs num_experts > 0, 0 < num_experts_per_tok ≤ num_experts and moe_intermediate_size > 0", c.Arch())
	}
	if rot := int(float64(c.HeadDim) * partialRotary(c)); rot <= 0 || rot%2 != 0 || rot > c.HeadDim {
		return fmt.Errorf("config.json: partial_rotary_factor gives rotary dimension %d for head_dim %d", rot, c.HeadDim)
	}
	return nil
}

// sparse follows transformers: Qwen3-Next layers are MoE unless listed in
// mlp_only_layers, every decoder_sparse_step-th; Qwen3.5-MoE layers all are.
func sparse(c *model.Config, a arch, i int) bool {
	if !a.moe {
		return false
	}
	if !a.perLayer {
		return true
	}
	for _, d := range c.MlpOnlyLayers {
		if d == i {
			return false
		}
	}
	return (i+1)%c.DecoderSparseStep == 0
}
