package prefix

import "math"

// Score ranks a cached entry for eviction by recency and reuse together: the
// lowest score goes first. Every use of an entry is worth 1 and decays by half
// every half-life H, so at time T the entry is worth Σᵢ 2^(−(T−tᵢ)/H) over its
// uses tᵢ. That sum is 2^(S − T/H) with
//
//	S = log₂ Σᵢ 2^(tᵢ/H)
//
// and S is what a Score holds: it changes only when the entry is used, and two
// entries compare the same way at every T, so pools can keep their entries
// ordered (sorted or in a heap) without rescoring as time passes. Consequences:
//   - an entry used once at t scores t/H (pure recency among single-use
//     entries: then eviction is LRU);
//   - k uses at about the same time score t/H + log₂ k: a block reused k times
//     outlives a once-used block up to H·log₂ k newer;
//   - credit fades: a hot entry that is no longer used drops one half-life of
//     rank per half-life of age, and eventually goes.
//
// The clock is the caller's: the memory pools count operations (a tick per
// lookup or stored block), the disk tier counts seconds so that scores
// survive restarts. The arithmetic does not allocate.
type Score float64

// FirstUse is the score of an entry used once, at now.
func FirstUse(now, halfLife float64) Score { return Score(now / halfLife) }

// Use adds a use at now: S' = log₂(2^S + 2^(now/H)), computed without
// overflow as max + log₂(1 + 2^(min−max)).
func (s Score) Use(now, halfLife float64) Score {
	a, b := float64(s), now/halfLife
	if a < b {
		a, b = b, a
	}
	return Score(a + math.Log2(1+math.Exp2(b-a)))
}

// Heaped is an element of a ScoreHeap: it knows its score and its position
// in the heap (kept up to date by the heap, -1 when out).
type Heaped interface {
	HeapScore() Score
	SetHeapIndex(int)
}

// ScoreHeap is a min-heap of entries by Score: Min is the next to evict. A
// pool calls Fix after an entry's score changes. It does not allocate beyond
// growing its slice.
type ScoreHeap[E Heaped] struct{ items []E }

// Len is the number of entries.
func (h *ScoreHeap[E]) Len() int { return len(h.items) }

// Push adds e.
func (h *ScoreHeap[E]) Push(e E) {
	h.items = append(h.items, e)
	e.SetHeapIndex(len(h.items) - 1)
	h.up(len(h.items) - 1)
}

// Min is the lowest-scored entry (the heap must not be empty).
func (h *ScoreHeap[E]) Min() E { return h.items[0] }

// Remove takes the entry at index i out and returns it.
func (h *ScoreHeap[E]) Remove(i int) E {
	n := len(h.items) - 1
	e := h.items[i]
	if i != n {
		h.swap(i, n)
	}
	var zero E
	h.items[n] = zero
	h.items = h.items[:n]
	if i != n {
		h.Fix(i)
	}
	e.SetHeapIndex(-1)
	return e
}

// Fix restores the order after the score of the entry at index i changed.
func (h *ScoreHeap[E]) Fix(i int) {
	if !h.down(i) {
		h.up(i)
	}
}

func (h *ScoreHeap[E]) less(i, j int) bool { return h.items[i].HeapScore() < h.items[j].HeapScore() }

func (h *ScoreHeap[E]) swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.items[i].SetHeapIndex(i)
	h.items[j].SetHeapIndex(j)
}

func (h *ScoreHeap[E]) up(j int) {
	for j > 0 {
		i := (j - 1) / 2
		if !h.less(j, i) {
			break
		}
		h.swap(i, j)
		j = i
	}
}

func (h *ScoreHeap[E]) down(i0 int) bool {
	i, n := i0, len(h.items)
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		j := l
		if r := l + 1; r < n && h.less(r, l) {
			j = r
		}
		if !h.less(j, i) {
			break
		}
		h.swap(i, j)
		i = j
	}
	return i > i0
}
