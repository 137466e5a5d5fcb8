package qwen3next

import (
	"math"
	"testing"

	"github.com/infernix/infernix/engine/backend"
	"github.com/infernix/infernix/engine/model"
	"github.com/infernix/infernix/engine/model/reftest"
)

func maxAbsDiff(a, b [][]float32) float64 {
	var worst float64
	for i := range a {
		for j := range a[i] {
			worst = math.Max(worst, math.Abs(float64(a[i][j]-b[i][j])))
		}
	}
	return worst
}

// TestChunkingInvariance: one prefill == token-by-token decode == uneven
// chunks (crossing the 64-token chunk boundaries at odd places).
func TestChunkingInvariance(t *testing.T) {
	for _, name := range hybridModels {
		t.Run(name, func(t *testing.T) {
			ref := loadRef(t, name)
			p := ref.Prompts[len(ref.Prompts)-1]
			m := loadModel(t, name, model.Options{KVBlocks: 8, MaxBatchTokens: 256})
			s := &seq{m: m, slot: 0, blocks: reftest.Blocks(8)}
			whole := s.run(t, p.Tokens, 0)
			for _, sizes := range [][]int{{1}, {7, 64, 1, 33, 100}, {63, 2, 65}} {
				got := s.runChunks(t, p.Tokens, sizes...)
				if d := maxAbsDiff(whole, got); d > 1e-4 {
					t.Errorf("chunks %v: max |Δ logit| vs one prefill = %.2e", sizes, d)
				}
				if d := reftest.MaxTopDiff(got, p.Top); d > 1e-3 {
					t.Errorf("chunks %v: max |Δ log-prob| vs reference = %.2e", sizes, d)
				}
			}
		})
	}
}

// TestMixedBatch runs a decode lane and a prefill lane of two sequences in
// one Forward (different slots and block tables) and checks each against
// running it alone.
func TestMixedBatch(t *testing.T) {
	ref := loadRef(t, "qwen35moe-tiny")
	a, b := ref.Prompts[1].Tokens, ref.Prompts[2].Tokens
	m := loadModel(t, "qwen35moe-tiny", model.Options{KVBlocks: 16, MaxBatchTokens: 256})
	blocksA := []int32{9, 3, 12, 0}
	blocksB := []int32{1, 15, 7, 4}
	sa := &seq{m: m, slot: 5, blocks: blocksA}
	sb := &seq{m: m, slot: 2, blocks: blocksB}
	aloneA := sa.run(t, a[:100], 0)
	aloneA = append(aloneA, sa.run(t, a[100:101], 100)...)
	aloneB := sb.run(t, b[:90], 0)

	// Now again, with A's decode step and B's prefill in one batch.
	sa.run(t, a[:100], 0)
	batch := &model.Batch{Attn: backend.AttnBatch{Blocks: [][]int32{blocksB, blocksA}, Slots: []int32{2, 5}}}
	for i := 0; i < 90; i++ {
		batch.Tokens = append(batch.Tokens, b[i])
		batch.Attn.Seq = append(batch.Attn.Seq, 0)
		batch.Attn.Pos = append(batch.Attn.Pos, int32(i))
	}
	batch.Tokens = append(batch.Tokens, a[100])
	batch.Attn.Seq = append(batch.Attn.Seq, 1)
	batch.Attn.Pos = append(batch.Attn.Pos, 100)
	batch.Outputs = []int32{89, 90}
	V := m.cfg.VocabSize
	dst := make([]float32, 2*V)
	if err := m.Forward(batch, dst); err != nil {
		t.Fatal(err)
	}
	if d := maxAbsDiff([][]float32{dst[:V]}, aloneB[89:90]); d > 1e-4 {
		t.Errorf("prefill lane differs from running alone by %.2e", d)
	}
	if d := maxAbsDiff([][]float32{dst[V:]}, aloneA[100:101]); d > 1e-4 {
		t.Errorf("decode lane differs from running alone by %.2e", d)
	}
}

// TestForwardErrors: malformed batches are refused, not panics.
func TestForwardErrors(t *testing.T) {
	m := loadModel(t, "qwen35-tiny", model.Options{KVBlocks: 4, MaxBatchTokens: 32})
	V := m.cfg.VocabSize
	ok := func() *model.Batch {
		return &model.Batch{Tokens: []int32{1, 2}, Outputs: []int32{1},
			Attn: backend.AttnBatch{Seq: []int32{0, 0}, Pos: []int32{0, 1}, Blocks: [][]int32{{0}}}}
	}
	if err := m.Forward(ok(), make([]float32, V)); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Snapshot(0, 1); err == nil {
		t.Error("Snapshot at a position the slot does not hold: no error")
	}
	if _, err := m.Snapshot(0, 2); err != nil {
		t.Error(err)
	}
	m.ReleaseSlot(0)
	cases := map[string]func(b *model.Batch){
		"slot out of range": func(b *model.Batch) { b.Attn.Slots = []int32{int32(m.StateSlots())} },
		"bad token":         func(b *model.Batch) { b.Tokens[0] = int32(V) },
		"position":          func(b *model.Batch) { b.Attn.Pos[1] = 1 << 20 },
		"sequence":          func(b *model.Batch) { b.Attn.Seq[1] = 1 },
		"output row":        func(b *model.Batch) { b.Outputs[0] = 2 },
		"too many tokens":   func(b *model.Batch) { b.Tokens = make([]int32, 33) },
		"gap in positions":  func(b *model.Batch) { b.Attn.Pos[1] = 2 },
		"state mismatch":    func(b *model.Batch) { b.Attn.Pos = []int32{5, 6} },
		"shared slot": func(b *model.Batch) {
			b.Attn.Seq[1] = 1
			b.Attn.Blocks = append(b.Attn.Blocks, []int32{1})
			b.Attn.Slots = []int32{0, 0}
		},
	}
	for name, mut := range cases {
		b := ok()
		mut(b)
		if err := m.Forward(b, make([]float32, V)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
