package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/infernix/infernix/engine/backend"
)

// TestAttentionRoundingProbs checks the CUDA tests' hook: with no rounding
// it is Attention bit for bit; a rounding of the probabilities moves the
// output by about that rounding's relative size, and only then.
func TestAttentionRoundingProbs(t *testing.T) {
	b := New(2)
	r := rand.New(rand.NewPCG(1, 2))
	const T, kvh, hd, heads = 20, 2, 8, 4
	fill := func(rows, cols int) backend.Tensor {
		x := b.Alloc(rows, cols)
		for i, d := 0, x.(*Tensor).F32(); i < len(d); i++ {
			d[i] = r.Float32()*2 - 1
		}
		return x
	}
	q, k, v := fill(T, heads*hd), fill(T, kvh*hd), fill(T, kvh*hd)
	ab := &backend.AttnBatch{Blocks: [][]int32{{0}}}
	for p := 0; p < T; p++ {
		ab.Seq, ab.Pos = append(ab.Seq, 0), append(ab.Pos, int32(p))
	}
	run := func(round func(float32) float32) []float32 {
		c, err := b.NewKVCache(backend.KVSpec{Layers: 1, Blocks: 1, KVHeads: kvh, HeadDim: hd})
		if err != nil {
			t.Fatal(err)
		}
		out := b.Alloc(T, heads*hd)
		b.AttentionRoundingProbs(round, out, q, k, v, c, 0, ab, 0.5)
		return out.(*Tensor).F32()
	}
	ref := run(nil)
	same := run(func(x float32) float32 { return x })
	for i := range ref {
		if math.Float32bits(ref[i]) != math.Float32bits(same[i]) {
			t.Fatalf("identity rounding: element %d %v, Attention %v", i, same[i], ref[i])
		}
	}
	// Truncate to bf16's 7 mantissa bits: each weight moves by less than
	// 2^-7 of itself, so the output by less than 2^-7 · Σ w|v| ≤ 2^-7 (|v| ≤ 1).
	bf := func(x float32) float32 { return math.Float32frombits(math.Float32bits(x) &^ 0xffff) }
	got := run(bf)
	var moved, worst float64
	for i := range ref {
		d := math.Abs(float64(got[i] - ref[i]))
		moved += d
		worst = math.Max(worst, d)
	}
	if moved == 0 || worst > 1.0/128 {
		t.Fatalf("bf16 probabilities: total move %.3g, largest %.3g (want > 0, < 2^-7)", moved, worst)
	}
}
