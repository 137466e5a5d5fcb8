package sample

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// heapMaxK is the largest top-k served by a bounded heap over the logits;
// larger k use a radix select, whose cost does not grow with k.
const heapMaxK = 256

// pcgStream is the second PCG seed word: fixed, so that one uint64 seed
// names one stream.
const pcgStream = 0x9e3779b97f4a7c15

// Sampler draws the tokens of one sequence. It is not safe for concurrent
// use; sequences sampled in parallel each need their own. After New, Sample
// and Accept allocate nothing beyond the amortised growth of the penalty
// bookkeeping and of a scratch buffer whose size is reached after the first
// few tokens.
type Sampler struct {
	vocab  int
	greedy bool
	invT   float32 // 1/temperature, for the float32 scan path
	invT64 float64 // 1/temperature, for the heap path
	topK   int     // 0 = off
	topP   float64 // 1 = off
	minP   float32 // 0 = off
	seed   uint64
	rng    rand.PCG
	bias   []TokenLogProb // (id, bias) sorted by id
	mask   []uint64       // allowed tokens (bit id%64 of word id/64); nil: all
	pen    penalties

	cand  []TokenLogProb // heap path: top-k candidates, best first
	tied  []int32        // heap path: tokens tied with the k-th, outside cand
	candW []float64      // heap path: their unnormalised probabilities
	kHist []int32        // scan path, k > heapMaxK: radix histogram
	keys  []uint32       // scan path, k > heapMaxK: keys of one radix bin
	pHist []float64      // scan path, top-p: probability mass per bin
	bound []uint64       // scan path: members of one histogram bin
	orig  []float32      // SampleLogProbs: the copy that Sample consumes

	shared *chunkWork // scan path, large vocabularies: the exp pass shared with idle cores
}

// New returns the sampler of one sequence. p should have passed
// ValidateVocab(vocabSize); out-of-range values are nonetheless handled
// safely (a non-positive repetition penalty is off, min_p is capped at 1,
// top_p <= 0 keeps one token, and logit_bias ids outside the vocabulary
// are ignored). prompt feeds the repetition penalty; it is not retained.
// vocabSize (>= 1) is the length of the logits vectors Sample will receive
// (the model's, which may exceed the tokenizer's).
func New(p Params, vocabSize int, prompt []int32) *Sampler {
	s := &Sampler{vocab: vocabSize, greedy: p.IsGreedy(), topP: 1}
	if p.Seed != nil {
		s.seed = *p.Seed
	} else {
		s.seed = rand.Uint64()
	}
	s.rng.Seed(s.seed, pcgStream)
	for id, b := range p.LogitBias {
		if id >= 0 && int(id) < vocabSize && b != 0 {
			s.bias = append(s.bias, TokenLogProb{ID: id, LogProb: b})
		}
	}
	slices.SortFunc(s.bias, func(a, b TokenLogProb) int { return int(a.ID) - int(b.ID) })
	s.pen = newPenalties(p, vocabSize, prompt)
	if s.greedy {
		return s
	}
	s.invT64 = 1 / float64(p.Temperature)
	s.invT = float32(s.invT64)
	if k := p.TopK; k > 0 && k < vocabSize {
		s.topK = k
	}
	if p.TopP < 1 { // NaN and >= 1: off
		s.topP = float64(p.TopP)
	}
	if p.MinP > 0 {
		s.minP = min(p.MinP, 1) // at 1 the most likely token (and ties) survive
	}
	switch {
	case s.topK > 0 && s.topK <= heapMaxK:
		s.cand = make([]TokenLogProb, 0, s.topK+16)
		s.candW = make([]float64, 0, s.topK+16)
		s.tied = make([]int32, 0, 256) // more ties than this: a second pass
	default:
		if s.topK > 0 {
			s.kHist = make([]int32, 4*kBins)
			s.keys = make([]uint32, 0, 1024)
		}
		if s.topP < 1 {
			s.pHist = make([]float64, 4*pBins)
		}
		s.bound = make([]uint64, 0, 1024)
		s.shared = newChunkWork(vocabSize, s.topP < 1)
	}
	return s
}

// Greedy reports whether Sample returns the argmax of the adjusted logits
// (temperature below GreedyBelow); it then draws no random numbers.
func (s *Sampler) Greedy() bool { return s.greedy }

// AdjustsLogits reports whether Sample changes logits before choosing
// (logit bias or a penalty is set). When it is false and Greedy is true,
// the token is the plain argmax of the model's logits.
func (s *Sampler) AdjustsLogits() bool { return len(s.bias) > 0 || s.pen.active() || s.mask != nil }

