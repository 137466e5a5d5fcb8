package qwen3next

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/infernix/infernix/engine/backend"
	"github.com/infernix/infernix/engine/backend/cpu"
	"github.com/infernix/infernix/engine/model"
	"github.com/infernix/infernix/engine/safetensors"
)

const fixtures = "../../../tests/testdata"

var hybridModels = []string{"qwen35-tiny", "qwen35moe-tiny", "qwen3next-tiny"}

// reference is the format written by tests/reference/make_hybrid_fixtures.py.
type reference struct {
	Model   string `json:"model"`
	Arch    string `json:"arch"`
	Prompts []struct {
		Tokens       []int32        `json:"tokens"`
		Top          [][][2]float64 `json:"top"`
		Greedy       []int32        `json:"greedy"`
		GreedyMargin []float64      `json:"greedy_margin"`
		DecodeStart  int            `json:"decode_start"`
		TopDecode    [][][2]float64 `json:"top_decode"`
	} `json:"prompts"`
}

func loadRef(t testing.TB, name string) *reference {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(fixtures, "reference", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var ref reference
	if err := json.Unmarshal(data, &ref); err != nil {
		t.Fatal(err)
	}
	return &ref
}

func loadModel(t testing.TB, name string, opt model.Options) *Model {
	t.Helper()
	dir := name
	if !strings.ContainsRune(name, os.PathSeparator) {
		dir = filepath.Join(fixtures, "models", name)
	}
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
	b := &model.Batch{Tokens: tokens, Attn: backend.AttnBatch{Blocks: [][]int32{s.blocks}, Slots: []int32{s.slot}}}
	for i := range tokens {
		b.Attn.Seq = append(b.Attn.Seq, 0)
		b.Attn.Pos = append(b.Attn.Pos, int32(start+i))
		b.Outputs = append(b.Outputs, int32(i))
	}
	V := s.m.cfg.VocabSize
	dst := make([]float32, len(tokens)*V)
	if err := s.m.Forward(b, dst); err != nil {
		t.Fatal(err)
	}
	rows := make([][]float32, len(tokens))
	for i := range rows {
		rows[i] = dst[i*V : (i+1)*V]
	}
	return rows
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

// topDiff is the largest |Δ log-prob| over the reference's top-10 pairs.
func topDiff(rows [][]float32, top [][][2]float64) float64 {
	var worst float64
	for pos, pairs := range top {
		lp := logSoftmax(rows[pos])
		for _, p := range pairs {
			worst = math.Max(worst, math.Abs(lp[int(p[0])]-p[1]))
		}
	}
	return worst
}

func blocksFor(n int) []int32 {
	b := make([]int32, n)
	for i := range b {
		b[i] = int32(n - 1 - i) // scrambled on purpose: block tables are indirections
	}
	return b
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
				s := &seq{m: m, slot: 3, blocks: blocksFor(8)}
				rows := s.run(t, p.Tokens, 0)
				if d := topDiff(rows, p.Top); d > 1e-3 {
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
				if d := topDiff(dec, p.TopDecode); d > 1e-3 {
					t.Errorf("prompt %d: decode max |Δ log-prob| = %.2e > 1e-3", pi, d)
				}
				// Greedy continuation through the state and the cache.
				seqT := append([]int32(nil), p.Tokens...)
				next := argmax(rows[len(rows)-1])
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
					next = argmax(s.run(t, seqT[len(seqT)-1:], len(seqT)-1)[0])
				}
			}
		})
	}
}
