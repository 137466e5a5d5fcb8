package constrain

import (
	"bytes"
	"encoding/binary"
	"slices"
	"sync"
)

// Vocab indexes a vocabulary's tokens by their bytes: a trie stored in
// preorder, so that the walk that computes a mask skips a rejected prefix's
// whole subtree with one jump. It is immutable and safe for concurrent use.
type Vocab struct {
	size     int      // ids 0..size-1 (the model's logits; may exceed the tokenizer's)
	label    []byte   // node i's byte
	depth    []uint16 // node i's depth (1 for a first byte)
	end      []int32  // one past node i's subtree
	tokFirst []int32  // node i's tokens: toks[tokFirst[i]:tokFirst[i+1]]
	toks     []int32
	maxDepth int

	off   []int32 // TokenBytes(id) = data[off[id]:off[id+1]]; empty: not a JSON token
	data  []byte
	words int

	spaceOnce sync.Once
	spaceIDs  []int32 // the tokens of at most two whitespace bytes
}

// spaces lists the tokens made of one or two whitespace bytes.
func (v *Vocab) spaces() []int32 {
	v.spaceOnce.Do(func() {
		for id := 0; id+1 < len(v.off); id++ {
			if b := v.bytesOf(int32(id)); len(b) > 0 && len(b) <= 2 && allSpace(b) {
				v.spaceIDs = append(v.spaceIDs, int32(id))
			}
		}
	})
	return v.spaceIDs
}

// NewVocab builds the index. tokens[id] is token id's bytes; nil or empty
// for ids that may never appear in constrained output (special and added
// tokens: the caller decides). size (>= len(tokens)) is the mask's length
// in tokens.
func NewVocab(tokens [][]byte, size int) *Vocab {
	size = max(size, len(tokens))
	v := &Vocab{size: size, words: (size + 63) / 64, off: make([]int32, len(tokens)+1)}
	var ids []int32
	for id, t := range tokens {
		v.data = append(v.data, t...)
		v.off[id+1] = int32(len(v.data))
		if len(t) > 0 {
			ids = append(ids, int32(id))
		}
	}
	tb := func(id int32) []byte { return v.data[v.off[id]:v.off[id+1]] }
	slices.SortStableFunc(ids, func(a, b int32) int { return bytes.Compare(tb(a), tb(b)) })
	var stack []int32 // the nodes of the previous token's path
	var prev []byte
	for _, id := range ids {
		t := tb(id)
		lcp := 0
		for lcp < len(t) && lcp < len(prev) && t[lcp] == prev[lcp] {
			lcp++
		}
		for len(stack) > lcp {
			v.end[stack[len(stack)-1]] = int32(len(v.label))
			stack = stack[:len(stack)-1]
		}
		for d := lcp; d < len(t); d++ {
			stack = append(stack, int32(len(v.label)))
			v.label = append(v.label, t[d])
			v.depth = append(v.depth, uint16(d+1))
			v.end = append(v.end, 0)
			v.tokFirst = append(v.tokFirst, int32(len(v.toks)))
		}
		v.toks = append(v.toks, id)
		v.maxDepth = max(v.maxDepth, len(t))
		prev = t
	}
	for _, n := range stack {
		v.end[n] = int32(len(v.label))
	}
	v.tokFirst = append(v.tokFirst, int32(len(v.toks)))
	return v
}

// Size is the number of token ids a mask covers.
func (v *Vocab) Size() int { return v.size }

func (v *Vocab) bytesOf(id int32) []byte {
	if id < 0 || int(id)+1 >= len(v.off) {
		return nil
	}
	return v.data[v.off[id]:v.off[id+1]]
}

// walker is one mask computation's scratch.
type walker struct {
	levels [][]config
}

