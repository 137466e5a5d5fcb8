package qwen3next

import (
	"testing"

	"github.com/infernix/infernix/engine/model"
)

// TestSnapshotRestore: snapshot a slot after pos tokens, let another sequence
// clobber the slot, restore into a different slot and continue: the logits
// must be exactly those of never having snapshotted. Positions include the
// first token, mid-chunk and chunk boundaries.
func TestSnapshotRestore(t *testing.T) {
	for _, name := range hybridModels {
		t.Run(name, func(t *testing.T) {
			ref := loadRef(t, name)
			toks := ref.Prompts[2].Tokens
			other := ref.Prompts[1].Tokens
			m := loadModel(t, name, model.Options{KVBlocks: 16, MaxBatchTokens: 256})
			blocks := []int32{4, 9, 1, 14}
			base := &seq{m: m, slot: 0, blocks: blocks}
			want := base.run(t, toks, 0)
			for _, pos := range []int{1, 37, 64, 100, 129, 199} {
				s := &seq{m: m, slot: 1, blocks: blocks}
				s.runChunks(t, toks[:pos], 50)
				snap, err := m.Snapshot(1, pos)
				if err != nil {
					t.Fatal(err)
				}
				// Clobber slots 1 and 2 with another sequence (other blocks).
				for _, slot := range []int32{1, 2} {
					(&seq{m: m, slot: slot, blocks: []int32{2, 3, 5, 6}}).run(t, other[:77], 0)
				}
				got, err := m.Restore(2, snap)
				if err != nil {
					t.Fatal(err)
				}
				if got != pos {
					t.Fatalf("restored position %d, snapshot of %d", got, pos)
				}
				s.slot = 2
				var rest [][]float32
				for p := pos; p < len(toks); {
					n := min(len(toks)-p, 70)
					rest = append(rest, s.run(t, toks[p:p+n], p)...)
					p += n
				}
				// Chunk boundaries differ from the one-shot run, so compare
				// against a run with the same split, never snapshotted.
				base.runChunks(t, toks[:pos], 50)
				var direct [][]float32
				for p := pos; p < len(toks); {
					n := min(len(toks)-p, 70)
					direct = append(direct, base.run(t, toks[p:p+n], p)...)
					p += n
				}
				for i := range direct {
					for j := range direct[i] {
						if direct[i][j] != rest[i][j] {
							t.Fatalf("pos %d: row %d differs after restore (%g vs %g)", pos, i, rest[i][j], direct[i][j])
						}
					}
				}
				if d := maxAbsDiff(want[pos:], rest); d > 1e-4 {
					t.Errorf("pos %d: continuation differs from one prefill by %.2e", pos, d)
				}
			}
		})
	}
}
