package prefix

import (
	"testing"

	"github.com/infernix/infernix/engine/kv"
)

// FuzzCacheOps drives lanes through random admissions (lookup + compute +
// register), finishes and evictions over a small pool, checking that pinned
// blocks always map to their content, that a lookup returns exactly the
// blocks registered for that content, and that all blocks come back.
func FuzzCacheOps(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add([]byte{3, 3, 3, 200, 201, 202, 17, 9, 128, 1, 1})
	f.Fuzz(func(t *testing.T, ops []byte) {
		const poolBlocks = 12
		a := kv.New(poolBlocks)
		c := New(a)
		seed := Seed()
		// Four "conversations" sharing prefixes: conv i is blocks of
		// content ids [0, i%2+1, i, ...].
		content := func(conv, i int) []int32 {
			id := conv
			switch {
			case i == 0:
				id = 100
			case i == 1:
				id = 200 + conv%2
			}
			t := make([]int32, BlockSize)
			for j := range t {
				t[j] = int32(id*1000 + i*64 + j)
			}
			return t
		}
		type lane struct{ blocks, pinned []int32 }
		var lanes []*lane
		owner := map[int32]Key{} // indexed block → key registered
		for _, op := range ops {
			switch op % 3 {
			case 0, 1: // admit a lane of conv op/3%4 with op/12%4+1 blocks
				conv, n := int(op/3)%4, int(op/12)%4+1
				var toks []int32
				for i := 0; i < n; i++ {
					toks = append(toks, content(conv, i)...)
				}
				l := &lane{}
				var got int
				var key Key
				l.blocks, got, key = c.Acquire(seed, toks, n, nil)
				l.pinned = append(l.pinned, l.blocks...)
				for i, b := range l.blocks {
					if owner[b] != BlockKey(chainKey(seed, toks, i), toks[i*BlockSize:(i+1)*BlockSize]) {
						t.Fatalf("lookup returned block %d for other content", b)
					}
				}
				need := n - got
				if need > a.FreeCount() {
					c.Evict(need - a.FreeCount())
				}
				var ok bool
				if l.blocks, ok = a.Alloc(l.blocks, need); !ok {
					c.Unpin(l.pinned)
					a.Release(l.blocks)
					continue
				}
				for i := got; i < n; i++ {
					k, pinned := c.Register(key, i == 0, toks[i*BlockSize:(i+1)*BlockSize], l.blocks[i])
					if pinned {
						owner[l.blocks[i]] = k
						l.pinned = append(l.pinned, l.blocks[i])
					}
					key = k
				}
				lanes = append(lanes, l)
			case 2: // finish the oldest lane
				if len(lanes) == 0 {
					c.Evict(int(op / 3))
					continue
				}
				l := lanes[0]
				lanes = lanes[1:]
				c.Unpin(l.pinned)
				a.Release(l.blocks)
			}
			// Evicted blocks must not be pinned by a running lane.
			for _, l := range lanes {
				for _, b := range l.pinned {
					if _, ok := c.byBlock[b]; !ok {
						t.Fatalf("pinned block %d was evicted", b)
					}
				}
			}
			for b := range owner {
				if _, ok := c.byBlock[b]; !ok {
					delete(owner, b)
				}
			}
		}
		for _, l := range lanes {
			c.Unpin(l.pinned)
			a.Release(l.blocks)
		}
		c.Evict(poolBlocks)
		if a.FreeCount() != poolBlocks || c.Stats().Blocks != 0 {
			t.Fatalf("leak: %d free, %+v", a.FreeCount(), c.Stats())
		}
	})
}

// chainKey is the key of the block before block i of toks (seed for 0).
func chainKey(seed Key, toks []int32, i int) Key {
	k := seed
	for j := 0; j < i; j++ {
		k = BlockKey(k, toks[j*BlockSize:(j+1)*BlockSize])
	}
	return k
}