// walk sets in mask the tokens whose bytes some configuration of init
// accepts.
func (v *Vocab) walk(w *walker, init []config, mask []uint64) {
	if len(w.levels) < v.maxDepth+1 {
		w.levels = make([][]config, v.maxDepth+1)
	}
	w.levels[0] = append(w.levels[0][:0], init...)
	for i := 0; i < len(v.label); {
		d := v.depth[i]
		cur := w.levels[d][:0]
		b := v.label[i]
		for _, c := range w.levels[d-1] {
			cur = step(c, b, cur)
		}
		cur = dedupe(cur)
		w.levels[d] = cur
		if len(cur) == 0 {
			i = int(v.end[i])
			continue
		}
		for _, id := range v.toks[v.tokFirst[i]:v.tokFirst[i+1]] {
			mask[id>>6] |= 1 << (id & 63)
		}
		i++
	}
}

// dedupe drops repeated configurations (alternatives that converged).
func dedupe(s []config) []config {
	if len(s) < 2 {
		return s
	}
	out := s[:1]
	for _, c := range s[1:] {
		if !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out
}

// maxCachedMasks bounds a grammar's mask cache (a Qwen vocabulary's mask is
// ~19 KB).
const maxCachedMasks = 256

// maskCache maps an automaton state to the mask computed for it.
type maskCache struct {
	mu    sync.Mutex
	vocab *Vocab
	m     map[string][]uint64
}

func (c *maskCache) get(v *Vocab, key []byte) []uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.vocab != v {
		return nil
	}
	return c.m[string(key)]
}

func (c *maskCache) put(v *Vocab, key []byte, mask []uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.vocab != v || c.m == nil {
		c.vocab, c.m = v, map[string][]uint64{}
	}
	if len(c.m) >= maxCachedMasks {
		for k := range c.m { // drop an arbitrary entry
			delete(c.m, k)
			break
		}
	}
	c.m[string(key)] = slices.Clone(mask)
}

// stateKey serialises a state for the mask cache: everything a step reads.
// Each field is a uvarint and each configuration starts with its frame
// count, so distinct states give distinct keys. A constrained string's
// rune count enters only as its distance to the bounds, clamped past depth
// (the longest token: no token can tell such counts apart).
func stateKey(dst []byte, s []config, depth int) []byte {
	put := func(x int64) { dst = binary.AppendUvarint(dst, uint64(x)) }
	for i := range s {
		c := &s[i]
		frames := 0
		for f := c.up; f != nil; f = f.up {
			frames++
		}
		put(int64(frames))
		l := &c.lex
		var lit int64
		if l.lit != nil {
			lit = int64(l.lit.id)
		}
		flags := int64(l.mode) | int64(l.sub)<<3 | int64(l.ws)<<6
		if l.integer {
			flags |= 1 << 14
		}
		if l.key {
			flags |= 1 << 15
		}
		put(flags)
		put(lit)
		put(int64(l.cand))
		put(int64(l.n))
		put(int64(l.lo) | int64(l.hi)<<8)
		if l.str != nil {
			clamp := func(x int64) int64 { return max(0, min(x, int64(depth)+1)) }
			var rx int64
			if l.rx != nil {
				rx = int64(l.rx.id)
			}
			toMax := int64(depth) + 2
			if l.str.maxLen >= 0 {
				toMax = clamp(int64(l.str.maxLen) - int64(l.cnt))
			}
			put(int64(l.str.id))
			put(rx)
			put(int64(l.code))
			put(clamp(int64(l.str.minLen) - int64(l.cnt)))
			put(toMax)
		} else {
			put(0)
			put(int64(l.cnt)) // a raw XML value's UTF-8 bytes to go
			// A GBNF character's bits so far (a plain string's partial
			// character is told by lo, hi and n alone: kept out, for hits).
			if l.mode == lexGram {
				put(int64(l.code))
			} else {
				put(0)
			}
		}
		if l.num != nil {
			neg := int64(0)
			if l.neg {
				neg = 1
			}
			put(int64(l.num.id))
			put(neg)
			put(l.val)
			put(int64(l.frac))
		} else {
			put(0)
		}
		put(int64(c.node.id))
		put(int64(c.idx))
		put(int64(c.phase))
		for f := c.up; f != nil; f = f.up {
			put(int64(f.node.id))
			put(int64(f.idx))
			put(int64(f.phase))
		}
	}
	return dst
}
