package kv

import "testing"

func TestAllocRelease(t *testing.T) {
	a := New(4)
	got, ok := a.Alloc(nil, 3)
	if !ok || len(got) != 3 || a.FreeCount() != 1 {
		t.Fatalf("alloc 3: %v %v free %d", got, ok, a.FreeCount())
	}
	if _, ok := a.Alloc(nil, 2); ok {
		t.Fatal("allocated 2 with 1 free")
	}
	a.Retain(got[:1])
	a.Release(got)
	if a.FreeCount() != 3 {
		t.Fatalf("shared block freed early: free %d", a.FreeCount())
	}
	a.Release(got[:1])
	if a.FreeCount() != 4 {
		t.Fatalf("free %d after last release", a.FreeCount())
	}
	seen := map[int32]bool{}
	all, _ := a.Alloc(nil, 4)
	for _, b := range all {
		if seen[b] || b < 0 || b >= 4 {
			t.Fatalf("bad or duplicate block %d in %v", b, all)
		}
		seen[b] = true
	}
}

func TestBlocksFor(t *testing.T) {
	for _, c := range []struct{ n, want int }{{0, 0}, {1, 1}, {64, 1}, {65, 2}, {128, 2}} {
		if got := BlocksFor(c.n); got != c.want {
			t.Errorf("BlocksFor(%d) = %d, want %d", c.n, got, c.want)
		}
	}
}
