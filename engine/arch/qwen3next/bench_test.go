package qwen3next

import (
	"testing"
)

// BenchmarkDecode measures single-sequence decode tok/s of a small synthetic
// Qwen3.5-MoE-shaped hybrid (8 layers, 2 of them full attention).
func BenchmarkDecode(b *testing.B) {
	m := syntheticModel(b, "Qwen3_5MoeForCausalLM", 8)
	s := &seq{m: m, blocks: []int32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}}
	s.run(b, make([]int32, 32), 0)
	pos := 32
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if pos == 1000 {
			s.run(b, make([]int32, 32), 0)
			pos = 32
		}
		s.run(b, []int32{int32(i % 1000)}, pos)
		pos++
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tok/s")
}

// BenchmarkPrefill compares chunked and recurrent Gated DeltaNet prefill of
// 256 tokens through the same synthetic model.
func BenchmarkPrefill(b *testing.B) {
	m := syntheticModel(b, "Qwen3_5ForCausalLM", 8)
	toks := make([]int32, 256)
	for _, chunk := range []int{0, Chunk} {
		name := "recurrent"
		if chunk > 0 {
			name = "chunked64"
		}
		b.Run(name, func(b *testing.B) {
			m.spec.Chunk = chunk
			s := &seq{m: m, blocks: []int32{0, 1, 2, 3}}
			for i := 0; i < b.N; i++ {
				s.run(b, toks, 0)
			}
			b.ReportMetric(float64(len(toks)*b.N)/b.Elapsed().Seconds(), "tok/s")
		})
	}
}
