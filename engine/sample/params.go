package sample

import (
	"fmt"
	"math"
)

// GreedyBelow is the temperature under which sampling is greedy (argmax).
const GreedyBelow = 1e-5

// MaxLogitBias is the largest |bias| Validate accepts, as in the OpenAI API.
const MaxLogitBias = 100

// Params are one request's sampling parameters. Field names in errors are
// the OpenAI/vLLM JSON names. The zero value is not valid (TopP and
// RepetitionPenalty are 0); start from DefaultParams.
type Params struct {
	// Temperature divides the logits; below GreedyBelow (0 included) the
	// sampler is greedy and TopK, TopP, MinP and Seed have no effect.
	Temperature float32
	// TopK keeps the k most likely tokens (and any tied with the k-th);
	// 0 or -1 (vLLM's spelling) disables it, as does k >= vocabulary size.
	TopK int
	// TopP keeps the smallest most-likely set of tokens whose probability
	// sums to at least TopP; 1 disables it. Must be in (0, 1].
	TopP float32
	// MinP drops tokens less likely than MinP times the most likely one;
	// 0 disables it. Must be in [0, 1].
	MinP float32
	// PresencePenalty is subtracted once from the logit of every token
	// generated so far; FrequencyPenalty once per occurrence. Both in
	// [-2, 2]; 0 disables.
	PresencePenalty, FrequencyPenalty float32
	// RepetitionPenalty (> 0) divides the positive logits, and multiplies
	// the others, of every token seen in the prompt or generated so far;
	// 1 disables it.
	RepetitionPenalty float32
	// LogitBias is added to the logits of the given token ids, each value
	// in [-100, 100].
	LogitBias map[int32]float32
	// Seed, when set, makes the draws reproducible: the same seed, logits
	// and parameters give the same tokens. Nil draws a random seed.
	Seed *uint64
}

// DefaultParams returns the OpenAI defaults: temperature 1, everything
// else off.
func DefaultParams() Params {
	return Params{Temperature: 1, TopP: 1, RepetitionPenalty: 1}
}

// Validate reports the first parameter out of range, naming it by its API
// field name, e.g. "top_p must be in (0, 1], got 0".
func (p Params) Validate() error {
	switch {
	case !finite(p.Temperature) || p.Temperature < 0:
		return fmt.Errorf("temperature must be >= 0, got %v", p.Temperature)
	case p.TopK < -1:
		return fmt.Errorf("top_k must be -1 or 0 (disabled) or positive, got %d", p.TopK)
	case !(p.TopP > 0 && p.TopP <= 1): // also rejects NaN
		return fmt.Errorf("top_p must be in (0, 1], got %v", p.TopP)
	case !(p.MinP >= 0 && p.MinP <= 1):
		return fmt.Errorf("min_p must be in [0, 1], got %v", p.MinP)
	case !(p.PresencePenalty >= -2 && p.PresencePenalty <= 2):
		return fmt.Errorf("presence_penalty must be in [-2, 2], got %v", p.PresencePenalty)
	case !(p.FrequencyPenalty >= -2 && p.FrequencyPenalty <= 2):
		return fmt.Errorf("frequency_penalty must be in [-2, 2], got %v", p.FrequencyPenalty)
	case !finite(p.RepetitionPenalty) || p.RepetitionPenalty <= 0:
		return fmt.Errorf("repetition_penalty must be > 0, got %v", p.RepetitionPenalty)
	}
	// Report the lowest offending id, so the message does not depend on
	// map order.
	bad, found := int32(0), false
	for id, b := range p.LogitBias {
		if (id < 0 || !(b >= -MaxLogitBias && b <= MaxLogitBias)) && (!found || id < bad) {
			bad, found = id, true
		}
	}
	switch {
	case !found:
		return nil
	case bad < 0:
		return fmt.Errorf("logit_bias token id must be >= 0, got %d", bad)
	}
	return fmt.Errorf("logit_bias value for token %d must be in [-100, 100], got %v", bad, p.LogitBias[bad])
}

// ValidateVocab is Validate plus a check that every logit_bias token id is
// below vocabSize.
func (p Params) ValidateVocab(vocabSize int) error {
	if err := p.Validate(); err != nil {
		return err
	}
	bad := int32(-1)
	for id := range p.LogitBias {
		if int(id) >= vocabSize && (bad < 0 || id < bad) {
			bad = id
		}
	}
	if bad >= 0 {
		return fmt.Errorf("logit_bias token id %d is out of vocabulary range [0, %d)", bad, vocabSize)
	}
	return nil
}

// IsGreedy reports whether p selects the argmax rather than sampling. Top-k
// 1 is not greedy: like HF and vLLM it keeps every token tied for the top.
func (p Params) IsGreedy() bool { return p.Temperature < GreedyBelow }

func finite(f float32) bool { return !math.IsNaN(float64(f)) && !math.IsInf(float64(f), 0) }
