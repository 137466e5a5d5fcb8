package cuda

import (
	"fmt"
	"slices"
	"testing"

	"github.com/infernix/infernix/engine/backend"
	"github.com/infernix/infernix/engine/model"
	"github.com/infernix/infernix/engine/sample"
)

// sampleGPU returns the shared backend with sampling on the device loaded
// (whatever INFERNIX_CUDA_SAMPLE says).
func sampleGPU(t *testing.T) *Backend {
	b := gpu(t)
	if err := b.enableSampling(); err != nil {
		t.Fatal(err)
	}
	return b
}

// gpuRunner serves rows with SampleRows from a tensor written for each call.
func gpuRunner(t *testing.T, b *Backend) rowRunner {
	return func(rows [][]float32, req []backend.SampleRequest, out []backend.SampleResult) error {
		x := b.Alloc(len(rows), len(rows[0]))
		defer b.Free(x)
		write(t, b, x, slices.Concat(rows...))
		return b.SampleRows(x, req, out)
	}
}

// TestSampleRowsGreedy: greedy rows (ties at the maximum, penalties and
// bias deciding the token) and forced rows give engine/sample's tokens
// exactly, and log-probs with up to 20 alternatives within 1e-4 (the
// same tokens in the same order), for Qwen3's vocabulary, one not a
// multiple of 4 and one smaller than a block.
func TestSampleRowsGreedy(t *testing.T) {
	b := sampleGPU(t)
	r := newRand(t)
	for _, v := range []int{151936, 4099, 37} {
		checkGreedy(t, gpuRunner(t, b), v, r)
	}
}

// TestSampleRowsDistribution: seeded sampling with every parameter on the
// heap and scan paths: every drawn token in the host's kept set, the same
// token as the host's draw for the same seed (at most 1 in 200 may part at
// a rounding boundary; none did under the emulation), log-probs within
// 1e-4, frequencies matching the host's distribution.
func TestSampleRowsDistribution(t *testing.T) {
	b := sampleGPU(t)
	r := newRand(t)
	t.Run("qwen3_vocab", func(t *testing.T) { checkDistribution(t, gpuRunner(t, b), 151936, 32, 8, r) })
	t.Run("odd_vocab", func(t *testing.T) { checkDistribution(t, gpuRunner(t, b), 4099, 64, 4, r) })
}

// TestSampleRowsMasked: constrained decoding's masks applied on the
// device (checkMasked), for Qwen3's vocabulary and an odd one.
func TestSampleRowsMasked(t *testing.T) {
	b := sampleGPU(t)
	r := newRand(t)
	t.Run("qwen3_vocab", func(t *testing.T) { checkMasked(t, gpuRunner(t, b), 151936, 8, r) })
	t.Run("odd_vocab", func(t *testing.T) { checkMasked(t, gpuRunner(t, b), 4099, 8, r) })
}

// TestSampleRowsTies: thousands of equal logits overflow the kernel's
// sorted candidates: the tie paths of the alternatives, of top-p and of
// top-k.
func TestSampleRowsTies(t *testing.T) {
	b := sampleGPU(t)
	r := newRand(t)
	for _, v := range []int{151936, 5000} {
		checkTies(t, gpuRunner(t, b), v, 16, r)
	}
}

// TestSampleRowsNoFloor: the checks above with kernels/sample.cu built
// without its selections' floors (INFERNIX_CUDA_SAMPLE_FLOOR=0, the default
// before run 40), which users may still choose.
func TestSampleRowsNoFloor(t *testing.T) {
	b := sampleGPU(t)
	var k *kernel
	if err := b.load("sample.cu", sampleNoFloorDefines, map[string]**kernel{"sample_rows": &k}); err != nil {
		t.Fatal(err)
	}
	def := b.k.sample
	b.k.sample = k
	defer func() { b.k.sample = def }()
	r := newRand(t)
	run := gpuRunner(t, b)
	for _, v := range []int{151936, 4099} {
		t.Run(fmt.Sprint(v), func(t *testing.T) {
			t.Run("greedy", func(t *testing.T) { checkGreedy(t, run, v, r) })
			t.Run("distribution", func(t *testing.T) { checkDistribution(t, run, v, 8, 4, r) })
			t.Run("masked", func(t *testing.T) { checkMasked(t, run, v, 8, r) })
			t.Run("ties", func(t *testing.T) { checkTies(t, run, v, 8, r) })
		})
	}
}

