package prefix

import "github.com/infernix/infernix/engine/model"

// Reusable reports whether m's sequences can resume from cached KV blocks
// alone: models with only full-attention layers can; hybrid ones (any other
// layer type, a full-attention interval, linear-attention heads, also in a
// nested text_config) also need the recurrent state at the resume point,
// which the scheduler keeps as snapshots (engine/sched/snapshots.go).
func Reusable(m model.Model) bool { return !hybrid(m.Config()) }

func hybrid(c *model.Config) bool {
	if c == nil {
		return false
	}
	for _, t := range c.LayerTypes {
		if t != "full_attention" && t != "" {
			return true
		}
	}
	return c.FullAttentionInterval > 1 || c.LinearNumKeyHeads > 0 || c.LinearConvKernelDim > 0 || hybrid(c.TextConfig)
}
