package cuda

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"unsafe"

	"github.com/infernix/infernix/engine/backend"
	"github.com/infernix/infernix/engine/sample"
)

// Sampling on the device (backend.RowSampler, kernels/sample.cu): the LM
// head's rows stay on the GPU and one block per row chooses the token and
// computes the requested log-probabilities; the host receives 176 bytes
// per row instead of 4×vocab (600 KB for Qwen3).
//
// Each row's job is the sampler's sample.Draw: the parameters, the penalty
// lists (distinct ids, so the kernel edits them in parallel) and the
// uniform number drawn on the host from the sequence's own generator. So
// a seeded sequence draws the same token on either path, step for step,
// and the two paths can alternate within one sequence. The exceptions are
// draws whose number lies within rounding of a boundary between two
// tokens: the kernel sums the weights in another order, and computes them
// as the host does but not necessarily to the last bit (on the scan path
// the host's float32 polynomial, operation by operation without fused
// multiply-adds, which Go on amd64 does not fuse either; on the top-k
// list CUDA's float64 exp against Go's math.Exp, both within 1 ulp). Under
// the emulation (sample_emu_test.go) no draw of the tests differed. One
// difference in order, by design: a top-k of at most 256 whose ties with
// the k-th token make more than 2,048 candidates is drawn in id order
// rather than rank order (same kept set and distribution, another token
// for a given number), unless the k-th is -Inf (a constrained decoding
// mask leaving fewer than k tokens), where the tokens above it are drawn
// in rank order as on the host. Masks (Sampler.Mask) are applied after
// the penalties, which leave -Inf as it is. Log-probabilities are those of the raw logits, as
// on the host, within ~1e-6 (float32 exponentials summed in float64).
//
// Graphs: the forward's records end at the LM head, SampleRows ends the
// step like ReadRows (launching the forward's graph), and the sampling
// records run eagerly after it: their sizes change every step (the
// penalty lists grow), and inside a graph they would make every step miss
// its graph. They are one staged upload, one launch and one copy back.
//
// Off unless INFERNIX_CUDA_SAMPLE=1 until the GPU tests (sample_test.go)
// have passed on a GPU.

// Words of one row's parameters and results (kernels/sample.cu's
// SampleParams and SampleOut).
const (
	sampleParamWords = 20
	sampleOutWords   = 44
	sampleMaxTop     = 20 // SMAX_TOP
	sampleThreads    = 1024
	sampleMaxBias    = 1024
	sampleMaxRows    = 1024
)

// Flags of SampleParams.flags.
const (
	sampleGreedy  = 1
	sampleRank    = 2
	sampleLogprob = 4
)

var _ backend.RowSampler = (*Backend)(nil)

// sampleOn reports whether tokens are chosen on the device: on unless
// INFERNIX_CUDA_SAMPLE=0 (its kernel tests, the demo models' end-to-end
// tests and the bench passed on the GPU in run 10).
func sampleOn() bool { return os.Getenv("INFERNIX_CUDA_SAMPLE") != "0" }

// enableSampling compiles and loads kernels/sample.cu (New does it unless
// INFERNIX_CUDA_SAMPLE=0; tests call it directly).
func (b *Backend) enableSampling() error {
	if b.k.sample != nil {
		b.devSample = true
		return nil
	}
	if err := b.load("sample.cu", sampleDefines(), map[string]**kernel{"sample_rows": &b.k.sample}); err != nil {
		return err
	}
	b.devSample = true
	return nil
}

// sampleNoFloorDefines build kernels/sample.cu as before run 40: every
// selection counts the whole row, and every warp takes the histogram's
// match. The default build's floors (sel_floor, HIST_ANY) made a top-k 20
// row 38% faster on an H100 (tests/device/NOTES.md, run 40).
var sampleNoFloorDefines = []string{"SEL_FLOOR=0", "HIST_ANY=0"}

// sampleDefines: sampleNoFloorDefines with INFERNIX_CUDA_SAMPLE_FLOOR=0,
// else the kernel's defaults.
func sampleDefines() []string {
	if os.Getenv("INFERNIX_CUDA_SAMPLE_FLOOR") == "0" {
		return sampleNoFloorDefines
	}
	return nil
}

// SampleLimits: rows of up to 20 alternatives and 1,024 logit_bias entries,
// masks too, when sampling on the device is on (backend.RowSampler).
func (b *Backend) SampleLimits() backend.SampleLimits {
	if !b.devSample || b.k.sample == nil {
		return backend.SampleLimits{}
	}
	return backend.SampleLimits{Rows: sampleMaxRows, MaxLogprobs: sampleMaxTop, MaxBias: sampleMaxBias, Masks: true}
}

