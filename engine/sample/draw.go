package sample

import (
	"fmt"
	"slices"
)

// HeapMaxK is the largest top-k for which Sample draws among its
// candidates in rank order (most likely first, then lower id); without
// top-k, or above it, Sample draws in token-id order. A sampler outside
// this package that walks the kept tokens in the same order turns the same
// uniform number into the same token.
const HeapMaxK = heapMaxK

// Draw is one token's sampling job in the form a sampler outside this
// package carries it out (a GPU kernel: backend.RowSampler): the pipeline's
// parameters as Sample applies them, views of the penalty bookkeeping, and
// the uniform number Sample would have drawn. The slices alias the
// sampler's state: they are valid until its next Accept and must not be
// modified.
type Draw struct {
	// Greedy: the argmax of the adjusted logits (lowest id among ties); the
	// fields from InvTemp to MinP, and U, are then unused.
	Greedy bool
	// InvTemp is 1/temperature. Sample uses float32(InvTemp) when it
	// scans the whole vocabulary and the float64 value on the top-k list.
	InvTemp float64
	TopK    int     // 0: off (as is k >= vocabulary size)
	TopP    float64 // 1: off; <= 0 keeps the most likely token
	MinP    float32 // 0: off; at most 1
	// RankOrder: the draw walks the kept tokens most likely first
	// (0 < TopK <= HeapMaxK) rather than by id.
	RankOrder bool

	// Bias is logit_bias as (id, bias) by increasing id, ids within the
	// vocabulary, applied first: logits[id] += bias.
	Bias []TokenLogProb
	// Repetition != 1 applies to each token of Seen (distinct tokens of
	// prompt and output): a positive logit is divided by it, any other
	// multiplied.
	Repetition float32
	Seen       []int32
	// Presence and Frequency apply last to each distinct generated token:
	// logit = (logit - Frequency*float32(count)) - Presence, rounding each
	// operation to float32 (no fused multiply-add).
	Presence, Frequency float32
	Generated, Counts   []int32

	// U is the uniform number in [0, 1) of this draw, taken from the
	// sequence's generator exactly as Sample would take it (not when
	// Greedy). The token is the first kept one, in the order above, at
	// which the running sum of kept weights exceeds U times their total.
	U float64
}

// NextDraw describes the next token's draw in d, for a sampler outside
// this package, and advances the random stream as one Sample call would:
// one number when not greedy, none when greedy. Call it instead of
// Sample, never both for one token; seeded streams then stay in step
// whichever path samples each token. It allocates nothing.
func (s *Sampler) NextDraw(d *Draw) {
	*d = Draw{
		Greedy: s.greedy, InvTemp: s.invT64, TopK: s.topK, TopP: s.topP, MinP: s.minP,
		RankOrder: s.cand != nil, Bias: s.bias,
		Repetition: s.pen.rep, Seen: s.pen.repIDs,
		Presence: s.pen.presence, Frequency: s.pen.frequency,
		Generated: s.pen.genIDs, Counts: s.pen.genCounts,
	}
	if !s.greedy {
		d.U = s.uniform()
	}
}

// Vocab is the vocabulary size the sampler was built for.
func (s *Sampler) Vocab() int { return s.vocab }

// BiasLen is the number of logit_bias entries in effect.
func (s *Sampler) BiasLen() int { return len(s.bias) }

// Probs returns in dst (grown as needed) the distribution the next Sample
// draws from for logits: the adjusted, filtered and renormalised
// probabilities of the path Sample takes; one token has probability 1 when
// sampling is greedy or degenerate. It draws nothing and leaves logits
// unmodified. It allocates; it is for tests of other samplers against
// this one.
func (s *Sampler) Probs(logits []float32, dst []float64) []float64 {
	if len(logits) != s.vocab {
		panic(fmt.Sprintf("sample: got %d logits, sampler built for vocabulary %d", len(logits), s.vocab))
	}
	l := slices.Clone(logits)
	s.adjust(l)
	probs := slices.Grow(dst[:0], len(l))[:len(l)]
	clear(probs)
	if s.greedy {
		probs[argmax(l)] = 1
		return probs
	}
	if s.cand != nil {
		n := s.prepareList(l)
		z := 0.0
		for _, e := range s.candW[:n] {
			z += e
		}
		for j, c := range s.cand[:n] {
			probs[c.ID] += s.candW[j] / z
		}
		return probs
	}
	pl, tok, done := s.prepareScan(l)
	if done {
		probs[tok] = 1
		return probs
	}
	z := 0.0
	for i, e := range l {
		if pl.keeps(e, i) {
			z += float64(e)
		}
	}
	for i, e := range l {
		if pl.keeps(e, i) {
			probs[i] = float64(e) / z
		}
	}
	return probs
}

// HistoryFree reports whether the token drawn depends on the logits alone:
// greedy, and no penalty that reads the tokens seen (a bias is fixed). Rows
// of one sequence can then be sampled together before any is accepted
// (speculative decoding on the device).
func (s *Sampler) HistoryFree() bool {
	return s.greedy && !s.pen.active()
}
