package sample

import (
	"math/rand/v2"
	"testing"
)

// qwenVocab is Qwen3's logits width.
const qwenVocab = 151936

// BenchmarkSample measures one token's sampling over Qwen3's vocabulary.
// Sample overwrites its input, so each iteration first restores the logits;
// the "copy" case measures that restore alone, to subtract.
func BenchmarkSample(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	logits := randLogits(r, qwenVocab, true)
	buf := make([]float32, qwenVocab)
	prompt := make([]int32, 2000)
	for i := range prompt {
		prompt[i] = int32(r.IntN(qwenVocab))
	}
	b.Run("copy", func(b *testing.B) {
		for b.Loop() {
			copy(buf, logits)
		}
	})
	cases := []struct {
		name string
		p    Params
	}{
		{"greedy", params(func(p *Params) { p.Temperature = 0 })},
		{"topk20_topp0.8", params(func(p *Params) { p.Temperature = 0.7; p.TopK = 20; p.TopP = 0.8 })},
		{"topk20_topp0.95_minp", params(func(p *Params) { p.Temperature = 0.6; p.TopK = 20; p.TopP = 0.95; p.MinP = 0.05 })},
		{"topk50_penalties", params(func(p *Params) {
			p.TopK = 50
			p.RepetitionPenalty = 1.05
			p.PresencePenalty = 0.5
			p.FrequencyPenalty = 0.3
		})},
		{"temperature_only", params(func(p *Params) { p.Temperature = 0.8 })},
		{"topp0.95", params(func(p *Params) { p.Temperature = 0.7; p.TopP = 0.95 })},
		{"topk1000_topp0.9", params(func(p *Params) { p.TopK = 1000; p.TopP = 0.9 })},
		{"minp0.05", params(func(p *Params) { p.MinP = 0.05 })},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			s := New(c.p, qwenVocab, prompt)
			for i := range 500 { // a generated history for the penalties
				s.Accept(int32(r.IntN(qwenVocab)) * int32(i%2))
			}
			for b.Loop() {
				copy(buf, logits)
				s.Sample(buf)
			}
		})
	}
	b.Run("logprobs_top5", func(b *testing.B) {
		var top []TokenLogProb
		for b.Loop() {
			top = TopLogProbs(logits, 5, top)
		}
	})
}
