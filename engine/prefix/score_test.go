package prefix

import (
	"bytes"
	"math"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/infernix/infernix/engine/kv"
)

// scoreOf is an entry's score after uses at the given times.
func scoreOf(half float64, uses ...float64) Score {
	s := FirstUse(uses[0], half)
	for _, t := range uses[1:] {
		s = s.Use(t, half)
	}
	return s
}

// TestScoreOrder: the score ranks entries as their exponentially decayed use
// counts do; reuse buys time, recency breaks ties, and old credit fades.
func TestScoreOrder(t *testing.T) {
	const h = 10.0
	cases := []struct {
		name        string
		a, b        []float64 // use times of two entries
		aOutlastsB  bool
		aEqualsLogB float64 // when > 0: score(a) - score(b) must be this
	}{
		{"newer single use wins (LRU among single uses)", []float64{5}, []float64{4}, true, 0},
		{"reused old block outlives a once-used newer one", []float64{0, 1, 2, 3, 4, 5, 6, 7}, []float64{20}, true, 0},
		{"... but not forever (8 uses buy 3 half-lives)", []float64{0, 0, 0, 0, 0, 0, 0, 0}, []float64{31}, false, 0},
		{"k uses at once = log2 k half-lives", []float64{0, 0, 0, 0}, []float64{0}, true, 2},
		{"a hot entry that stops being used fades", []float64{0, 1, 2, 3}, []float64{100}, false, 0},
	}
	for _, c := range cases {
		a, b := scoreOf(h, c.a...), scoreOf(h, c.b...)
		if (a > b) != c.aOutlastsB {
			t.Errorf("%s: score %v vs %v", c.name, a, b)
		}
		if c.aEqualsLogB > 0 && math.Abs(float64(a-b)-c.aEqualsLogB) > 1e-9 {
			t.Errorf("%s: difference %v, want %v", c.name, a-b, c.aEqualsLogB)
		}
	}
}

// TestScoreMatchesDecayedCount: for random histories, ordering by Score is
// ordering by Σ 2^(-(T-t)/H) at a common time T.
func TestScoreMatchesDecayedCount(t *testing.T) {
	const h = 7.0
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 500; i++ {
		hist := func() []float64 {
			n := 1 + r.IntN(6)
			ts := make([]float64, n)
			for j := range ts {
				ts[j] = r.Float64() * 50
			}
			sort.Float64s(ts)
			return ts
		}
		a, b := hist(), hist()
		decayed := func(ts []float64) float64 {
			sum := 0.0
			for _, x := range ts {
				sum += math.Exp2(-(60 - x) / h)
			}
			return sum
		}
		da, db := decayed(a), decayed(b)
		if math.Abs(da-db) < 1e-9*max(da, db) {
			continue
		}
		if (scoreOf(h, a...) > scoreOf(h, b...)) != (da > db) {
			t.Fatalf("histories %v and %v: scores disagree with decayed counts %v, %v", a, b, da, db)
		}
	}
	if n := testing.AllocsPerRun(100, func() { _ = FirstUse(1, h).Use(2, h) }); n != 0 {
		t.Errorf("Score.Use allocates %v times", n)
	}
}

type heapItem struct {
	s   Score
	idx int
}

func (h *heapItem) HeapScore() Score   { return h.s }
func (h *heapItem) SetHeapIndex(i int) { h.idx = i }

// TestScoreHeap: random pushes, score changes and removals keep Min the
// lowest score and every index right.
func TestScoreHeap(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var h ScoreHeap[*heapItem]
	var live []*heapItem
	for op := 0; op < 3000; op++ {
		switch k := r.IntN(4); {
		case k < 2 || len(live) == 0:
			it := &heapItem{s: Score(r.Float64())}
			h.Push(it)
			live = append(live, it)
		case k == 2:
			it := live[r.IntN(len(live))]
			it.s = Score(r.Float64())
			h.Fix(it.idx)
		default:
			i := r.IntN(len(live))
			it := live[i]
			if got := h.Remove(it.idx); got != it || it.idx != -1 {
				t.Fatal("Remove returned another entry or kept its index")
			}
			live = append(live[:i], live[i+1:]...)
		}
		if h.Len() != len(live) {
			t.Fatalf("len %d, want %d", h.Len(), len(live))
		}
		lowest := Score(math.Inf(1))
		for _, it := range live {
			lowest = min(lowest, it.s)
			if h.items[it.idx] != it {
				t.Fatal("stale heap index")
			}
		}
		if len(live) > 0 && h.Min().s != lowest {
			t.Fatalf("Min %v, lowest %v", h.Min().s, lowest)
		}
	}
}

