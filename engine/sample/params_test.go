package sample

import (
	"math"
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	nan := float32(math.NaN())
	cases := []struct {
		name string
		f    func(*Params)
		want string // substring of the error; "" = valid
	}{
		{"defaults", func(p *Params) {}, ""},
		{"greedy", func(p *Params) { p.Temperature = 0 }, ""},
		{"full", func(p *Params) {
			p.Temperature, p.TopK, p.TopP, p.MinP = 0.7, 20, 0.8, 0.05
			p.PresencePenalty, p.FrequencyPenalty, p.RepetitionPenalty = -2, 2, 1.1
			p.LogitBias = map[int32]float32{0: -100, 5: 100}
		}, ""},
		{"top_k -1", func(p *Params) { p.TopK = -1 }, ""},
		{"temperature negative", func(p *Params) { p.Temperature = -0.1 }, "temperature must be >= 0"},
		{"temperature nan", func(p *Params) { p.Temperature = nan }, "temperature"},
		{"temperature inf", func(p *Params) { p.Temperature = float32(math.Inf(1)) }, "temperature"},
		{"top_k -2", func(p *Params) { p.TopK = -2 }, "top_k"},
		{"top_p 0", func(p *Params) { p.TopP = 0 }, "top_p must be in (0, 1], got 0"},
		{"top_p above 1", func(p *Params) { p.TopP = 1.01 }, "top_p"},
		{"top_p nan", func(p *Params) { p.TopP = nan }, "top_p"},
		{"min_p negative", func(p *Params) { p.MinP = -0.1 }, "min_p must be in [0, 1]"},
		{"min_p above 1", func(p *Params) { p.MinP = 1.5 }, "min_p"},
		{"presence", func(p *Params) { p.PresencePenalty = 2.5 }, "presence_penalty must be in [-2, 2]"},
		{"frequency", func(p *Params) { p.FrequencyPenalty = -2.5 }, "frequency_penalty must be in [-2, 2]"},
		{"repetition 0", func(p *Params) { p.RepetitionPenalty = 0 }, "repetition_penalty must be > 0"},
		{"repetition negative", func(p *Params) { p.RepetitionPenalty = -1 }, "repetition_penalty"},
		{"bias id", func(p *Params) { p.LogitBias = map[int32]float32{-1: 1} }, "logit_bias token id must be >= 0"},
		{"bias value", func(p *Params) { p.LogitBias = map[int32]float32{3: 101} }, "logit_bias value for token 3 must be in [-100, 100]"},
		{"bias nan", func(p *Params) { p.LogitBias = map[int32]float32{3: nan} }, "logit_bias"},
		{"bias lowest bad id first", func(p *Params) { p.LogitBias = map[int32]float32{9: 200, 4: 200, 7: 200} }, "token 4 "},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := DefaultParams()
			c.f(&p)
			err := p.Validate()
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("unexpected error %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
		})
	}
	if err := (Params{}).Validate(); err == nil {
		t.Fatal("zero Params validated; top_p 0 must be rejected")
	}
}

func TestValidateVocab(t *testing.T) {
	p := DefaultParams()
	p.LogitBias = map[int32]float32{99: 1}
	if err := p.ValidateVocab(100); err != nil {
		t.Fatal(err)
	}
	err := p.ValidateVocab(99)
	if err == nil || !strings.Contains(err.Error(), "logit_bias token id 99 is out of vocabulary range [0, 99)") {
		t.Fatalf("got %v", err)
	}
	p.TopP = 2
	if err := p.ValidateVocab(1000); err == nil || !strings.Contains(err.Error(), "top_p") {
		t.Fatalf("got %v", err)
	}
}

// TestNewToleratesInvalid checks New's documented handling of parameters
// that did not go through Validate.
func TestNewToleratesInvalid(t *testing.T) {
	logits := []float32{1, 3, 2}
	cases := []struct {
		name string
		p    Params
		want int32
	}{
		// Zero Params: temperature 0 is greedy.
		{"zero", Params{}, 1},
		// top_p 0 keeps one token: the argmax.
		{"top_p 0", params(func(p *Params) { p.TopP = 0 }), 1},
		{"top_p negative", params(func(p *Params) { p.TopP = -1 }), 1},
		// min_p above 1 is capped: the argmax survives.
		{"min_p 5", params(func(p *Params) { p.MinP = 5 }), 1},
		// Non-positive repetition penalty is off.
		{"repetition 0", params(func(p *Params) { p.Temperature = 0; p.RepetitionPenalty = 0 }), 1},
		{"bias out of vocab", params(func(p *Params) { p.Temperature = 0; p.LogitBias = map[int32]float32{7: 9, -1: 9} }), 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := New(c.p, len(logits), []int32{1, -5, 99})
			for range 50 {
				if got := s.Sample(append([]float32(nil), logits...)); got != c.want {
					t.Fatalf("got %d, want %d", got, c.want)
				}
			}
		})
	}
}
