package qwen3

import (
	"testing"

	"github.com/infernix/infernix/engine/backend/cpu"
	"github.com/infernix/infernix/engine/model"
	"github.com/infernix/infernix/engine/model/reftest"
)

// BenchmarkDecode06B: one decode step of a Qwen3-0.6B-shaped model with
// synthetic BF16 weights at context 128 (the CPU roofline case; see
// `infernix bench` for the ratio to measured memory bandwidth).
func BenchmarkDecode06B(b *testing.B) {
	cfg, err := model.LoadConfig("../../../tests/testdata/configs/qwen3-0.6b")
	if err != nil {
		b.Fatal(err)
	}
	be := cpu.New(0)
	m, err := New(cfg, &model.SyntheticWeights{Be: be, Seed: 1}, be, model.Options{KVBlocks: 4, MaxBatchTokens: 128})
	if err != nil {
		b.Fatal(err)
	}
	blocks := reftest.Blocks(4)
	prompt := make([]int32, 128)
	reftest.Forward(b, m, blocks, prompt, 0)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		reftest.Forward(b, m, blocks, []int32{int32(i % 1000)}, 128+i%64)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tok/s")
}
