// Package reftest holds what the architecture and backend tests share to
// compare a model with a reference: reading the fixtures that
// tests/reference/make_fixtures.py (and make_hybrid_fixtures.py,
// tests/device/hf_compare.py) write, running one sequence through a model,
// and the log-prob arithmetic of the comparisons.
//
// It is test support: only _test.go files import it.
package reftest

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"testing"

	"github.com/infernix/infernix/engine/backend"
	"github.com/infernix/infernix/engine/model"
	"github.com/infernix/infernix/engine/safetensors"
)

// Fixture is a reference file: transformers' log-probs for a few prompts of
// one checkpoint.
type Fixture struct {
	Model   string   `json:"model"`
	Arch    string   `json:"arch"`
	Prompts []Prompt `json:"prompts"`
}

// Prompt is one prompt of a Fixture. Top holds, for every prompt position,
// the reference's top-10 (token, log-prob) pairs; Greedy is the greedy
// continuation and GreedyMargin the reference's margin between its two best
// tokens at each step. The hybrid fixtures add a cached decode from
// DecodeStart on, with its top-10 pairs in TopDecode.
type Prompt struct {
	Tokens       []int32        `json:"tokens"`
	Top          [][][2]float64 `json:"top"`
	NextLogprob  []float64      `json:"next_logprob"`
	Greedy       []int32        `json:"greedy"`
	GreedyMargin []float64      `json:"greedy_margin"`
	DecodeStart  int            `json:"decode_start"`
	TopDecode    [][][2]float64 `json:"top_decode"`
}

// Load reads the fixture at path. A malformed file's error names the path.
func Load(path string) (*Fixture, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var f Fixture
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &f, nil
}

// Blocks is a block table of n blocks, numbered backwards on purpose: block
// tables are indirections, and a test should not pass only because they are
// the identity.
func Blocks(n int) []int32 {
	b := make([]int32, n)
	for i := range b {
		b[i] = int32(n - 1 - i)
	}
	return b
}

// Batch is tokens as one sequence (sequence 0, block table blocks) at
// positions start, start+1, …, asking for the logits of every token.
func Batch(blocks []int32, tokens []int32, start int) *model.Batch {
	b := &model.Batch{Tokens: tokens, Attn: backend.AttnBatch{Blocks: [][]int32{blocks}}}
	for i := range tokens {
		b.Attn.Seq = append(b.Attn.Seq, 0)
		b.Attn.Pos = append(b.Attn.Pos, int32(start+i))
		b.Outputs = append(b.Outputs, int32(i))
	}
	return b
}

// Run runs b through m and returns one row of logits per output; a failed
// forward fails the test.
func Run(tb testing.TB, m model.Model, b *model.Batch) [][]float32 {
	tb.Helper()
	V := m.Config().VocabSize
	dst := make([]float32, len(b.Outputs)*V)
	if err := m.Forward(b, dst); err != nil {
		tb.Fatal(err)
	}
	rows := make([][]float32, len(b.Outputs))
	for i := range rows {
		rows[i] = dst[i*V : (i+1)*V]
	}
	return rows
}

// Forward runs tokens as one sequence starting at position start and returns
// the logits of every token: Run of Batch(blocks, tokens, start).
func Forward(tb testing.TB, m model.Model, blocks []int32, tokens []int32, start int) [][]float32 {
	tb.Helper()
	return Run(tb, m, Batch(blocks, tokens, start))
}

// LogSoftmax is x's log-probabilities, in float64.
func LogSoftmax(x []float32) []float64 {
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

// Argmax is the index of x's largest value, the first of equals.
func Argmax(x []float32) int32 {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return int32(best)
}

// MaxTopDiff is the largest |Δ log-prob| between rows (logits, one row per
// position) and the reference's (token, log-prob) pairs at each position of
// top.
func MaxTopDiff(rows [][]float32, top [][][2]float64) float64 {
	var worst float64
	for pos, pairs := range top {
		lp := LogSoftmax(rows[pos])
		for _, p := range pairs {
			worst = math.Max(worst, math.Abs(lp[int(p[0])]-p[1]))
		}
	}
	return worst
}

// OpenCheckpoint reads a checkpoint directory's config and opens its
// weights, closed when the test ends.
func OpenCheckpoint(tb testing.TB, dir string) (*model.Config, *safetensors.Set) {
	tb.Helper()
	cfg, err := model.LoadConfig(dir)
	if err != nil {
		tb.Fatal(err)
	}
	set, err := safetensors.OpenDir(dir)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { set.Close() })
	return cfg, set
}
