// Package prefix is the prefix cache: an index from content keys to KV blocks
// that hold fully computed 64-token blocks, so that a prompt that starts like
// an earlier sequence reuses that sequence's KV instead of recomputing it.
//
// Ownership (with engine/kv): the cache holds one allocator reference on each
// block it indexes; a lane that uses a cached block holds its own reference and
// a pin. Invariants:
//   - Only full blocks are indexed, and a block is never written after it is
//     indexed (its owner lane writes only positions past it).
//   - Every indexed entry's parent is indexed (eviction takes leaves only), so
//     a lookup that walks from the seed finds every reachable entry.
//   - A pinned entry (used by a running lane) is never evicted.
//
// Tiers: blocks evicted from the device pool may go to a HostPool (see
// Cache.OnEvict), and blocks may persist on a Disk (store.PrefixStore); the
// scheduler continues a lookup past the device cache through them, copying
// blocks back with backend.KVBlockCopier. Hybrid models also need
// recurrent-state snapshots (engine/sched/snapshots.go). Every tier evicts by
// the same Score of recency and reuse (score.go), each on its own clock.
//
// The cache is safe for concurrent use; the scheduler calls it from its loop,
// and metrics readers call Stats from anywhere.
package prefix

import (
	"slices"
	"sort"
	"sync"

	"github.com/infernix/infernix/engine/backend"
	"github.com/infernix/infernix/engine/kv"
)

// BlockSize is the number of tokens per cached block (the KV block size).
const BlockSize = backend.BlockSize

// The eviction score (see Score) runs on a clock that ticks once per lookup
// and once per registered block. Its half-life is half the pool: a block
// reused k times outlives once-used blocks registered up to (pool/2)·log₂ k
// blocks after it; with no reuse eviction is least recently used.
const minHalfLife = 8

func poolHalfLife(blocks int) float64 { return float64(max(blocks/2, minHalfLife)) }

// Stats are the cache's counters.
type Stats struct {
	Queries   uint64 // lookups (one per admitted request that may reuse)
	Hits      uint64 // lookups that reused at least one block
	HitTokens uint64 // tokens served from the cache
	Evictions uint64 // blocks dropped to make room
	Blocks    int    // indexed blocks
	Idle      int    // indexed blocks no lane uses (reclaimable)
}

type entry struct {
	key, parent Key
	block       int32
	pins        int32 // lanes using the block
	children    int32 // indexed entries whose parent this is
	score       Score
}

// Cache indexes blocks of one allocator.
type Cache struct {
	mu      sync.Mutex
	alloc   *kv.Allocator
	byKey   map[Key]*entry
	byBlock map[int32]*entry
	clock   float64
	half    float64 // the score's half-life in clock ticks
	idle    int
	st      Stats
	cand    []*entry
	onEvict func(key Key, block int32)
}

// OnEvict sets a function called with each evicted block, before the block
// returns to the allocator, while the cache is locked (it must not call the
// cache): the scheduler copies the block to the host pool there.
func (c *Cache) OnEvict(f func(key Key, block int32)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.onEvict = f
}

// New returns an empty cache over alloc's blocks.
func New(alloc *kv.Allocator) *Cache {
	return &Cache{alloc: alloc, byKey: map[Key]*entry{}, byBlock: map[int32]*entry{}, half: poolHalfLife(alloc.Total())}
}

// Acquire looks up the longest cached prefix of toks, in whole blocks and at
// most maxBlocks of them, starting from seed. The blocks found are appended to
// dst, each with one allocator reference and one pin for the caller (release
// both with Unpin and kv.Allocator.Release). It returns dst, the number of
// blocks found and the key of the last one (seed when none). Acquire does not
// count: the caller reports the lookup's outcome with Record.
func (c *Cache) Acquire(seed Key, toks []int32, maxBlocks int, dst []int32) ([]int32, int, Key) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.clock++
	key, n := seed, 0
	for n < maxBlocks && (n+1)*BlockSize <= len(toks) {
		k := BlockKey(key, toks[n*BlockSize:(n+1)*BlockSize])
		e := c.byKey[k]
		if e == nil {
			break
		}
		if e.pins == 0 {
			c.idle--
		}
		e.pins++
		e.score = e.score.Use(c.clock, c.half)
		dst = append(dst, e.block)
		key = k
		n++
	}
	if n > 0 {
		c.alloc.Retain(dst[len(dst)-n:])
	}
	return dst, n, key
}

