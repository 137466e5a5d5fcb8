package tokenizer

import (
	"hash/maphash"
	"strings"
	"sync/atomic"
)

// Words longer than this are not cached: they rarely repeat, and bounding
// the key size bounds the cache's memory.
const maxCachedWord = 64

const (
	cacheSlots    = 1 << 17 // open-addressing table size (a power of two)
	cacheMaxWords = cacheSlots / 2
	cacheProbes   = 16
)

// wordCache maps a pre-token's bytes to its BPE ids. It is safe for
// concurrent use and lock-free: a lookup is atomic loads only, so encoders on
// many cores do not contend (an RWMutex's reader count alone cost more than
// the lookup). Entries are immutable and published with a compare-and-swap
// into an open-addressing table; when the table is half full it is replaced
// by an empty one, which bounds memory without per-entry eviction.
type wordCache struct {
	seed  maphash.Seed
	table atomic.Pointer[cacheTable]
}

type cacheTable struct {
	slots [cacheSlots]atomic.Pointer[cacheEntry]
	count atomic.Int32
}

type cacheEntry struct {
	hash uint64
	word string
	ids  []int32
}

func newWordCache() *wordCache {
	c := &wordCache{seed: maphash.MakeSeed()}
	c.table.Store(new(cacheTable))
	return c
}

// get returns the cached ids of word; the slice must not be modified.
func (c *wordCache) get(word string) ([]int32, bool) {
	h := maphash.String(c.seed, word)
	t := c.table.Load()
	for i, p := h, 0; p < cacheProbes; i, p = i+1, p+1 {
		e := t.slots[i&(cacheSlots-1)].Load()
		if e == nil {
			return nil, false
		}
		if e.hash == h && e.word == word {
			return e.ids, true
		}
	}
	return nil, false
}

// put stores a copy of ids under a copy of word. Losing a race to another
// writer, or finding no free slot nearby, just leaves the word uncached.
func (c *wordCache) put(word string, ids []int32) {
	e := &cacheEntry{
		hash: maphash.String(c.seed, word),
		word: strings.Clone(word), // word may point into a large input
		ids:  append([]int32(nil), ids...),
	}
	t := c.table.Load()
	if t.count.Load() >= cacheMaxWords {
		c.table.CompareAndSwap(t, new(cacheTable))
		t = c.table.Load()
	}
	for i, p := e.hash, 0; p < cacheProbes; i, p = i+1, p+1 {
		slot := &t.slots[i&(cacheSlots-1)]
		if slot.CompareAndSwap(nil, e) {
			t.count.Add(1)
			return
		}
		if old := slot.Load(); old.hash == e.hash && old.word == e.word {
			return
		}
	}
}
