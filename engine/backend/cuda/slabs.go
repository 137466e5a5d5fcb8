package cuda

import "github.com/infernix/infernix/engine/backend/cuda/driver"

// Weights below slabTensorMax bytes are packed into slabs of slabBytes
// instead of an allocation each. Why: the driver hands out large
// allocations in 2 MiB pages, so a Qwen3-30B-A3B checkpoint's 18,432
// expert matrices of 3 MiB each took 4 MiB apiece: 18 GiB of an 80 GB GPU
// lost to rounding (measured on an H100: 59.2 GiB of weights held, 1.4 GiB
// free of 79.2). A slab is freed when the last tensor in it is, unless it
// is the one being filled, which is then filled again from its start.
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

// get returns n bytes for a weight: from a slab when it is small, else (or
// where no new slab can be had) from alloc directly.
func (s *weightSlabs) get(n uint64, alloc func(uint64) (driver.DevPtr, error)) (driver.DevPtr, error) {
	if n > slabTensorMax || n == 0 {
		return alloc(n)
	}
	n = (n + slabAlign - 1) &^ (slabAlign - 1)
	if s.cur != 0 && s.live[s.cur] == 0 {
		s.used = 0 // everything in it was freed: fill it again
	}
	if s.cur == 0 || s.used+n > slabBytes {
		p, err := alloc(slabBytes)
		if err != nil {
			return alloc(n)
		}
		if s.live == nil {
			s.live, s.slabOf = map[driver.DevPtr]int{}, map[driver.DevPtr]driver.DevPtr{}
		}
		s.cur, s.used = p, 0
		s.live[p] = 0
		s.allocated++
	}
	p := s.cur + driver.DevPtr(s.used)
	s.used += n
	s.live[s.cur]++
	s.slabOf[p] = s.cur
	return p, nil
}

// release takes back p if get put it in a slab (true), handing the slab to
// free when nothing in it is left and it is not the one being filled. A
// slab's own address that no live weight has (a weight freed twice) is
// taken and ignored too, so that it cannot free the slab under its
// neighbours. False: p is not a slab's.
func (s *weightSlabs) release(p driver.DevPtr, free func(driver.DevPtr)) bool {
	slab, ok := s.slabOf[p]
	if !ok {
		_, isSlab := s.live[p]
		return isSlab
	}
	delete(s.slabOf, p)
	s.live[slab]--
	if s.live[slab] == 0 && slab != s.cur {
		delete(s.live, slab)
		free(slab)
	}
	return true
}

// wmalloc returns device memory for a weight of n bytes (weightSlabs.get).
func (b *Backend) wmalloc(n uint64, what string) (driver.DevPtr, error) {
	return b.slabs.get(n, func(m uint64) (driver.DevPtr, error) {
		if m == slabBytes && n != slabBytes {
			return b.malloc(m, what+" (a 256 MiB slab of weights)")
		}
		return b.malloc(m, what)
	})
}

// releaseWeight frees p if wmalloc put it in a slab (weightSlabs.release).
func (b *Backend) releaseWeight(p driver.DevPtr) bool {
	return b.slabs.release(p, b.freeAlloc)
}
