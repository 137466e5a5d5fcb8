package sample

import (
	"math"
	"slices"
)

// The heap path serves top-k up to heapMaxK: the k best logits are picked
// in one pass, and everything after works on those k candidates only.

// prepareList (heap path) leaves in s.cand the top-k tokens, ties with the
// k-th included, best first, and in s.candW their probabilities relative to
// the best; it returns how many of them survive top-p and min-p (>= 1).
func (s *Sampler) prepareList(logits []float32) int {
	tied := s.tied[:0]
	cand, ties := topN(logits, s.topK, s.cand[:0], &tied)
	if ties > 0 {
		cand = addTies(logits, cand, tied, ties)
	}
	s.cand, s.tied = cand, tied
	top := float64(cand[0].LogProb)
	w := s.candW[:0]
	if math.IsInf(top, 0) { // all -Inf, or +Inf present: the first is certain
		s.candW = append(w, 1)
		return 1
	}
	invT := s.invT64
	var z float64
	for _, c := range cand {
		e := math.Exp((float64(c.LogProb) - top) * invT)
		w = append(w, e)
		z += e
	}
	s.candW = w
	n := len(w)
	if s.topP < 1 {
		target, cum := s.topP*z, 0.0
		for i, e := range w {
			if cum += e; cum >= target {
				n = i + 1
				break
			}
		}
	}
	if s.minP > 0 { // w[0] is 1, the most likely token
		for thr := float64(s.minP); n > 1 && w[n-1] < thr; n-- {
		}
	}
	return n
}

// addTies replaces the candidates tied with the last one by every token
// with that logit, in id order, so that top-k keeps all ties with the k-th.
// tied holds the ids of the ties outside cand if topN could record all
// (len(tied) == ties); otherwise a second pass finds them.
func addTies(logits []float32, cand []TokenLogProb, tied []int32, ties int) []TokenLogProb {
	t := cand[len(cand)-1].LogProb
	j := len(cand)
	for j > 0 && cand[j-1].LogProb == t {
		j--
	}
	if len(tied) == ties {
		for _, id := range tied {
			cand = append(cand, TokenLogProb{ID: id, LogProb: t})
		}
		slices.SortFunc(cand[j:], func(a, b TokenLogProb) int { return int(a.ID) - int(b.ID) })
		return cand
	}
	cand = cand[:j]
	for i, l := range logits {
		if l == t {
			cand = append(cand, TokenLogProb{ID: int32(i), LogProb: l})
		}
	}
	return cand
}

// drawList draws among the first n candidates in proportion to candW.
func (s *Sampler) drawList(n int, u float64) int32 {
	w := s.candW[:n]
	var z float64
	for _, e := range w {
		z += e
	}
	target, cum, last := u*z, 0.0, 0
	for i, e := range w {
		if e > 0 {
			cum += e
			last = i
			if target < cum {
				return s.cand[i].ID
			}
		}
	}
	return s.cand[last].ID // u*z rounded up to the total
}
