package prefix

import (
	"testing"

	"github.com/infernix/infernix/engine/kv"
)

func toks(n, salt int) []int32 {
	t := make([]int32, n)
	for i := range t {
		t[i] = int32((i*31 + salt*17 + 3) % 1000)
	}
	return t
}

// fill allocates and registers every full block of ts as one lane would,
// returning its block table and pins.
func fill(t *testing.T, c *Cache, a *kv.Allocator, seed Key, ts []int32) (blocks, pinned []int32) {
	t.Helper()
	n := len(ts) / BlockSize
	blocks, ok := a.Alloc(nil, n)
	if !ok {
		t.Fatalf("pool exhausted allocating %d blocks", n)
	}
	key := seed
	for i := 0; i < n; i++ {
		var p bool
		key, p = c.Register(key, i == 0, ts[i*BlockSize:(i+1)*BlockSize], blocks[i])
		if p {
			pinned = append(pinned, blocks[i])
		}
	}
	return blocks, pinned
}

func TestKeys(t *testing.T) {
	a, b := toks(64, 1), toks(64, 2)
	s := Seed([]byte("model"))
	cases := []struct {
		name string
		x, y Key
		same bool
	}{
		{"same content", BlockKey(s, a), BlockKey(s, a), true},
		{"other tokens", BlockKey(s, a), BlockKey(s, b), false},
		{"other parent", BlockKey(s, a), BlockKey(BlockKey(s, b), a), false},
		{"other seed", BlockKey(s, a), BlockKey(Seed([]byte("model2")), a), false},
		{"seed parts are length-prefixed", Seed([]byte("ab"), []byte("c")), Seed([]byte("a"), []byte("bc")), false},
		{"salt matters", Seed([]byte("m"), nil), Seed([]byte("m"), []byte("x")), false},
	}
	for _, c := range cases {
		if (c.x == c.y) != c.same {
			t.Errorf("%s: %v vs %v", c.name, c.x, c.y)
		}
	}
	if n := testing.AllocsPerRun(100, func() { BlockKey(s, a) }); n != 0 {
		t.Errorf("BlockKey allocates %v times", n)
	}
}

func TestAcquireLongestPrefix(t *testing.T) {
	a := kv.New(16)
	c := New(a)
	seed := Seed([]byte("m"))
	ts := toks(3*BlockSize+10, 1)
	blocks, pinned := fill(t, c, a, seed, ts)
	c.Unpin(pinned)
	a.Release(blocks) // the lane finished: blocks stay cached

	cases := []struct {
		name  string
		seed  Key
		toks  []int32
		max   int
		wantN int
	}{
		{"all full blocks", seed, ts, 10, 3},
		{"capped", seed, ts, 2, 2},
		{"partial last block ignored", seed, ts[:2*BlockSize+63], 10, 2},
		{"diverges in block 2", seed, append(append([]int32(nil), ts[:BlockSize+5]...), toks(BlockSize, 9)...), 10, 1},
		{"other seed", Seed([]byte("other")), ts, 10, 0},
		{"too short", seed, ts[:63], 10, 0},
	}
	for _, tc := range cases {
		got, n, last := c.Acquire(tc.seed, tc.toks, tc.max, nil)
		c.Record(n)
		if n != tc.wantN || len(got) != n {
			t.Fatalf("%s: %d blocks (%v), want %d", tc.name, n, got, tc.wantN)
		}
		for i := range got {
			if got[i] != blocks[i] {
				t.Fatalf("%s: block %d is %d, want %d", tc.name, i, got[i], blocks[i])
			}
		}
		if n == 0 && last != tc.seed {
			t.Fatalf("%s: last key of an empty hit is not the seed", tc.name)
		}
		c.Unpin(got)
		a.Release(got)
	}
	st := c.Stats()
	if st.Queries != 6 || st.Hits != 4 || st.HitTokens != uint64((3+2+2+1)*BlockSize) || st.Blocks != 3 || st.Idle != 3 {
		t.Fatalf("stats %+v", st)
	}
	if a.FreeCount() != 16-3 {
		t.Fatalf("free %d, want 13 (3 cached)", a.FreeCount())
	}
}

func TestRegisterDuplicateAndOrphan(t *testing.T) {
	a := kv.New(8)
	c := New(a)
	seed := Seed()
	ts := toks(2*BlockSize, 4)
	_, p1 := fill(t, c, a, seed, ts)
	// A second lane computed the same content concurrently: nothing indexed.
	_, p2 := fill(t, c, a, seed, ts)
	if len(p1) != 2 || len(p2) != 0 {
		t.Fatalf("pins %v and %v, want 2 and 0", p1, p2)
	}
	// A block whose parent is not indexed is unreachable, so not indexed.
	b, _ := a.Alloc(nil, 1)
	if _, p := c.Register(Seed([]byte("nowhere")), false, ts[:BlockSize], b[0]); p {
		t.Fatal("orphan block was indexed")
	}
	if st := c.Stats(); st.Blocks != 2 {
		t.Fatalf("%d blocks indexed, want 2", st.Blocks)
	}
}

