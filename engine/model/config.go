package model

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// RopeScaling is the `rope_scaling` (or `rope_parameters`) block of config.json.
type RopeScaling struct {
	Type                          string   `json:"rope_type"`
	LegacyType                    string   `json:"type"`
	Factor                        float64  `json:"factor"`
	OriginalMaxPositionEmbeddings int      `json:"original_max_position_embeddings"`
	BetaFast                      *float64 `json:"beta_fast"`
	BetaSlow                      *float64 `json:"beta_slow"`
	AttentionFactor               *float64 `json:"attention_factor"`
	MScale                        *float64 `json:"mscale"`
	MScaleAllDim                  *float64 `json:"mscale_all_dim"`
	Truncate                      *bool    `json:"truncate"`
	RopeTheta                     float64  `json:"rope_theta"`
	PartialRotaryFactor           float64  `json:"partial_rotary_factor"`
}

// Kind is the scaling type, whichever key the checkpoint used.
func (r *RopeScaling) Kind() string {
	if r == nil {
		return "default"
	}
	if r.Type != "" {
		return r.Type
	}
	if r.LegacyType != "" {
		return r.LegacyType
	}
	return "default"
}

// Config is the subset of a Hugging Face config.json the Qwen family uses.
// Fields of architectures not yet loaded (hybrid layers) are parsed too so
// that the loader can refuse them with a clear message and later issues can
// use them.
type Config struct {
	Architectures         []string     `json:"architectures"`
	ModelType             string       `json:"model_type"`
	VocabSize             int          `json:"vocab_size"`
	HiddenSize            int          `json:"hidden_size"`
	IntermediateSize      int          `json:"intermediate_size"`
	NumHiddenLayers       int          `json:"num_hidden_layers"`
	NumAttentionHeads     int          `json:"num_attention_heads"`
	NumKeyValueHeads      int          `json:"num_key_value_heads"`
	HeadDim               int          `json:"head_dim"`
	HiddenAct             string       `json:"hidden_act"`
	RMSNormEps            float64      `json:"rms_norm_eps"`
	RopeTheta             float64      `json:"rope_theta"`
	RopeScaling           *RopeScaling `json:"rope_scaling"`
	RopeParameters        *RopeScaling `json:"rope_parameters"`
	PartialRotaryFactor   float64      `json:"partial_rotary_factor"`
	MaxPositionEmbeddings int          `json:"max_position_embeddings"`
	TieWordEmbeddings     bool         `json:"tie_word_embeddings"`
	AttentionBias         bool         `json:"attention_bias"`
	TorchDType            string       `json:"torch_dtype"`
	DType                 string       `json:"dtype"`
	BOSTokenID            *int         `json:"bos_token_id"`
	EOSTokenID            IntList      `json:"eos_token_id"`

	// Mixture of experts.
	NumExperts          int   `json:"num_experts"`
	NumExpertsPerTok    int   `json:"num_experts_per_tok"`
	MoeIntermediateSize int   `json:"moe_intermediate_size"`
	NormTopkProb        bool  `json:"norm_topk_prob"`
	DecoderSparseStep   int   `json:"decoder_sparse_step"`
	MlpOnlyLayers       []int `json:"mlp_only_layers"`
	SharedExpertSize    int   `json:"shared_expert_intermediate_size"`

	// Hybrid (Gated DeltaNet) layers.
	LayerTypes            []string `json:"layer_types"`
	FullAttentionInterval int      `json:"full_attention_interval"`
	LinearNumKeyHeads     int      `json:"linear_num_key_heads"`
	LinearNumValueHeads   int      `json:"linear_num_value_heads"`
	LinearKeyHeadDim      int      `json:"linear_key_head_dim"`
	LinearValueHeadDim    int      `json:"linear_value_head_dim"`
	LinearConvKernelDim   int      `json:"linear_conv_kernel_dim"`
	MTPNumHiddenLayers    int      `json:"mtp_num_hidden_layers"`
	TextConfig            *Config  `json:"text_config"`
	raw                   json.RawMessage
}

// IntList accepts a JSON number or an array of numbers (eos_token_id is either).
type IntList []int

func (l *IntList) UnmarshalJSON(b []byte) error {
	var one int
	if err := json.Unmarshal(b, &one); err == nil {
		*l = IntList{one}
		return nil
	}
	var many []int
	if err := json.Unmarshal(b, &many); err != nil {
		return fmt.Errorf("expected an integer or a list of integers, got %s", b)
	}
	*l = many
	return nil
}

// Arch is the first entry of `architectures`.
func (c *Config) Arch() string {
	if len(c.Architectures) == 0 {
		return ""
	}
	return c.Architectures[0]
}

