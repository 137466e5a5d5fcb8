package backend

import (
	"math"

	"github.com/infernix/infernix/engine/sample"
)

// SampleRequest asks for the next token of one output row of a forward
// pass (model.Sampling).
type SampleRequest struct {
	// Sampler is the sequence's: its parameters, penalty bookkeeping and
	// random stream. Serving the request advances the stream as one
	// Sample call would (sample.Sampler.NextDraw).
	Sampler *sample.Sampler
	// Logprobs < 0 asks for no log-probabilities; 0 for the chosen token's;
	// n > 0 also for the n most likely tokens (sample.TopLogProbs). They
	// are those of the model's raw logits, before any sampling parameter,
	// as the OpenAI API reports them.
	Logprobs int
	// Force >= 0 gives the token (the thinking budget inserts tokens):
	// nothing is drawn and only its log-probabilities are computed. With
	// Logprobs < 0 too the row costs nothing (a row whose result is not
	// used). -1: sample.
	Force int32
}

// SampleResult is what returns to the host for one row.
type SampleResult struct {
	Token   int32
	LogProb float32 // when Logprobs >= 0; -Inf for an impossible token
	// Top holds the Logprobs most likely tokens when Logprobs > 0. Its
	// storage is reused by the next call with the same results slice:
	// copy what is kept.
	Top []sample.TokenLogProb
}

// SampleLimits says which requests a RowSampler serves; the zero value
// serves none.
type SampleLimits struct {
	Rows        int  // most rows per call
	MaxLogprobs int  // most alternatives per row (the OpenAI API allows 20)
	MaxBias     int  // most logit_bias entries
	Masks       bool // constrained decoding's masks (sample.Sampler.SetMask) are applied
}

// Serves reports whether one request is within the limits (the number of
// rows is the caller's to check).
func (l SampleLimits) Serves(r *SampleRequest) bool {
	if l.Rows <= 0 {
		return false
	}
	if r.Force >= 0 {
		return r.Logprobs <= l.MaxLogprobs
	}
	return r.Sampler != nil && (l.Masks || !r.Sampler.Masked()) && r.Logprobs <= l.MaxLogprobs && r.Sampler.BiasLen() <= l.MaxBias
}

// RowSampler is an optional capability of backends that choose tokens
// where the logits are (a GPU): only the tokens and the requested
// log-probabilities return to the host instead of a vocabulary of logits
// per row. Models use it through model.Sampling.
type RowSampler interface {
	// SampleLimits says what SampleRows serves; zero when sampling on the
	// device is off.
	SampleLimits() SampleLimits
	// SampleRows serves req[i] from row i of logits (F32, [>= len(req),
	// vocab]) into out[i]. Like ReadRows it ends the forward pass (a device
	// backend synchronises here). It may overwrite logits. Every request
	// must be within SampleLimits.
	SampleRows(logits Tensor, req []SampleRequest, out []SampleResult) error
}

// SampleHost serves requests from logits rows in host memory with the
// host sampler: what the engine does after Forward, and the CPU backend's
// RowSampler. Row i is logits[i*vocab : (i+1)*vocab]; it may be modified.
// It allocates nothing once out[i].Top has grown to the largest Logprobs.
func SampleHost(logits []float32, vocab int, req []SampleRequest, out []SampleResult) {
	for i := range req {
		r, o := &req[i], &out[i]
		row := logits[i*vocab : (i+1)*vocab]
		n := max(r.Logprobs, 0)
		o.Top = o.Top[:0]
		switch {
		case r.Force >= 0:
			o.Token, o.LogProb = r.Force, 0
			if r.Logprobs >= 0 {
				o.LogProb = float32(math.Inf(-1))
				if int(r.Force) < vocab {
					o.LogProb = sample.LogProbOf(row, r.Force)
				}
				if n > 0 {
					o.Top = sample.TopLogProbs(row, n, o.Top)
				}
			}
		case r.Logprobs >= 0:
			o.Token, o.LogProb, o.Top = r.Sampler.SampleLogProbs(row, n, o.Top)
		default:
			o.Token, o.LogProb = r.Sampler.Sample(row), 0
		}
	}
}
