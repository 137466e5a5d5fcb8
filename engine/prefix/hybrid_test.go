package prefix

import (
	"testing"

	"github.com/infernix/infernix/engine/model"
)

type cfgModel struct {
	model.Model
	c *model.Config
}

func (m cfgModel) Config() *model.Config { return m.c }

func TestReusable(t *testing.T) {
	cases := []struct {
		name string
		c    *model.Config
		want bool
	}{
		{"dense", &model.Config{}, true},
		{"all full attention", &model.Config{LayerTypes: []string{"full_attention", "full_attention"}}, true},
		{"linear layers", &model.Config{LayerTypes: []string{"linear_attention", "full_attention"}}, false},
		{"attention interval", &model.Config{FullAttentionInterval: 4}, false},
		{"linear heads", &model.Config{LinearNumKeyHeads: 16}, false},
		{"nested text config", &model.Config{TextConfig: &model.Config{LayerTypes: []string{"linear_attention"}}}, false},
	}
	for _, c := range cases {
		if got := Reusable(cfgModel{c: c.c}); got != c.want {
			t.Errorf("%s: Reusable = %v", c.name, got)
		}
	}
}
