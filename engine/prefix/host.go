package prefix

import (
	"errors"
	"sync"
)

// ErrNotHeld is returned by HostPool.Load for a block it does not hold.
var ErrNotHeld = errors.New("prefix: block not in the host pool")

var errHostSize = errors.New("prefix: host block size mismatch")

// HostPool keeps blocks evicted from the device pool in host memory
// (--host-cache-mib); when full, the block with the lowest Score (recency and
// reuse) goes first. Its clock ticks once per Save or Load and the half-life
// is half the pool's capacity in blocks, as in the device cache. It is a tier
// like Disk: the scheduler copies a block in when the cache evicts it and back
// into a device block on a later hit. Buffers of dropped blocks are reused.
// Safe for concurrent use.
type HostPool struct {
	mu       sync.Mutex
	capBytes int64
	used     int64
	clock    float64
	half     float64 // set by the first Save, from the block size
	heap     ScoreHeap[*hostBlock]
	byKey    map[Key]*hostBlock
	spare    [][]byte
	st       HostStats
}

type hostBlock struct {
	key   Key
	data  []byte
	score Score
	index int
}

func (b *hostBlock) HeapScore() Score   { return b.score }
func (b *hostBlock) SetHeapIndex(i int) { b.index = i }

// HostStats are a HostPool's counters.
type HostStats struct {
	Blocks                int
	Bytes                 int64
	Saved, Loaded, Evicts uint64
}

// NewHostPool holds at most capBytes of blocks.
func NewHostPool(capBytes int64) *HostPool {
	return &HostPool{capBytes: capBytes, byKey: map[Key]*hostBlock{}}
}

var _ Disk = (*HostPool)(nil)

// Has implements Disk.
func (h *HostPool) Has(k Key) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, ok := h.byKey[k]
	return ok
}

// Load implements Disk; the block stays held and the load counts as a use.
func (h *HostPool) Load(k Key, dst []byte) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	b := h.byKey[k]
	if b == nil {
		return ErrNotHeld
	}
	if len(dst) != len(b.data) {
		return errHostSize
	}
	copy(dst, b.data)
	h.use(b)
	h.st.Loaded++
	return nil
}

func (h *HostPool) use(b *hostBlock) {
	h.clock++
	b.score = b.score.Use(h.clock, h.half)
	h.heap.Fix(b.index)
}

// Save implements Disk: it copies data, dropping the lowest-scored blocks to
// make room; a block larger than the whole pool is not kept.
func (h *HostPool) Save(k Key, data []byte) {
	n := int64(len(data))
	h.mu.Lock()
	defer h.mu.Unlock()
	if n > h.capBytes || n == 0 {
		return
	}
	if h.half == 0 {
		h.half = poolHalfLife(int(h.capBytes / n))
	}
	if b := h.byKey[k]; b != nil {
		h.use(b)
		return
	}
	for h.used+n > h.capBytes {
		h.dropLowest()
	}
	var buf []byte
	for i := len(h.spare) - 1; i >= 0; i-- {
		if len(h.spare[i]) == len(data) {
			buf = h.spare[i]
			h.spare = append(h.spare[:i], h.spare[i+1:]...)
			break
		}
	}
	if buf == nil {
		buf = make([]byte, len(data))
	}
	copy(buf, data)
	h.clock++
	b := &hostBlock{key: k, data: buf, score: FirstUse(h.clock, h.half)}
	h.byKey[k] = b
	h.heap.Push(b)
	h.used += n
	h.st.Saved++
}

func (h *HostPool) dropLowest() {
	b := h.heap.Remove(0)
	delete(h.byKey, b.key)
	h.used -= int64(len(b.data))
	h.st.Evicts++
	if len(h.spare) < 4 {
		h.spare = append(h.spare, b.data)
	}
}

// Accepting implements Disk: the pool always takes a block (dropping others).
func (h *HostPool) Accepting() bool { return true }

// Stats returns the counters.
func (h *HostPool) Stats() HostStats {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.st
	s.Blocks, s.Bytes = len(h.byKey), h.used
	return s
}
