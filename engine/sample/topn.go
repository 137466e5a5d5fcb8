package sample

import (
	"math"
	"slices"
)

// TokenLogProb is a token id with a log-probability (or, inside this
// package, a raw logit).
type TokenLogProb struct {
	ID      int32
	LogProb float32
}

var negInf = float32(math.Inf(-1))

// ranksBelow reports whether a ranks after b in the order used everywhere
// in this package: higher value first, then lower id.
func ranksBelow(a, b TokenLogProb) bool {
	return a.LogProb < b.LogProb || (a.LogProb == b.LogProb && a.ID > b.ID)
}

func cmpRank(a, b TokenLogProb) int {
	switch {
	case ranksBelow(a, b):
		return 1
	case ranksBelow(b, a):
		return -1
	}
	return 0
}

// topN returns in dst[:n] the n largest logits with their ids, best first
// (ties: lower id first), with NaN ranked as -Inf; n is clamped to
// [0, len(logits)]. It also returns how many tokens outside the result tie
// with its last value (ties at -Inf are not counted) and, if tied is not
// nil, appends their ids to *tied as long as it has spare capacity (the
// caller compares its length with the count). It allocates only if
// cap(dst) < n. Cost: one pass over logits plus O(n log n); a token enters
// the heap only when it beats the current n-th best, which for logits in
// no particular order happens O(n log(V/n)) times.
func topN(logits []float32, n int, dst []TokenLogProb, tied *[]int32) ([]TokenLogProb, int) {
	n = min(max(n, 0), len(logits))
	if cap(dst) < n {
		dst = make([]TokenLogProb, n)
	}
	h := dst[:n]
	if n == 0 {
		return h, 0
	}
	for i := range h {
		l := logits[i]
		if l != l {
			l = negInf
		}
		h[i] = TokenLogProb{ID: int32(i), LogProb: l}
	}
	// Min-heap by rank: h[0] is the worst of the current best n.
	for i := n/2 - 1; i >= 0; i-- {
		siftDown(h, i)
	}
	sel := selector{h: h, worst: h[0].LogProb, tied: tied}
	// Most tokens lose to the n-th best: test blocks of 8 with predictable
	// branches first (NaN fails every comparison).
	i := n
	for ; i+8 <= len(logits); i += 8 {
		b := logits[i : i+8 : i+8]
		w := sel.worst
		if b[0] >= w || b[1] >= w || b[2] >= w || b[3] >= w ||
			b[4] >= w || b[5] >= w || b[6] >= w || b[7] >= w {
			for j, l := range b {
				if l >= sel.worst {
					sel.offer(i+j, l)
				}
			}
		}
	}
	for ; i < len(logits); i++ {
		if l := logits[i]; l >= sel.worst {
			sel.offer(i, l)
		}
	}
	slices.SortFunc(h, cmpRank)
	if sel.worst == negInf {
		sel.ties = 0
	}
	return h, sel.ties
}

// selector is topN's heap with its tie bookkeeping.
type selector struct {
	h     []TokenLogProb
	worst float32 // h[0].LogProb
	ties  int     // tokens outside h equal to worst
	tied  *[]int32
}

// offer considers token i with logit l >= worst, which comes after every
// token already seen (so on equal logits it ranks lower).
func (s *selector) offer(i int, l float32) {
	if l == s.worst {
		s.tie(int32(i))
		return
	}
	evicted := s.h[0].ID // worth worst
	s.h[0] = TokenLogProb{ID: int32(i), LogProb: l}
	siftDown(s.h, 0)
	if s.h[0].LogProb > s.worst {
		s.worst = s.h[0].LogProb
		s.ties = 0 // earlier ties are now below the n-th best
		if s.tied != nil {
			*s.tied = (*s.tied)[:0]
		}
	} else {
		s.tie(evicted) // it still ties with the n-th best
	}
}

func (s *selector) tie(id int32) {
	s.ties++
	if s.tied != nil && len(*s.tied) < cap(*s.tied) {
		*s.tied = append(*s.tied, id)
	}
}

// siftDown restores the min-heap (by rank) property below i.
func siftDown(h []TokenLogProb, i int) {
	for {
		c := 2*i + 1
		if c >= len(h) {
			return
		}
		if c+1 < len(h) && ranksBelow(h[c+1], h[c]) {
			c++
		}
		if !ranksBelow(h[c], h[i]) {
			return
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
}

// argmax returns the lowest id of the largest logit; 0 if none exceeds
// -Inf (NaN never wins).
func argmax(logits []float32) int32 {
	_, id := maxIndex(logits)
	return int32(id)
}

// maxIndex returns the largest logit and the lowest id holding it, NaN
// skipped; (-Inf, 0) if no logit exceeds -Inf. A new maximum is rare after
// the first few tokens, so blocks of 8 are first tested with predictable
// branches; the obvious loop compiles to a chain of dependent moves that
// runs about 2.5 times slower.
func maxIndex(logits []float32) (float32, int) {
	best, id := negInf, 0
	i := 0
	for ; i+8 <= len(logits); i += 8 {
		b := logits[i : i+8 : i+8]
		if b[0] > best || b[1] > best || b[2] > best || b[3] > best ||
			b[4] > best || b[5] > best || b[6] > best || b[7] > best {
			for j, l := range b {
				if l > best {
					best, id = l, i+j
				}
			}
		}
	}
	for ; i < len(logits); i++ {
		if l := logits[i]; l > best {
			best, id = l, i
		}
	}
	return best, id
}