// Block returns the block indexed under key, if any. It stays indexed (and
// its content valid) until the next Evict; the scheduler reads blocks to
// persist them between its own evictions.
func (c *Cache) Block(key Key) (int32, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.byKey[key]; e != nil {
		return e.block, true
	}
	return 0, false
}

// Children reports how many indexed blocks continue from the block indexed
// under key (0 when key is not indexed). A lookup that stops at a block with
// children stopped at a branch of the prefix tree: another sequence shares
// the prefix up to there and goes on differently (the scheduler keeps a
// hybrid model's state snapshot at such a point: snapshots.go).
func (c *Cache) Children(key Key) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.byKey[key]; e != nil {
		return int(e.children)
	}
	return 0
}

// Record counts one lookup that reused blocks blocks (from memory or disk).
func (c *Cache) Record(blocks int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.st.Queries++
	if blocks > 0 {
		c.st.Hits++
		c.st.HitTokens += uint64(blocks * BlockSize)
	}
}

// Register indexes block, which holds the fully computed tokens toks
// (BlockSize of them) following the block named parent. When the key is new
// the cache takes its own allocator reference and pins the block for the
// caller, and Register returns pinned=true; when another block already holds
// the same content nothing changes (the caller keeps its private copy). Either
// way it returns the block's key, the parent of the caller's next block.
// A parent that is not indexed (evicted meanwhile) makes the block
// unreachable, so it is not indexed either.
func (c *Cache) Register(parent Key, root bool, toks []int32, block int32) (key Key, pinned bool) {
	key = BlockKey(parent, toks)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.clock++
	if e := c.byKey[key]; e != nil {
		e.score = e.score.Use(c.clock, c.half)
		return key, false
	}
	var pe *entry
	if !root {
		if pe = c.byKey[parent]; pe == nil {
			return key, false
		}
	}
	if _, dup := c.byBlock[block]; dup {
		return key, false // cannot happen while callers register only their own fresh blocks
	}
	e := &entry{key: key, parent: parent, block: block, pins: 1, score: FirstUse(c.clock, c.half)}
	if pe != nil {
		pe.children++
	} else {
		e.parent = Key{} // marks a root entry
	}
	c.byKey[key] = e
	c.byBlock[block] = e
	c.alloc.Retain([]int32{block})
	return key, true
}

// Unpin drops the caller's pin on each block (those returned by Acquire or
// pinned by Register). Blocks stay indexed until evicted.
func (c *Cache) Unpin(blocks []int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, b := range blocks {
		e := c.byBlock[b]
		if e == nil || e.pins <= 0 {
			panic("prefix: unpin of a block that is not pinned")
		}
		e.pins--
		if e.pins == 0 {
			c.idle++
		}
	}
}

// Evict drops up to n idle blocks, lowest score (oldest, least reused) first
// and leaves before their parents, releasing the cache's references so that
// the allocator can hand them out. It returns how many it dropped.
func (c *Cache) Evict(n int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	// Candidates sorted by score, highest first so that the next victim pops
	// off the end; a parent whose last child goes joins in score order.
	c.cand = c.cand[:0]
	for _, e := range c.byKey {
		if e.pins == 0 && e.children == 0 {
			c.cand = append(c.cand, e)
		}
	}
	slices.SortFunc(c.cand, func(a, b *entry) int {
		switch {
		case a.score > b.score:
			return -1
		case a.score < b.score:
			return 1
		}
		return 0
	})
	done := 0
	for done < n && len(c.cand) > 0 {
		e := c.cand[len(c.cand)-1]
		c.cand = c.cand[:len(c.cand)-1]
		pe := c.byKey[e.parent]
		c.drop(e)
		done++
		if pe != nil && pe.pins == 0 && pe.children == 0 {
			sc := pe.score
			i := sort.Search(len(c.cand), func(i int) bool { return c.cand[i].score <= sc })
			c.cand = append(c.cand, nil)
			copy(c.cand[i+1:], c.cand[i:])
			c.cand[i] = pe
		}
	}
	clear(c.cand)
	c.cand = c.cand[:0]
	return done
}

func (c *Cache) drop(e *entry) {
	delete(c.byKey, e.key)
	delete(c.byBlock, e.block)
	if pe := c.byKey[e.parent]; pe != nil {
		pe.children--
	}
	c.idle--
	c.st.Evictions++
	if c.onEvict != nil {
		c.onEvict(e.key, e.block)
	}
	c.alloc.Release([]int32{e.block})
}

// Stats returns the counters.
func (c *Cache) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.st
	s.Blocks = len(c.byKey)
	s.Idle = c.idle
	return s
}
