// Package kv manages ownership of the paged KV cache's blocks. The backend
// holds the memory; this package decides which sequence owns which block.
//
// Invariants: a block is either free or referenced by ≥ 1 owners; Free
// returns a block to the pool only when its last reference goes; the
// allocator never hands out a block that is referenced.
package kv

import "sync"

// Allocator hands out block ids in [0, n).
type Allocator struct {
	mu   sync.Mutex
	free []int32
	refs []int32
}

// New returns an allocator of n blocks, all free.
func New(n int) *Allocator {
	a := &Allocator{free: make([]int32, n), refs: make([]int32, n)}
	for i := range a.free {
		a.free[i] = int32(n - 1 - i) // pop from the end: low ids first
	}
	return a
}

// Total is the number of blocks.
func (a *Allocator) Total() int { return len(a.refs) }

// Free is the number of unreferenced blocks.
func (a *Allocator) FreeCount() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.free)
}

// Alloc appends n fresh blocks to dst, or returns false (allocating none)
// when fewer than n are free.
func (a *Allocator) Alloc(dst []int32, n int) ([]int32, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if n > len(a.free) {
		return dst, false
	}
	for i := 0; i < n; i++ {
		b := a.free[len(a.free)-1]
		a.free = a.free[:len(a.free)-1]
		a.refs[b] = 1
		dst = append(dst, b)
	}
	return dst, true
}

// Retain adds a reference to each block (prefix sharing).
func (a *Allocator) Retain(blocks []int32) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, b := range blocks {
		a.refs[b]++
	}
}

// Release drops one reference from each block, freeing those that reach zero.
func (a *Allocator) Release(blocks []int32) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, b := range blocks {
		if a.refs[b] <= 0 {
			panic("kv: release of a free block")
		}
		a.refs[b]--
		if a.refs[b] == 0 {
			a.free = append(a.free, b)
		}
	}
}

// BlocksFor is the number of blocks that hold n tokens.
func BlocksFor(n int) int { return (n + 63) / 64 }