// Text returns the language model's config: text_config for multimodal
// checkpoints, the config itself otherwise.
func (c *Config) Text() *Config {
	if c.TextConfig != nil {
		return c.TextConfig
	}
	return c
}

// Raw returns config.json as read, for architecture-specific fields.
func (c *Config) Raw() json.RawMessage { return c.raw }

// Rope returns the effective rope scaling block (rope_scaling, else rope_parameters).
func (c *Config) Rope() *RopeScaling {
	if c.RopeScaling != nil {
		return c.RopeScaling
	}
	return c.RopeParameters
}

// Theta returns rope_theta wherever the checkpoint put it.
func (c *Config) Theta() float64 {
	if c.RopeTheta > 0 {
		return c.RopeTheta
	}
	if r := c.Rope(); r != nil && r.RopeTheta > 0 {
		return r.RopeTheta
	}
	return 10000
}

// ParseConfig decodes config.json and fills the defaults transformers applies.
func ParseConfig(data []byte) (*Config, error) {
	var c Config
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("config.json: %v", err)
	}
	c.raw = append(json.RawMessage(nil), data...)
	c.fillDefaults()
	if c.TextConfig != nil {
		c.TextConfig.fillDefaults()
	}
	return &c, nil
}

func (c *Config) fillDefaults() {
	if c.NumKeyValueHeads == 0 {
		c.NumKeyValueHeads = c.NumAttentionHeads
	}
	if c.HeadDim == 0 && c.NumAttentionHeads > 0 {
		c.HeadDim = c.HiddenSize / c.NumAttentionHeads
	}
	if c.RMSNormEps == 0 {
		c.RMSNormEps = 1e-6
	}
	if c.DecoderSparseStep == 0 {
		c.DecoderSparseStep = 1
	}
	if c.HiddenAct == "" {
		c.HiddenAct = "silu"
	}
	if c.MaxPositionEmbeddings == 0 {
		c.MaxPositionEmbeddings = 32768
	}
}

// Validate checks the fields every architecture needs.
func (c *Config) Validate() error {
	check := func(name string, v int) error {
		if v <= 0 {
			return fmt.Errorf("config.json: %s must be a positive integer (got %d)", name, v)
		}
		return nil
	}
	for _, f := range []struct {
		n string
		v int
	}{{"vocab_size", c.VocabSize}, {"hidden_size", c.HiddenSize}, {"num_hidden_layers", c.NumHiddenLayers},
		{"num_attention_heads", c.NumAttentionHeads}, {"num_key_value_heads", c.NumKeyValueHeads}, {"head_dim", c.HeadDim}} {
		if err := check(f.n, f.v); err != nil {
			return err
		}
	}
	if c.NumAttentionHeads%c.NumKeyValueHeads != 0 {
		return fmt.Errorf("config.json: num_attention_heads (%d) must be a multiple of num_key_value_heads (%d)", c.NumAttentionHeads, c.NumKeyValueHeads)
	}
	if c.HiddenAct != "silu" {
		return fmt.Errorf("config.json: hidden_act %q is not supported (only silu)", c.HiddenAct)
	}
	return nil
}

// LoadConfig reads dir/config.json.
func LoadConfig(dir string) (*Config, error) {
	data, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		return nil, fmt.Errorf("reading model config: %w", err)
	}
	return ParseConfig(data)
}

// GenerationConfig is generation_config.json: the checkpoint's sampling defaults.
type GenerationConfig struct {
	EOSTokenID        IntList  `json:"eos_token_id"`
	BOSTokenID        *int     `json:"bos_token_id"`
	PadTokenID        *int     `json:"pad_token_id"`
	Temperature       *float64 `json:"temperature"`
	TopP              *float64 `json:"top_p"`
	TopK              *int     `json:"top_k"`
	MinP              *float64 `json:"min_p"`
	DoSample          *bool    `json:"do_sample"`
	RepetitionPenalty *float64 `json:"repetition_penalty"`
}

// LoadGenerationConfig reads dir/generation_config.json; a missing file is not an error.
func LoadGenerationConfig(dir string) (*GenerationConfig, error) {
	data, err := os.ReadFile(filepath.Join(dir, "generation_config.json"))
	if os.IsNotExist(err) {
		return &GenerationConfig{}, nil
	}
	if err != nil {
		return nil, err
	}
	var g GenerationConfig
	if err := json.Unmarshal(data, &g); err != nil {
		return nil, fmt.Errorf("generation_config.json: %v", err)
	}
	return &g, nil
}
