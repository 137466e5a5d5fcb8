package sample

import (
	"math"
	"math/rand/v2"
	"slices"
)

// This file holds a deliberately naive reference of the pipeline (full
// sort, float64 throughout) that the optimised paths are checked against,
// and helpers to read a Sampler's plan as a probability vector.

// refAdjust applies logit bias and penalties the obvious way.
func refAdjust(logits []float32, p Params, prompt, gen []int32) []float32 {
	l := slices.Clone(logits)
	for id, b := range p.LogitBias {
		if int(id) < len(l) {
			l[id] += b
		}
	}
	if p.RepetitionPenalty != 1 && p.RepetitionPenalty > 0 {
		seen := map[int32]bool{}
		for _, t := range append(slices.Clone(prompt), gen...) {
			if seen[t] {
				continue
			}
			seen[t] = true
			if l[t] > 0 {
				l[t] /= p.RepetitionPenalty
			} else {
				l[t] *= p.RepetitionPenalty
			}
		}
	}
	counts := map[int32]int{}
	for _, t := range gen {
		counts[t]++
	}
	for t, c := range counts {
		l[t] -= p.FrequencyPenalty * float32(c)
		l[t] -= p.PresencePenalty
	}
	return l
}

// refProbs returns the distribution Sample draws from, for logits already
// adjusted: sort everything, cut, normalise.
func refProbs(logits []float32, p Params) []float64 {
	v := len(logits)
	probs := make([]float64, v)
	l := make([]float64, v)
	for i, x := range logits {
		l[i] = float64(x)
		if x != x {
			l[i] = math.Inf(-1)
		}
	}
	ids := make([]int, v)
	for i := range ids {
		ids[i] = i
	}
	slices.SortStableFunc(ids, func(a, b int) int { // stable: ties by id
		switch {
		case l[a] > l[b]:
			return -1
		case l[a] < l[b]:
			return 1
		}
		return 0
	})
	top := l[ids[0]]
	if p.IsGreedy() || math.IsInf(top, 0) {
		if math.IsInf(top, -1) {
			probs[0] = 1
		} else {
			probs[ids[0]] = 1
		}
		return probs
	}
	keep := v
	if k := p.TopK; k > 0 && k < v {
		if t := l[ids[k-1]]; !math.IsInf(t, -1) {
			for keep = k; keep < v && l[ids[keep]] == t; keep++ {
			}
		}
	}
	w := make([]float64, keep)
	z := 0.0
	for j := range w {
		w[j] = math.Exp((l[ids[j]] - top) / float64(p.Temperature))
		z += w[j]
	}
	n := keep
	if p.TopP < 1 {
		cum := 0.0
		for j := range w {
			if cum += w[j]; cum >= float64(p.TopP)*z {
				n = j + 1
				break
			}
		}
	}
	if p.MinP > 0 {
		for n > 1 && w[n-1] < float64(p.MinP) {
			n--
		}
	}
	z = 0
	for j := range n {
		z += w[j]
	}
	for j := range n {
		probs[ids[j]] = w[j] / z
	}
	return probs
}

// implProbs returns the distribution s would draw from for logits,
// without drawing: the plan of the path s takes, normalised.
func implProbs(s *Sampler, logits []float32) []float64 { return s.Probs(logits, nil) }

// randLogits returns v logits shaped like a language model's: a normal
// bulk and a few strong candidates. With bf16 set they are rounded to
// bfloat16, as many models emit them, which makes exact ties common.
func randLogits(r *rand.Rand, v int, bf16 bool) []float32 {
	l := make([]float32, v)
	for i := range l {
		l[i] = float32(r.NormFloat64() * 2.5)
	}
	for range 8 {
		l[r.IntN(v)] += float32(6 + 6*r.Float64())
	}
	if bf16 {
		for i, x := range l {
			l[i] = math.Float32frombits(math.Float32bits(x) &^ 0xffff)
		}
	}
	return l
}

func seedPtr(s uint64) *uint64 { return &s }
