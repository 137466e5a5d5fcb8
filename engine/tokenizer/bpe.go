package tokenizer

import "sync"

// merge is the result of merging a pair of tokens: the merge's rank (its line
// in the merges list; lower merges first) and the merged token's id.
type merge struct {
	rank int32
	id   int32
}

func pairKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

// symbol is one token of a word being merged, in a doubly linked list over
// the initial positions; size 0 marks a symbol absorbed by its left neighbour.
type symbol struct {
	id         int32
	prev, next int32
	size       int32
}

// candidate is a possible merge of the symbol at pos with its right
// neighbour; the queue pops the lowest rank, then the lowest pos.
type candidate struct {
	rank  int32
	pos   int32
	newID int32
}

type mergeScratch struct {
	syms []symbol
	heap []candidate
}

var scratchPool = sync.Pool{New: func() any { return new(mergeScratch) }}

// bpeWord appends the ids of word (raw bytes of one pre-token).
func (t *Tokenizer) bpeWord(dst []int32, word string) []int32 {
	if t.ignoreMerges {
		if id, ok := t.bytesToID[word]; ok {
			return append(dst, id)
		}
	}
	cacheable := len(word) <= maxCachedWord
	if cacheable {
		if ids, ok := t.cache.get(word); ok {
			return append(dst, ids...)
		}
	}
	start := len(dst)
	sc := scratchPool.Get().(*mergeScratch)
	dst = t.mergeWord(dst, word, sc)
	scratchPool.Put(sc)
	if cacheable {
		t.cache.put(word, dst[start:])
	}
	return dst
}

// initialSymbols fills sc.syms with one symbol per byte of word (the
// byte-level alphabet maps each byte to one character). A byte missing from
// the vocabulary becomes the unknown token (runs fused when fuseUnk) or, with
// no unknown token, is dropped, as HF does.
func (t *Tokenizer) initialSymbols(word string, sc *mergeScratch) []symbol {
	syms := sc.syms[:0]
	unkOpen := false
	for i := 0; i < len(word); i++ {
		id := t.byteID[word[i]]
		if id < 0 {
			if t.unkID < 0 {
				continue
			}
			if unkOpen && t.fuseUnk {
				syms[len(syms)-1].size++
				continue
			}
			id = t.unkID
			unkOpen = true
		} else {
			unkOpen = false
		}
		syms = append(syms, symbol{id: id, size: 1})
	}
	for i := range syms {
		syms[i].prev = int32(i) - 1
		syms[i].next = int32(i) + 1
	}
	if len(syms) > 0 {
		syms[len(syms)-1].next = -1
	}
	sc.syms = syms
	return syms
}

// mergeWord runs HF's BPE merge loop (Word::merge_all): a priority queue of
// candidate merges, lowest rank first and leftmost on ties, where a popped
// candidate is applied only if the pair now at its position still merges to
// the same token.
func (t *Tokenizer) mergeWord(dst []int32, word string, sc *mergeScratch) []int32 {
	syms := t.initialSymbols(word, sc)
	h := sc.heap[:0]
	for i := 0; i+1 < len(syms); i++ {
		if m, ok := t.merges[pairKey(syms[i].id, syms[i+1].id)]; ok {
			h = heapPush(h, candidate{m.rank, int32(i), m.id})
		}
	}
	for len(h) > 0 {
		var top candidate
		top, h = heapPop(h)
		s := &syms[top.pos]
		if s.size == 0 || s.next < 0 {
			continue
		}
		nextPos := s.next
		right := syms[nextPos]
		if m, ok := t.merges[pairKey(s.id, right.id)]; !ok || m.id != top.newID {
			continue
		}
		s.id = top.newID
		s.size += right.size
		s.next = right.next
		syms[nextPos].size = 0
		if right.next >= 0 {
			syms[right.next].prev = top.pos
		}
		if s.prev >= 0 {
			if m, ok := t.merges[pairKey(syms[s.prev].id, s.id)]; ok {
				h = heapPush(h, candidate{m.rank, s.prev, m.id})
			}
		}
		if s.next >= 0 {
			if m, ok := t.merges[pairKey(s.id, syms[s.next].id)]; ok {
				h = heapPush(h, candidate{m.rank, top.pos, m.id})
			}
		}
	}
	sc.heap = h
	for i := range syms {
		if syms[i].size != 0 {
			dst = append(dst, syms[i].id)
		}
	}
	return dst
}

func candLess(a, b candidate) bool {
	return a.rank < b.rank || (a.rank == b.rank && a.pos < b.pos)
}

func heapPush(h []candidate, c candidate) []candidate {
	h = append(h, c)
	i := len(h) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !candLess(h[i], h[p]) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
	return h
}

func heapPop(h []candidate) (candidate, []candidate) {
	top := h[0]
	n := len(h) - 1
	h[0] = h[n]
	h = h[:n]
	i := 0
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && candLess(h[r], h[l]) {
			m = r
		}
		if !candLess(h[m], h[i]) {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
	return top, h
}
