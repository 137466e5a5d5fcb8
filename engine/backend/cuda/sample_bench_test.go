package cuda

import (
	"testing"

	"github.com/infernix/infernix/engine/backend"
	"github.com/infernix/infernix/engine/sample"
)

// sampleVariants are kernels/sample.cu's builds BenchmarkSampleRows
// compares, the default first.
var sampleVariants = []struct {
	name    string
	defines []string
}{
	{"default", nil},                                     // the floors: SEL_FLOOR=2, HIST_ANY=1 (run 40)
	{"nofloor", sampleNoFloorDefines},                    // INFERNIX_CUDA_SAMPLE_FLOOR=0, the default before run 40
	{"su1", []string{"SU=1"}},                            // one load per thread in flight (before run 39)
	{"floor_only", []string{"HIST_ANY=0"}},               // floors, but every warp takes the match
	{"floor_binades", []string{"SEL_FLOOR=1"}},           // counted from four binades below the maximum
	{"floor_delta8", []string{"SEL_DELTA=8.0f"}},         // from 8 below
	{"atomic", []string{"HIST_ATOMIC=1", "SEL_FLOOR=0"}}, // one shared atomic per item, no match, no floor
	{"atomic_floor", []string{"HIST_ATOMIC=1"}},
}

// BenchmarkSampleRows times one SampleRows call on a Qwen3-sized row
// (151,936 logits, N(0, 2)), from the request's encoding to its results
// on the host, per kernel build (sampleVariants) and sampling parameters.
// "roundtrip" is the same synchronisation with a 4-byte ReadRows instead
// of the kernel: what every row of the table pays besides the kernel.
//
//	bash tests/device/run.sh run with CUDA_GROUPS=samplebench
func BenchmarkSampleRows(bb *testing.B) {
	b := gpu(bb)
	if err := b.enableSampling(); err != nil {
		bb.Fatal(err)
	}
	const V = 151936
	r := newRand(bb)
	row := make([]float32, V)
	for i := range row {
		row[i] = float32(r.NormFloat64() * 2)
	}
	x := b.Alloc(1, V)
	defer b.Free(x)
	write(bb, b, x, row)
	bb.Run("roundtrip", func(bb *testing.B) {
		dst := make([]float32, 1)
		for bb.Loop() {
			b.ReadRows(x, dst)
		}
	})
	params := []struct {
		name string
		p    sample.Params
		lp   int
	}{
		{"greedy", sample.Params{RepetitionPenalty: 1}, -1},
		{"topk20", sample.Params{Temperature: 0.7, TopK: 20, TopP: 0.8, RepetitionPenalty: 1}, -1},
		{"topk20_logprobs5", sample.Params{Temperature: 0.7, TopK: 20, TopP: 0.8, RepetitionPenalty: 1}, 5},
		{"topp", sample.Params{Temperature: 0.7, TopP: 0.9, RepetitionPenalty: 1}, -1},
		{"topk20_rep", sample.Params{Temperature: 0.7, TopK: 20, TopP: 0.8, RepetitionPenalty: 1.05}, -1},
	}
	def := b.k.sample
	defer func() { b.k.sample = def }()
	for _, k := range sampleVariants {
		fn := def
		if k.defines != nil {
			if err := b.load("sample.cu", k.defines, map[string]**kernel{"sample_rows": &fn}); err != nil {
				bb.Fatal(err)
			}
		}
		for _, c := range params {
			bb.Run(k.name+"/"+c.name, func(bb *testing.B) {
				b.k.sample = fn
				seed := uint64(1)
				p := c.p
				p.Seed = &seed
				s := sample.New(p, V, nil)
				for i := range 64 { // a history for the repetition penalty
					s.Accept(int32(i * 997 % V))
				}
				req := []backend.SampleRequest{{Sampler: s, Logprobs: c.lp, Force: -1}}
				out := make([]backend.SampleResult, 1)
				for bb.Loop() {
					if err := b.SampleRows(x, req, out); err != nil {
						bb.Fatal(err)
					}
				}
			})
		}
	}
}