// TestCacheEvictsByScore: in the device cache a block reused often outlives
// newer blocks used once; a pinned block is never evicted, whatever its score.
func TestCacheEvictsByScore(t *testing.T) {
	const pool = 16 // half-life 8 ticks
	a := kv.New(pool)
	c := New(a)
	seed := Seed()
	one := func(salt int) (blocks, pins []int32) { return fill(t, c, a, seed, toks(BlockSize, salt)) }
	release := func(blocks, pins []int32) { c.Unpin(pins); a.Release(blocks) }
	hotB, hotP := one(1)
	release(hotB, hotP)
	for i := 0; i < 6; i++ { // the system prompt of six requests
		got, n, _ := c.Acquire(seed, toks(BlockSize, 1), 1, nil)
		if n != 1 {
			t.Fatal("hot block not found")
		}
		release(got, got)
	}
	pinnedB, pinnedP := one(2) // oldest single use, but a lane holds it
	var newer [][]int32
	for i := 0; i < 10; i++ { // once-used blocks, all newer than the hot one
		b, p := one(10 + i)
		release(b, p)
		newer = append(newer, b)
	}
	if got := c.Evict(9); got != 9 {
		t.Fatalf("evicted %d, want 9", got)
	}
	has := func(salt int) bool {
		got, n, _ := c.Acquire(seed, toks(BlockSize, salt), 1, nil)
		if n > 0 {
			release(got, got)
		}
		return n == 1
	}
	if !has(1) {
		t.Error("the reused block went before once-used newer ones")
	}
	if !has(19) {
		t.Error("the newest once-used block went (single uses must go oldest first)")
	}
	for i := 10; i < 19; i++ {
		if has(i) {
			t.Errorf("once-used block %d stayed", i)
		}
	}
	c.Evict(100)
	if !has(2) {
		t.Error("a pinned block was evicted")
	}
	release(pinnedB, pinnedP)
	// The hot path does not allocate: lookup, pin, release.
	dst := make([]int32, 0, 4)
	ts := toks(BlockSize, 2)
	if n := testing.AllocsPerRun(100, func() {
		got, _, _ := c.Acquire(seed, ts, 1, dst[:0])
		c.Unpin(got)
		a.Release(got)
	}); n != 0 {
		t.Errorf("Acquire/Unpin/Release allocate %v times", n)
	}
}

// TestHostPoolEvictsByScore: the host pool keeps a block loaded often over
// newer blocks saved once, and among single uses drops the oldest.
func TestHostPoolEvictsByScore(t *testing.T) {
	const size = 16
	h := NewHostPool(4 * size) // half-life: 8 ticks (the minimum)
	key := func(i int) Key { return Seed([]byte{byte(i)}) }
	data := func(i int) []byte { return bytes.Repeat([]byte{byte(i)}, size) }
	dst := make([]byte, size)
	h.Save(key(0), data(0))
	for i := 0; i < 8; i++ {
		if err := h.Load(key(0), dst); err != nil {
			t.Fatal(err)
		}
	}
	for i := 1; i <= 8; i++ {
		h.Save(key(i), data(i))
	}
	for i, want := range []bool{true, false, false, false, false, false, true, true, true} {
		if h.Has(key(i)) != want {
			t.Errorf("block %d held = %v, want %v", i, !want, want)
		}
	}
	if err := h.Load(key(0), dst); err != nil || !bytes.Equal(dst, data(0)) {
		t.Fatalf("hot block: %v", err)
	}
	k7 := key(7)
	if n := testing.AllocsPerRun(100, func() { _ = h.Load(k7, dst) }); n != 0 {
		t.Errorf("HostPool.Load allocates %v times", n)
	}
}
