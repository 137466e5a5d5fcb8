package server

import (
	"github.com/infernix/infernix/engine/sample"
)

// samplingParams starts from the checkpoint's generation_config (as vLLM
// does by default) and applies the request's overrides.
func (s *Server) samplingParams(g *genParams) sample.Params {
	p := sample.DefaultParams()
	if gc := s.eng.Gen; gc != nil {
		if gc.Temperature != nil {
			p.Temperature = float32(*gc.Temperature)
		}
		if gc.TopP != nil {
			p.TopP = float32(*gc.TopP)
		}
		if gc.TopK != nil {
			p.TopK = *gc.TopK
		}
		if gc.MinP != nil {
			p.MinP = float32(*gc.MinP)
		}
		if gc.RepetitionPenalty != nil {
			p.RepetitionPenalty = float32(*gc.RepetitionPenalty)
		}
		if gc.DoSample != nil && !*gc.DoSample {
			p.Temperature = 0
		}
	}
	set := func(dst *float32, v *float64) {
		if v != nil {
			*dst = float32(*v)
		}
	}
	set(&p.Temperature, g.temperature)
	set(&p.TopP, g.topP)
	set(&p.MinP, g.minP)
	set(&p.PresencePenalty, g.presencePenalty)
	set(&p.FrequencyPenalty, g.frequencyPenalty)
	set(&p.RepetitionPenalty, g.repetitionPenalty)
	if g.topK != nil {
		p.TopK = *g.topK
	}
	p.LogitBias = g.logitBias
	p.Seed = g.seed
	return p
}

// maxTokensFor resolves max_tokens: what the request asked, or all the
// context the prompt leaves (at least 1, so that a prompt filling the whole
// context gets the scheduler's "prompt + max_tokens" error).
func (s *Server) maxTokensFor(asked, promptLen int) int {
	if asked >= 0 {
		return asked
	}
	return max(s.ctxLen-promptLen, 1)
}
