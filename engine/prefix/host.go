package prefix

import (
	"container/list"
	"errors"
	"sync"
)

// ErrNotHeld is returned by HostPool.Load for a block it does not hold.
var ErrNotHeld = errors.New("prefix: block not in the host pool")

// HostPool keeps blocks evicted from the device pool in host memory
// (--host-cache-mib), least recently used first out when full. It is a tier
// like Disk: the scheduler copies a block in when the cache evicts it and
// back into a device block on a later hit. Buffers of dropped blocks are
// reused. Safe for concurrent use.
type HostPool struct {
	mu       sync.Mutex
	capBytes int64
	used     int64
	lru      *list.List // front: most recent; values *hostBlock
	byKey    map[Key]*list.Element
	spare    [][]byte
	st       HostStats
}

type hostBlock struct {
	key  Key
	data []byte
}

// HostStats are a HostPool's counters.
type HostStats struct {
	Blocks                int
	Bytes                 int64
	Saved, Loaded, Evicts uint64
}

// NewHostPool holds at most capBytes of blocks.
func NewHostPool(capBytes int64) *HostPool {
	return &HostPool{capBytes: capBytes, lru: list.New(), byKey: map[Key]*list.Element{}}
}

var _ Disk = (*HostPool)(nil)

// Has implements Disk.
func (h *HostPool) Has(k Key) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, ok := h.byKey[k]
	return ok
}

// Load implements Disk; the block stays held (and becomes most recent).
func (h *HostPool) Load(k Key, dst []byte) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	e := h.byKey[k]
	if e == nil {
		return ErrNotHeld
	}
	b := e.Value.(*hostBlock)
	if len(dst) != len(b.data) {
		return errors.New("prefix: host block size mismatch")
	}
	copy(dst, b.data)
	h.lru.MoveToFront(e)
	h.st.Loaded++
	return nil
}

// Save implements Disk: it copies data, dropping the least recently used
// blocks to make room; a block larger than the whole pool is not kept.
func (h *HostPool) Save(k Key, data []byte) {
	n := int64(len(data))
	h.mu.Lock()
	defer h.mu.Unlock()
	if n > h.capBytes {
		return
	}
	if e := h.byKey[k]; e != nil {
		h.lru.MoveToFront(e)
		return
	}
	for h.used+n > h.capBytes {
		h.dropOldest()
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
	h.byKey[k] = h.lru.PushFront(&hostBlock{key: k, data: buf})
	h.used += n
	h.st.Saved++
}

func (h *HostPool) dropOldest() {
	e := h.lru.Back()
	b := e.Value.(*hostBlock)
	h.lru.Remove(e)
	delete(h.byKey, b.key)
	h.used -= int64(len(b.data))
	h.st.Evicts++
	if len(h.spare) < 4 {
		h.spare = append(h.spare, b.data)
	}
}

// Accepting implements Disk: the pool always takes a block (dropping older ones).
func (h *HostPool) Accepting() bool { return true }

// Stats returns the counters.
func (h *HostPool) Stats() HostStats {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.st
	s.Blocks, s.Bytes = len(h.byKey), h.used
	return s
}