// SampleRows chooses the tokens of the first len(req) rows of logits on
// the device (backend.RowSampler). It ends the forward like ReadRows and
// overwrites the rows' penalised entries.
func (b *Backend) SampleRows(logits backend.Tensor, req []backend.SampleRequest, out []backend.SampleResult) error {
	c := f32t(logits, "SampleRows")
	n := len(req)
	if n > c.rows || len(out) < n || n > sampleMaxRows {
		panic(fmt.Sprintf("cuda: SampleRows of %d requests from a %d×%d tensor into %d results", n, c.rows, c.cols, len(out)))
	}
	if b.k.sample == nil {
		return fmt.Errorf("cuda: sampling kernels not loaded (INFERNIX_CUDA_SAMPLE=0)")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	// End the forward: held operators run, its graph launches (or its
	// capture ends); what follows runs eagerly.
	b.flush()
	if b.err == nil && b.bind() {
		b.endStep()
	}
	b.g.inStep, b.g.mode = false, modeEager
	b.sampleWords = encodeSample(req, c.cols, b.sampleWords[:0], &b.sampleDraw)
	if b.err == nil {
		nOut := n * sampleOutWords * 4
		if nOut > b.out.size {
			if err := b.out.ensure(b, nOut); err != nil {
				b.fail(err)
			}
		}
		dst, ok := b.scratchPtr(scrSample, uint64(nOut))
		words, _ := b.stage(b.sampleWords)
		if ok && b.err == nil {
			b.launch(b.k.sample, uint32(n), 1, 1, sampleThreads, 1, 0, ptr(words), ptr(words), ptr(c.ptr), i32(c.cols), ptr(dst))
			r := rec{kind: recDtoH, nargs: 3}
			r.args[0], r.args[1], r.args[2] = 0, uint64(dst), uint64(nOut)
			b.submit(&r)
		}
	}
	b.sync()
	b.meta.reset()
	if b.err != nil {
		return b.err
	}
	decodeSample(unsafe.Slice((*int32)(b.out.p), n*sampleOutWords), req, out)
	return nil
}

// encodeSample writes to words (reusing its storage) the kernel's input for req over a
// vocabulary of V: one SampleParams per row, then each row's lists (bias
// ids, bias values, repetition ids, generated ids, their counts) and room
// for the raw values the kernel saves before editing. It takes each
// sampled row's draw from its sampler (advancing the stream as Sample
// would); d is scratch.
func encodeSample(req []backend.SampleRequest, V int, words []int32, d *sample.Draw) []int32 {
	n := len(req)
	words = slices.Grow(words[:0], n*sampleParamWords)[:n*sampleParamWords]
	clear(words)
	for i := range req {
		r := &req[i]
		p := words[i*sampleParamWords : (i+1)*sampleParamWords : (i+1)*sampleParamWords]
		p[0] = -1
		flags := int32(0)
		if r.Logprobs >= 0 {
			flags |= sampleLogprob
		}
		p[2] = int32(min(max(r.Logprobs, 0), sampleMaxTop))
		p[6] = int32(math.Float32bits(1))
		p[12] = int32(len(words))
		putF64(p[14:], 0)
		putF64(p[16:], 1)
		if r.Force >= 0 {
			p[0], p[1] = r.Force, flags
			continue
		}
		r.Sampler.NextDraw(d)
		if d.Greedy {
			flags |= sampleGreedy
		}
		if d.RankOrder {
			flags |= sampleRank
		}
		p[1] = flags
		p[3] = int32(d.TopK)
		p[4] = int32(math.Float32bits(float32(d.InvTemp)))
		p[5] = int32(math.Float32bits(d.MinP))
		seen := d.Seen
		if d.Repetition == 1 {
			seen = nil
		}
		p[6] = int32(math.Float32bits(d.Repetition))
		p[7] = int32(math.Float32bits(d.Presence))
		p[8] = int32(math.Float32bits(d.Frequency))
		p[9], p[10], p[11] = int32(len(d.Bias)), int32(len(seen)), int32(len(d.Generated))
		putF64(p[14:], d.InvTemp)
		putF64(p[16:], d.TopP)
		putF64(p[18:], d.U)
		for _, e := range d.Bias {
			words = append(words, e.ID)
		}
		for _, e := range d.Bias {
			words = append(words, int32(math.Float32bits(e.LogProb)))
		}
		words = append(words, seen...)
		words = append(words, d.Generated...)
		words = append(words, d.Counts...)
		for range len(d.Bias) + len(seen) + len(d.Generated) {
			words = append(words, 0) // saved raw values
		}
		if mask := r.Sampler.Mask(); mask != nil {
			// The allowed tokens as 32-bit words (ids past the mask: none).
			// (words, not p: the appends above may have moved the array.)
			words[i*sampleParamWords+13] = int32(len(words)) + 1
			for w := range (V + 31) / 32 {
				var bits uint32
				if w/2 < len(mask) {
					bits = uint32(mask[w/2] >> (32 * (w % 2)))
				}
				words = append(words, int32(bits))
			}
		}
	}
	return words
}

func putF64(w []int32, v float64) {
	b := math.Float64bits(v)
	w[0], w[1] = int32(uint32(b)), int32(uint32(b>>32))
}

// decodeSample reads the kernel's results into out; each out[i].Top reuses
// its storage.
func decodeSample(raw []int32, req []backend.SampleRequest, out []backend.SampleResult) {
	for i := range req {
		o := raw[i*sampleOutWords : (i+1)*sampleOutWords]
		res := &out[i]
		res.Token = o[0]
		res.LogProb = math.Float32frombits(uint32(o[1]))
		res.Top = res.Top[:0]
		if req[i].Logprobs < 0 {
			res.LogProb = 0
		}
		for j := range int(min(max(o[2], 0), sampleMaxTop)) {
			res.Top = append(res.Top, sample.TokenLogProb{ID: o[4+j], LogProb: math.Float32frombits(uint32(o[4+sampleMaxTop+j]))})
		}
	}
}
