package cuda

import (
	"errors"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/infernix/infernix/engine/backend/cuda/driver"
)

// fakeDevice hands out address ranges for weightSlabs (no GPU): allocations
// at increasing addresses, frees recorded; fail makes a slab-sized request
// fail (a device too full for a new slab).
type fakeDevice struct {
	next   driver.DevPtr
	sizes  map[driver.DevPtr]uint64
	freed  map[driver.DevPtr]bool
	failAt uint64 // requests of this size fail (0: none)
}

func (d *fakeDevice) alloc(n uint64) (driver.DevPtr, error) {
	if d.failAt != 0 && n == d.failAt {
		return 0, errors.New("out of memory")
	}
	if d.sizes == nil {
		d.sizes, d.freed, d.next = map[driver.DevPtr]uint64{}, map[driver.DevPtr]bool{}, 1<<30
	}
	p := d.next
	d.sizes[p] = n
	d.next += driver.DevPtr((n + 2<<20 - 1) &^ (2<<20 - 1)) // the driver's 2 MiB pages
	return p, nil
}

func (d *fakeDevice) free(p driver.DevPtr) {
	if _, ok := d.sizes[p]; !ok || d.freed[p] {
		panic("freed an address that is not a live allocation")
	}
	d.freed[p] = true
}

// TestWeightSlabsBookkeeping checks weightSlabs on a fake device: small
// weights share 256 MiB slabs in disjoint 256-byte-aligned ranges, large
// ones get their own allocation, a slab is handed back when its last weight
// is freed (unless it is being filled: then it is filled again), a weight
// freed twice does not free its slab, and a failed slab allocation falls
// back to one of the weight's size. Randomised frees and reallocations keep
// every live range disjoint and inside its slab.
func TestWeightSlabsBookkeeping(t *testing.T) {
	var d fakeDevice
	var s weightSlabs
	get := func(n uint64) driver.DevPtr {
		t.Helper()
		p, err := s.get(n, d.alloc)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	const mib = 1 << 20
	// 100 experts of 3 MiB: two slabs (85 fit one), not 100 allocations.
	var ws []driver.DevPtr
	for i := 0; i < 100; i++ {
		ws = append(ws, get(3*mib))
	}
	if s.allocated != 2 || len(d.sizes) != 2 {
		t.Fatalf("100 weights of 3 MiB: %d slabs, %d allocations", s.allocated, len(d.sizes))
	}
	first := s.slabOf[ws[0]]
	if ws[0] != first || ws[1] != first+3*mib || s.slabOf[ws[85]] == first {
		t.Fatalf("packing: %#x %#x in slab %#x, weight 85 in %#x", ws[0], ws[1], first, s.slabOf[ws[85]])
	}
	big := get(64 * mib)
	if _, ok := s.slabOf[big]; ok || d.sizes[big] != 64*mib {
		t.Fatalf("a 64 MiB weight went into a slab")
	}
	// A double free of a slab's first weight (the slab's own address)
	// while its neighbours live is taken and ignored; once every weight of
	// the slab is freed, it goes back.
	noFree := func(driver.DevPtr) { t.Fatal("freed a slab whose weights live") }
	if !s.release(ws[0], noFree) || !s.release(ws[0], noFree) {
		t.Fatal("a slab's first weight, freed twice, fell through to the allocator")
	}
	for _, p := range ws[1:85] {
		if !s.release(p, d.free) {
			t.Fatalf("%#x not taken back", p)
		}
	}
	if !d.freed[first] {
		t.Fatal("the emptied slab was not freed")
	}
	if s.release(big, d.free) {
		t.Fatal("a weight of its own allocation was taken as a slab's")
	}
	// The slab being filled, emptied, is filled again from its start.
	cur := s.cur
	for _, p := range ws[85:] {
		s.release(p, d.free)
	}
	if d.freed[cur] {
		t.Fatal("the slab being filled was freed")
	}
	if p := get(1000); p != cur || s.allocated != 2 {
		t.Fatalf("after emptying, the next weight at %#x (slab %#x), %d slabs", p, cur, s.allocated)
	}
	// No room for a new slab: the weight gets an allocation of its own.
	for s.used+3*mib <= slabBytes {
		get(3 * mib)
	}
	d.failAt = slabBytes
	if p := get(3 * mib); d.sizes[p] != 3*mib {
		t.Fatalf("with no slab to be had: %#x of %d bytes", p, d.sizes[p])
	}
	d.failAt = 0

	// Random sizes, frees and reallocations.
	r := rand.New(rand.NewPCG(7, 7))
	type rng struct{ p, end driver.DevPtr }
	live := map[driver.DevPtr]uint64{}
	for i := 0; i < 5000; i++ {
		if len(live) > 0 && r.IntN(3) == 0 {
			for p := range live {
				s.release(p, d.free)
				delete(live, p)
				break
			}
			continue
		}
		n := uint64(1 + r.IntN(8*mib))
		p := get(n)
		if p%slabAlign != 0 {
			t.Fatalf("%#x not 256-byte aligned", p)
		}
		if slab, ok := s.slabOf[p]; ok && (d.freed[slab] || p+driver.DevPtr(n) > slab+slabBytes) {
			t.Fatalf("%#x (+%d) outside its slab %#x or in a freed one", p, n, slab)
		}
		live[p] = n
	}
	var rs []rng
	for p, n := range live {
		rs = append(rs, rng{p, p + driver.DevPtr(n)})
	}
	sort.Slice(rs, func(i, j int) bool { return rs[i].p < rs[j].p })
	for i := 1; i < len(rs); i++ {
		if rs[i].p < rs[i-1].end {
			t.Fatalf("live weights overlap: [%#x, %#x) and [%#x, %#x)", rs[i-1].p, rs[i-1].end, rs[i].p, rs[i].end)
		}
	}
}
