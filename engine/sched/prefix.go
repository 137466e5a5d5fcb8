package sched

import (
	"github.com/infernix/infernix/engine/backend"
	"github.com/infernix/infernix/engine/prefix"
)

// setupTiers connects the host pool and the persistent tier when the model
// exposes a KV pool that can copy blocks; without one the cache stays in
// device memory only.
func (s *Scheduler) setupTiers(m any, host *prefix.HostPool, d prefix.Disk) {
	if host == nil && d == nil {
		return
	}
	owner, ok := m.(backend.KVCacheOwner)
	if !ok {
		return
	}
	kc, ok := owner.KVCache().(backend.KVBlockCopier)
	if !ok || kc.BlockBytes() == 0 {
		return
	}
	s.kvc = kc
	s.kvbuf = make([]byte, kc.BlockBytes())
	if host != nil {
		s.tiers = append(s.tiers, host)
	}
	if d != nil {
		s.disk = d
		s.tiers = append(s.tiers, d)
	}
	// Evictions run on the loop goroutine (reserve, reuse), where the device
	// may be touched: the block goes to the host pool, and to the disk when
	// it was not saved yet (saver.go).
	s.pc.OnEvict(func(key prefix.Key, block int32) {
		read := true
		if host != nil {
			s.kvc.ReadBlock(block, s.kvbuf)
			host.Save(key, s.kvbuf)
			read = false
		}
		s.evicted(key, block, read)
	})
}

// reuse starts a lane that was just admitted (or readmitted after
// preemption): its block table begins with the longest cached prefix of its
// tokens, in whole blocks, always leaving at least the last token to compute
// so that the step produces the logits of the next one. Blocks found in
// device memory come first; the chain then continues from the host pool or
// disk, each block read into a fresh KV block and indexed.
func (s *Scheduler) reuse(l *lane) {
	l.chainKey, l.chainN = l.seed, 0
	n := 0
	// Prompt scoring needs the logits of every prompt position, so such a
	// lane computes its whole prompt (it still adds its blocks to the cache).
	if s.pc != nil && !l.req.PromptLogprobs {
		maxBlocks := (len(l.tokens) - 1) / prefix.BlockSize
		l.blocks, n, l.chainKey = s.pc.Acquire(l.seed, l.tokens, maxBlocks, l.blocks[:0])
		l.pinned = append(l.pinned[:0], l.blocks...)
		l.chainN = n
		if len(s.tiers) > 0 {
			n = s.loadFromTiers(l, maxBlocks)
		}
		if s.snaps != nil {
			n = s.resumeFromSnapshot(l, n, maxBlocks)
		}
		l.computed = n * prefix.BlockSize
		s.pc.Record(n)
	}
	if l.cached < 0 { // first admission: what the request reports
		l.cached = min(n*prefix.BlockSize, l.nPrompt)
	}
}

// loadFromTiers extends l's cached prefix with blocks of the host pool or
// the disk and returns the lane's number of reused blocks. It stops at the
// first block that no tier holds or can read, or that has no free KV block
// (idle cached blocks are evicted for it, never running lanes' blocks).
func (s *Scheduler) loadFromTiers(l *lane, maxBlocks int) int {
	for l.chainN < maxBlocks {
		i := l.chainN
		toks := l.tokens[i*prefix.BlockSize : (i+1)*prefix.BlockSize]
		k := prefix.BlockKey(l.chainKey, toks)
		var tier prefix.Disk
		for _, t := range s.tiers {
			if t.Has(k) {
				tier = t
				break
			}
		}
		if tier == nil {
			break
		}
		var ok bool
		if l.blocks, ok = s.alloc.Alloc(l.blocks, 1); !ok {
			if s.pc.Evict(1) == 0 {
				break
			}
			if l.blocks, ok = s.alloc.Alloc(l.blocks, 1); !ok {
				break
			}
		}
		blk := l.blocks[len(l.blocks)-1]
		if err := tier.Load(k, s.kvbuf); err != nil {
			s.alloc.Release(l.blocks[len(l.blocks)-1:])
			l.blocks = l.blocks[:len(l.blocks)-1]
			break
		}
		s.kvc.WriteBlock(blk, s.kvbuf)
		key, pinned := s.pc.Register(l.chainKey, i == 0, toks, blk)
		if pinned {
			l.pinned = append(l.pinned, blk)
			if s.disk != nil && tier != s.disk {
				s.markBlock(key) // from the host pool: not on disk yet
			}
		}
		l.chainKey = key
		l.chainN++
	}
	return l.chainN
}

// register indexes every block of l that became full in the last step. The
// blocks are never written again: the lane writes only later positions. New
// blocks are marked for the disk tier's next save round (saver.go).
func (s *Scheduler) register(l *lane) {
	if s.pc == nil {
		return
	}
	for (l.chainN+1)*prefix.BlockSize <= l.computed {
		i := l.chainN
		blk := l.blocks[i]
		key, pinned := s.pc.Register(l.chainKey, i == 0, l.tokens[i*prefix.BlockSize:(i+1)*prefix.BlockSize], blk)
		if pinned {
			l.pinned = append(l.pinned, blk)
			if s.disk != nil {
				s.markBlock(key)
			}
		}
		l.chainKey = key
		l.chainN++
	}
}

// releaseBlocks gives back a lane's pins and block references; cached blocks
// stay in the index (idle) until evicted, the rest return to the pool.
func (s *Scheduler) releaseBlocks(l *lane) {
	if len(l.pinned) > 0 {
		s.pc.Unpin(l.pinned)
		l.pinned = l.pinned[:0]
	}
	if len(l.blocks) > 0 {
		s.alloc.Release(l.blocks)
		l.blocks = l.blocks[:0]
	}
	l.chainN = 0
}
