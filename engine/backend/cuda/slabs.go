package cuda

import "github.com/infernix/infernix/engine/backend/cuda/driver"

// Weights below slabTensorMax bytes are packed into slabs of slabBytes
// instead of an allocation each. Why: the driver hands out large
// allocations in 2 MiB pages, so a Qwen3-30B-A3B checkpoint's 18,432
// expert matrices of 3 MiB each took 4 MiB apiece: 18 GiB of an 80 GB GPU
// lost to rounding (measured on an H100: 59.2 GiB of weights held, 1.4 GiB
// free of 79.2). A slab is freed when the last tensor in it is, unless it
// is the one being filled.
const (
	slabBytes     = 256 << 20
	slabTensorMax = 32 << 20
	slabAlign     = 256
)

type weightSlabs struct {
	cur       driver.DevPtr // the slab being filled (0: none)
	used      uint64        // bytes of cur handed out
	live      map[driver.DevPtr]int
	slabOf    map[driver.DevPtr]driver.DevPtr // tensor → its slab
	allocated int                             // slabs allocated so far (tests)
}

// wmalloc returns device memory for a weight of n bytes: from a slab when
// it is small, else an allocation of its own.
func (b *Backend) wmalloc(n uint64, what string) (driver.DevPtr, error) {
	if n > slabTensorMax || n == 0 {
		return b.malloc(n, what)
	}
	s := &b.slabs
	n = (n + slabAlign - 1) &^ (slabAlign - 1)
	if s.cur == 0 || s.used+n > slabBytes {
		p, err := b.malloc(slabBytes, what+" (a 256 MiB slab of weights)")
		if err != nil {
			return 0, err
		}
		if s.live == nil {
			s.live, s.slabOf = map[driver.DevPtr]int{}, map[driver.DevPtr]driver.DevPtr{}
		}
		if s.cur != 0 && s.live[s.cur] == 0 {
			b.free(s.cur) // everything in it was freed while it was being filled
			delete(s.live, s.cur)
		}
		s.cur, s.used = p, 0
		s.allocated++
	}
	p := s.cur + driver.DevPtr(s.used)
	s.used += n
	s.live[s.cur]++
	s.slabOf[p] = s.cur
	return p, nil
}

// releaseWeight frees p if wmalloc put it in a slab (true), freeing the
// slab when nothing in it is left; false if p is not a slab's.
func (b *Backend) releaseWeight(p driver.DevPtr) bool {
	s := &b.slabs
	slab, ok := s.slabOf[p]
	if !ok {
		return false
	}
	delete(s.slabOf, p)
	s.live[slab]--
	if s.live[slab] == 0 && slab != s.cur {
		delete(s.live, slab)
		b.free(slab)
	}
	return true
}
