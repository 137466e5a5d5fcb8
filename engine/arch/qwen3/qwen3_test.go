package qwen3

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/infernix/infernix/engine/backend/cpu"
	"github.com/infernix/infernix/engine/model"
	"github.com/infernix/infernix/engine/model/reftest"
)

const fixtures = "../../../tests/testdata"

func loadModel(t testing.TB, dir string, blocks int) model.Model {
	t.Helper()
	cfg, set := reftest.OpenCheckpoint(t, dir)
	build, err := model.Lookup(cfg.Arch())
	if err != nil {
		t.Fatal(err)
	}
	m, err := build(cfg, &model.FileWeights{Set: set, Be: cpu.New(0)}, cpu.New(0), model.Options{KVBlocks: blocks, MaxBatchTokens: 256})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestReference compares every committed fixture with transformers' float64
// log-probs: top-10 at every position within 1e-3, the same greedy
// continuation, and token-by-token decode equal to one prefill.
func TestReference(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(fixtures, "reference", "*.json"))
	if len(files) == 0 {
		t.Skip("no reference fixtures in tests/testdata/reference (generate with tests/reference/make_fixtures.py)")
	}
	ran := 0
	for _, f := range files {
		ref, err := reftest.Load(f)
		if err != nil {
			t.Fatal(err)
		}
		if ref.Arch != "Qwen3ForCausalLM" && ref.Arch != "Qwen3MoeForCausalLM" {
			continue
		}
		ran++
		t.Run(ref.Model, func(t *testing.T) {
			m := loadModel(t, filepath.Join(fixtures, "models", ref.Model), 8)
			for pi, p := range ref.Prompts {
				rows := reftest.Forward(t, m, reftest.Blocks(8), p.Tokens, 0)
				worst := reftest.MaxTopDiff(rows, p.Top)
				if worst > 1e-3 {
					t.Errorf("prompt %d: max |Δ log-prob| over top-10 = %.2e > 1e-3", pi, worst)
				}
				t.Logf("prompt %d (%d tokens): max |Δ log-prob| = %.2e", pi, len(p.Tokens), worst)
				// The same prompt one token at a time through the paged cache
				// must give the same distributions as the single prefill.
				blocksTBT := reftest.Blocks(8)
				for pos := range p.Tokens {
					lp := reftest.LogSoftmax(reftest.Forward(t, m, blocksTBT, p.Tokens[pos:pos+1], pos)[0])
					for _, pair := range p.Top[pos] {
						if d := math.Abs(lp[int(pair[0])] - pair[1]); d > 1e-3 {
							t.Fatalf("prompt %d position %d: token-by-token decode differs from the reference by %.2e", pi, pos, d)
						}
					}
				}
				// Greedy continuation through the cache, one token at a time.
				blocks := reftest.Blocks(8)
				seq := append([]int32(nil), p.Tokens...)
				last := reftest.Forward(t, m, blocks, seq, 0)
				next := reftest.Argmax(last[len(last)-1])
				for step, want := range p.Greedy {
					if next != want {
						if p.GreedyMargin[step] < 1e-4 {
							t.Logf("prompt %d step %d: near-tie (margin %.1e): got %d, reference %d", pi, step, p.GreedyMargin[step], next, want)
							break
						}
						t.Fatalf("prompt %d: greedy step %d: got %d, reference %d (margin %.3g)", pi, step, next, want, p.GreedyMargin[step])
					}
					seq = append(seq, next)
					r := reftest.Forward(t, m, blocks, seq[len(seq)-1:], len(seq)-1)
					next = reftest.Argmax(r[0])
				}
			}
		})
	}
	if ran == 0 {
		t.Skip("no Qwen3 fixtures")
	}
}