// SetMask restricts the next draws to the tokens whose bits are set (bit
// id%64 of mask[id/64]; ids past the mask are excluded), as constrained
// decoding asks; nil lifts the restriction. The sampler keeps mask, which
// the caller may rewrite between draws. A mask that allows no token
// leaves token 0, as all -Inf logits do.
func (s *Sampler) SetMask(mask []uint64) { s.mask = mask }

// Masked reports whether a mask is set (device samplers that do not apply
// one refuse the sampler: backend.SampleLimits.Masks).
func (s *Sampler) Masked() bool { return s.mask != nil }

// Mask is the mask SetMask set (nil: none), for device samplers that apply
// it themselves.
func (s *Sampler) Mask() []uint64 { return s.mask }

// Seed returns the seed of the sequence's generator: Params.Seed, or the
// random one New drew.
func (s *Sampler) Seed() uint64 { return s.seed }

// Accept records a token as generated, for the penalties. Call it with
// every token appended to the sequence, whoever chose it; Sample does not.
// Ids outside the vocabulary are ignored.
func (s *Sampler) Accept(tok int32) {
	if s.pen.active() {
		s.pen.accept(tok, s.vocab)
	}
}

// Sample returns the next token for the given logits, following the
// pipeline in the package documentation. It may modify logits in place
// (bias and penalties, and, when the whole vocabulary is sampled,
// unnormalised probabilities): callers that need the model's logits
// afterwards must copy them first, or use SampleLogProbs. Every non-greedy call consumes exactly
// one random number. Degenerate inputs: NaN logits count as -Inf; if no
// logit exceeds -Inf the result is token 0; if some are +Inf the result is
// the lowest such id. len(logits) must be the vocabSize given to New.
func (s *Sampler) Sample(logits []float32) int32 {
	if len(logits) != s.vocab {
		panic(fmt.Sprintf("sample: got %d logits, sampler built for vocabulary %d", len(logits), s.vocab))
	}
	s.adjust(logits)
	if s.greedy {
		return argmax(logits)
	}
	u := s.uniform()
	if s.cand != nil {
		return s.drawList(s.prepareList(logits), u)
	}
	pl, tok, done := s.prepareScan(logits)
	if done {
		return tok
	}
	var sums []float64
	if s.shared != nil {
		sums = s.shared.sum
	}
	return drawScan(logits, pl, u, sums)
}

// SampleLogProbs is Sample for callers that report log-probabilities: it
// leaves logits unmodified (Sample works on an internal copy) and also
// returns the log-probability of the chosen token and the n most likely
// tokens (in top[:n], see TopLogProbs), both under softmax of the model's
// logits, before any sampling parameter, as the OpenAI API defines them.
func (s *Sampler) SampleLogProbs(logits []float32, n int, top []TokenLogProb) (tok int32, lp float32, alts []TokenLogProb) {
	if len(logits) != s.vocab {
		panic(fmt.Sprintf("sample: got %d logits, sampler built for vocabulary %d", len(logits), s.vocab))
	}
	lse := LogSumExp(logits)
	alts = topLogProbs(logits, n, lse, top)
	work := logits
	if s.writes() {
		if cap(s.orig) < len(logits) {
			s.orig = make([]float32, len(logits))
		}
		work = s.orig[:len(logits)]
		copy(work, logits)
	}
	tok = s.Sample(work)
	return tok, logProb(logits[tok], lse), alts
}

// writes reports whether Sample may modify its logits: the greedy and heap
// paths only read them unless bias or penalties apply.
func (s *Sampler) writes() bool {
	return s.AdjustsLogits() || (!s.greedy && s.cand == nil)
}

// adjust applies the mask, logit bias, then the penalties.
func (s *Sampler) adjust(logits []float32) {
	if s.mask != nil {
		applyMask(logits, s.mask)
	}
	for _, b := range s.bias {
		logits[b.ID] += b.LogProb
	}
	if s.pen.active() {
		s.pen.apply(logits)
	}
}

// uniform returns a float64 uniform in [0, 1) from the top 53 bits.
func (s *Sampler) uniform() float64 { return float64(s.rng.Uint64()>>11) * 0x1p-53 }

// applyMask sets the logits of excluded tokens to -Inf.
func applyMask(logits []float32, mask []uint64) {
	negInf := float32(math.Inf(-1))
	for w := 0; w*64 < len(logits); w++ {
		lo, hi := w*64, min(w*64+64, len(logits))
		var bits uint64
		if w < len(mask) {
			bits = mask[w]
		}
		if bits == ^uint64(0) {
			continue
		}
		for i := lo; i < hi; i++ {
			if bits&(1<<(i-lo)) == 0 {
				logits[i] = negInf
			}
		}
	}
}