// TestSampleRowsForward: decode steps of a model through ForwardSample
// (graphs captured and replayed with the sampling records after them)
// choose the tokens Forward + host sampling choose, greedy and seeded, and
// alternating the two paths leaves both replaying graphs.
func TestSampleRowsForward(t *testing.T) {
	b := sampleGPU(t)
	if !b.g.enabled {
		t.Skip("graphs disabled")
	}
	r := newRand(t)
	cfg := smallConfig("Qwen3ForCausalLM")
	m := build(t, cfg, &testWeights{be: b, seed: r.Uint64()}, b)
	ms, ok := m.(model.Sampling)
	if !ok || ms.SampleLimits().Rows == 0 {
		t.Fatalf("model does not sample on the device: %+v", ms.SampleLimits())
	}
	V := cfg.VocabSize
	p := prompts(r, V, 40, 23)
	seeded := sample.Params{Temperature: 0.8, TopK: 40, TopP: 0.9, RepetitionPenalty: 1.1, PresencePenalty: 0.2}
	greedy := sample.Params{Temperature: 0, TopP: 1, RepetitionPenalty: 1}
	lanes := []*lane{{blocks: []int32{0, 1}}, {blocks: []int32{2, 3}}}
	hs, ds := make([]*sample.Sampler, 2), make([]*sample.Sampler, 2)
	hs[0], ds[0] = twin(greedy, V, 1, p[0], nil)
	hs[1], ds[1] = twin(seeded, V, 2, p[1], nil)
	step(t, m, lanes, p) // prefill
	next := [][]int32{{5}, {7}}
	r0, _, _ := b.GraphStats()
	differ := 0
	for s := 0; s < 24; s++ {
		// The host path: Forward, then the host sampler.
		bt := &model.Batch{}
		for i, l := range lanes {
			bt.Attn.Blocks = append(bt.Attn.Blocks, l.blocks)
			bt.Tokens = append(bt.Tokens, next[i][0])
			bt.Attn.Seq = append(bt.Attn.Seq, int32(i))
			bt.Attn.Pos = append(bt.Attn.Pos, int32(len(l.toks)))
			bt.Outputs = append(bt.Outputs, int32(i))
		}
		logits := make([]float32, 2*V)
		if err := m.Forward(bt, logits); err != nil {
			t.Fatal(err)
		}
		want := make([]backend.SampleResult, 2)
		backend.SampleHost(logits, V, []backend.SampleRequest{{Sampler: hs[0], Logprobs: 2, Force: -1}, {Sampler: hs[1], Logprobs: 0, Force: -1}}, want)
		// The same step again on the device path (same positions: the
		// cache entries are rewritten with the same values).
		got := make([]backend.SampleResult, 2)
		req := []backend.SampleRequest{{Sampler: ds[0], Logprobs: 2, Force: -1}, {Sampler: ds[1], Logprobs: 0, Force: -1}}
		if err := ms.ForwardSample(bt, req, got); err != nil {
			t.Fatal(err)
		}
		for i := range got {
			if got[i].Token != want[i].Token {
				if i == 0 {
					t.Fatalf("step %d: greedy token %d on the device, %d on the host", s, got[i].Token, want[i].Token)
				}
				differ++
			}
			compareLogprobs(t, "forward", logits[i*V:(i+1)*V], req[i], got[i], want[i])
			hs[i].Accept(want[i].Token)
			ds[i].Accept(want[i].Token)
			lanes[i].toks = append(lanes[i].toks, next[i][0])
			next[i] = []int32{want[i].Token}
		}
	}
	if differ > 1 {
		t.Fatalf("%d of 24 seeded draws differ", differ)
	}
	if r1, _, _ := b.GraphStats(); r1-r0 < 30 {
		t.Errorf("only %d of 48 forwards replayed a graph", r1-r0)
	}
}
