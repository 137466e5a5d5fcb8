package qwen3

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/infernix/infernix/engine/backend"
	"github.com/infernix/infernix/engine/backend/cpu"
	"github.com/infernix/infernix/engine/model"
	"github.com/infernix/infernix/engine/safetensors"
)

const fixtures = "../../../tests/testdata"

// reference is the format written by tests/reference/make_fixtures.py.
type reference struct {
	Model   string `json:"model"`
	Arch    string `json:"arch"`
	Prompts []struct {
		Tokens       []int32        `json:"tokens"`
		Top          [][][2]float64 `json:"top"`
		NextLogprob  []float64      `json:"next_logprob"`
		Greedy       []int32        `json:"greedy"`
		GreedyMargin []float64      `json:"greedy_margin"`
	} `json:"prompts"`
}

func loadModel(t testing.TB, dir string, blocks int) model.Model {
	t.Helper()
	cfg, err := model.LoadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	set, err := safetensors.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { set.Close() })
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

// forward runs tokens as one sequence starting at position start, asking for
// logits of every token.
func forward(t testing.TB, m model.Model, blocks []int32, tokens []int32, start int) [][]float32 {
	t.Helper()
	b := &model.Batch{Tokens: tokens, Attn: backend.AttnBatch{Blocks: [][]int32{blocks}}}
	for i := range tokens {
		b.Attn.Seq = append(b.Attn.Seq, 0)
		b.Attn.Pos = append(b.Attn.Pos, int32(start+i))
		b.Outputs = append(b.Outputs, int32(i))
	}
	V := m.Config().VocabSize
	dst := make([]float32, len(tokens)*V)
	if err := m.Forward(b, dst); err != nil {
		t.Fatal(err)
	}
	rows := make([][]float32, len(tokens))
	for i := range rows {
		rows[i] = dst[i*V : (i+1)*V]
	}
	return rows
}

func logSoftmax(x []float32) []float64 {
	maxV := math.Inf(-1)
	for _, v := range x {
		maxV = math.Max(maxV, float64(v))
	}
	var sum float64
	for _, v := range x {
		sum += math.Exp(float64(v) - maxV)
	}
	lse := maxV + math.Log(sum)
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v) - lse
	}
	return out
}

func argmax(x []float32) int32 {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return int32(best)
}

func seqBlocks(n int) []int32 {
	b := make([]int32, n)
	for i := range b {
		b[i] = int32(n - 1 - i) // scrambled on purpose: block tables are indirections
	}
	return b
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
		var ref reference
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(data, &ref); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if ref.Arch != "Qwen3ForCausalLM" && ref.Arch != "Qwen3MoeForCausalLM" {
			continue
		}
		ran++
		t.Run(ref.Model, func(t *testing.T) {
			m := loadModel(t, filepath.Join(fixtures, "models", ref.Model), 8)
			for pi, p := range ref.Prompts {
				rows := forward(t, m, seqBlocks(8), p.Tokens, 0)
				var worst float64
				for pos, top := range p.Top {
					lp := logSoftmax(rows[pos])
					for _, pair := range top {
						d := math.Abs(lp[int(pair[0])] - pair[1])
						worst = math.Max(worst, d)
					}
				}
				if worst > 1e-3 {
					t.Errorf("prompt %d: max |Δ log-prob| over top-10 = %.2e > 1e-3", pi, worst)
				}
				t.Logf("prompt %d (%d tokens): max |Δ log-prob| = %.2e", pi, len(p.Tokens), worst)
				// The same prompt one token at a time through the paged cache
				// must give the same distributions as the single prefill.
				blocksTBT := seqBlocks(8)
				for pos := range p.Tokens {
					lp := logSoftmax(forward(t, m, blocksTBT, p.Tokens[pos:pos+1], pos)[0])
					for _, pair := range p.Top[pos] {
						if d := math.Abs(lp[int(pair[0])] - pair[1]); d > 1e-3 {
							t.Fatalf("prompt %d position %d: token-by-token decode differs from the reference by %.2e", pi, pos, d)
						}
					}
				}
				// Greedy continuation through the cache, one token at a time.
				blocks := seqBlocks(8)
				seq := append([]int32(nil), p.Tokens...)
				last := forward(t, m, blocks, seq, 0)
				next := argmax(last[len(last)-1])
				for step, want := range p.Greedy {
					if next != want {
						if p.GreedyMargin[step] < 1e-4 {
							t.Logf("prompt %d step %d: near-tie (margin %.1e): got %d, reference %d", pi, step, p.GreedyMargin[step], next, want)
							break
						}
						t.Fatalf("prompt %d: greedy step %d: got %d, reference %d (margin %.3g)", pi, step, next, want, p.GreedyMargin[step])
					}
					seq = append(seq, next)
					r := forward(t, m, blocks, seq[len(seq)-1:], len(seq)-1)
					next = argmax(r[0])
				}
			}
		})
	}
	if ran == 0 {
		t.Skip("no Qwen3 fixtures")
	}
}