// TestEvictionSparesPinned: eviction drops idle blocks only, leaves first,
// lowest score first, and returns them to the allocator.
func TestEvictionSparesPinned(t *testing.T) {
	a := kv.New(12)
	c := New(a)
	seed := Seed()
	// Three sequences of 3 blocks; A and B finish, C keeps running.
	var blocks [3][]int32
	var pins [3][]int32
	for i := range blocks {
		blocks[i], pins[i] = fill(t, c, a, seed, toks(3*BlockSize, 10+i))
	}
	for _, i := range []int{0, 1} {
		c.Unpin(pins[i])
		a.Release(blocks[i])
	}
	// B is reused (its score rises above A's).
	got, n, _ := c.Acquire(seed, toks(3*BlockSize, 11), 3, nil)
	if n != 3 {
		t.Fatalf("reuse of B found %d blocks", n)
	}
	c.Unpin(got)
	a.Release(got)

	if d := c.Evict(2); d != 2 {
		t.Fatalf("evicted %d, want 2", d)
	}
	// A lost its last two blocks (leaves first, lowest score).
	if _, n, _ := c.Acquire(seed, toks(3*BlockSize, 10), 3, nil); n != 1 {
		t.Fatalf("A keeps %d blocks, want 1", n)
	} else {
		c.Unpin(blocks[0][:1])
		a.Release(blocks[0][:1])
	}
	// Evicting everything leaves C (pinned) intact.
	c.Evict(100)
	got, n, _ = c.Acquire(seed, toks(3*BlockSize, 12), 3, nil)
	if n != 3 || got[0] != blocks[2][0] {
		t.Fatalf("pinned sequence C lost blocks: %d found", n)
	}
	c.Unpin(got)
	a.Release(got)
	st := c.Stats()
	if st.Blocks != 3 || st.Evictions != 6 {
		t.Fatalf("stats %+v, want C's 3 blocks left after 6 evictions", st)
	}
	// Pool: C's 3 blocks are held by the lane and the cache; all else is free.
	if a.FreeCount() != 12-3 {
		t.Fatalf("free %d, want 9", a.FreeCount())
	}
	c.Unpin(pins[2])
	a.Release(blocks[2])
	c.Evict(100)
	if a.FreeCount() != 12 || c.Stats().Blocks != 0 {
		t.Fatalf("after all evicted: free %d, %+v", a.FreeCount(), c.Stats())
	}
}

func TestUnpinUnknownPanics(t *testing.T) {
	c := New(kv.New(2))
	defer func() {
		if recover() == nil {
			t.Fatal("no panic")
		}
	}()
	c.Unpin([]int32{1})
}

// TestChildren: a block's children are the indexed blocks that continue
// from it, so two sequences sharing a prefix make its last shared block a
// branch, while the end of a single chain has none; eviction updates it.
func TestChildren(t *testing.T) {
	a := kv.New(8)
	c := New(a)
	seed := Seed()
	shared := toks(BlockSize, 1)
	x := append(append([]int32(nil), shared...), toks(BlockSize, 2)...)
	y := append(append([]int32(nil), shared...), toks(BlockSize, 3)...)
	bx, px := fill(t, c, a, seed, x)
	k1 := BlockKey(seed, shared)
	k2 := BlockKey(k1, x[BlockSize:])
	cases := []struct {
		name string
		key  Key
		want int
	}{
		{"chain end", k2, 0},
		{"one chain through", k1, 1},
		{"not indexed", BlockKey(seed, toks(BlockSize, 9)), 0},
	}
	for _, tc := range cases {
		if got := c.Children(tc.key); got != tc.want {
			t.Errorf("%s: %d children, want %d", tc.name, got, tc.want)
		}
	}
	by, py := fill(t, c, a, seed, y)
	if got := c.Children(k1); got != 2 {
		t.Fatalf("branch: %d children, want 2", got)
	}
	c.Unpin(px)
	a.Release(bx)
	c.Unpin(py)
	a.Release(by)
	c.Evict(1) // a leaf goes: one child left
	if got := c.Children(k1); got != 1 {
		t.Fatalf("after evicting a leaf: %d children, want 1", got)
	}
}
