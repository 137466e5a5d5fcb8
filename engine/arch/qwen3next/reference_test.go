package qwen3next

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/infernix/infernix/engine/backend/cpu"
	"github.com/infernix/infernix/engine/model"
	"github.com/infernix/infernix/engine/model/reftest"
)

const fixtures = "../../../tests/testdata"

var hybridModels = []string{"qwen35-tiny", "qwen35moe-tiny", "qwen3next-tiny"}

// loadRef reads the fixture tests/reference/make_hybrid_fixtures.py wrote
// for the model name.
func loadRef(t testing.TB, name string) *reftest.Fixture {
	t.Helper()
	ref, err := reftest.Load(filepath.Join(fixtures, "reference", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	return ref
}

func loadModel(t testing.TB, name string, opt model.Options) *Model {
	t.Helper()
	dir := name
	if !strings.ContainsRune(name, os.PathSeparator) {
		dir = filepath.Join(fixtures, "models", name)
	}
	cfg, set := reftest.OpenCheckpoint(t, dir)
	build, err := model.Lookup(cfg.Arch())
	if err != nil {
		t.Fatal(err)
	}
	be := cpu.New(2)
	m, err := build(cfg, &model.FileWeights{Set: set, Be: be}, be, opt)
	if err != nil {
		t.Fatal(err)
	}
	return m.(*Model)
}

// seq drives one sequence through a model in a given slot.
type seq struct {
	m      *Model
	slot   int32
	blocks []int32
}

// run feeds tokens at positions start.. and returns the logits of each.
func (s *seq) run(t testing.TB, tokens []int32, start int) [][]float32 {
	t.Helper()
	b := reftest.Batch(s.blocks, tokens, start)
	b.Attn.Slots = []int32{s.slot}
	return reftest.Run(t, s.m, b)
}

// runChunks feeds tokens from position 0 in pieces of the given sizes (the
// last repeated), returning every row.
func (s *seq) runChunks(t testing.TB, tokens []int32, sizes ...int) [][]float32 {
	var rows [][]float32
	for pos, i := 0, 0; pos < len(tokens); i++ {
		n := min(sizes[min(i, len(sizes)-1)], len(tokens)-pos)
		rows = append(rows, s.run(t, tokens[pos:pos+n], pos)...)
		pos += n
	}
	return rows
}

// TestReference compares each hybrid fixture with transformers' float64
// log-probs: one prefill, the cached token-by-token decode of the second half
// (top_decode), and the greedy continuation.
func TestReference(t *testing.T) {
	for _, name := range hybridModels {
		t.Run(name, func(t *testing.T) {
			ref := loadRef(t, name)
			m := loadModel(t, name, model.Options{KVBlocks: 8, MaxBatchTokens: 256})
			if m.cfg.Arch() != ref.Arch {
				t.Fatalf("arch %s, reference %s", m.cfg.Arch(), ref.Arch)
			}
			for pi, p := range ref.Prompts {
				s := &seq{m: m, slot: 3, blocks: reftest.Blocks(8)}
				rows := s.run(t, p.Tokens, 0)
				if d := reftest.MaxTopDiff(rows, p.Top); d > 1e-3 {
					t.Errorf("prompt %d (%d tokens): prefill max |Δ log-prob| = %.2e > 1e-3", pi, len(p.Tokens), d)
				} else {
					t.Logf("prompt %d (%d tokens): prefill max |Δ log-prob| = %.2e", pi, len(p.Tokens), d)
				}
				// Cached decode: prefill the first half, then one token at a time.
				s.slot = 1
				dec := s.run(t, p.Tokens[:p.DecodeStart], 0)[:0]
				for i := p.DecodeStart; i < len(p.Tokens); i++ {
					dec = append(dec, s.run(t, p.Tokens[i:i+1], i)[0])
				}
				if d := reftest.MaxTopDiff(dec, p.TopDecode); d > 1e-3 {
					t.Errorf("prompt %d: decode max |Δ log-prob| = %.2e > 1e-3", pi, d)
				}
				// Greedy continuation through the state and the cache.
				seqT := append([]int32(nil), p.Tokens...)
				next := reftest.Argmax(rows[len(rows)-1])
				s.slot = 3
				s.run(t, p.Tokens, 0)
				for step, want := range p.Greedy {
					if next != want {
						if p.GreedyMargin[step] < 1e-4 {
							t.Logf("prompt %d step %d: near-tie (margin %.1e)", pi, step, p.GreedyMargin[step])
							break
						}
						t.Fatalf("prompt %d: greedy step %d: got %d, reference %d (margin %.3g)", pi, step, next, want, p.GreedyMargin[step])
					}
					seqT = append(seqT, next)
					next = reftest.Argmax(s.run(t, seqT[len(seqT)-1:], len(seqT)-1)[0])
				}
			}
		})
	}
}
