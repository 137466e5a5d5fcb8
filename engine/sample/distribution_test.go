package sample

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// Statistical tests: draws with fixed seeds, checked against what the
// parameters allow.

// TestDrawsFollowPlan checks the draw itself: token frequencies over many
// draws match the planned probabilities (a loose 5-sigma bound per token).
func TestDrawsFollowPlan(t *testing.T) {
	const v, draws = 64, 40000
	r := rand.New(rand.NewPCG(3, 4))
	logits := make([]float32, v)
	for i := range logits {
		logits[i] = float32(r.NormFloat64())
	}
	for _, p := range []Params{
		params(nil),
		params(func(p *Params) { p.TopK = 10 }),
		params(func(p *Params) { p.TopK = 300 }), // >= vocab: off, scan path
		params(func(p *Params) { p.TopP = 0.7 }),
		params(func(p *Params) { p.MinP = 0.3; p.Temperature = 0.5 }),
	} {
		s := New(p, v, nil)
		want := implProbs(s, logits)
		counts := make([]int, v)
		buf := make([]float32, v)
		for range draws {
			copy(buf, logits)
			counts[s.Sample(buf)]++
		}
		for i, pr := range want {
			mean := pr * draws
			sd := math.Sqrt(draws * pr * (1 - pr))
			if math.Abs(float64(counts[i])-mean) > 5*sd+1 {
				t.Errorf("%+v: token %d drawn %d times, expected %.0f ± %.0f", p, i, counts[i], mean, sd)
			}
		}
	}
}

func TestSeedReproducible(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	logits := randLogits(r, 2000, false)
	for _, p := range []Params{
		params(func(p *Params) { p.Temperature = 1.2; p.TopK = 50 }),
		params(func(p *Params) { p.Temperature = 1.2; p.TopP = 0.95 }),
		params(func(p *Params) { p.Temperature = 1.2; p.TopK = 500; p.MinP = 0.001 }),
	} {
		run := func(seed *uint64) []int32 {
			p := p
			p.Seed = seed
			s := New(p, len(logits), nil)
			out := make([]int32, 200)
			buf := make([]float32, len(logits))
			for i := range out {
				copy(buf, logits)
				out[i] = s.Sample(buf)
				s.Accept(out[i])
			}
			return out
		}
		a, b, c := run(seedPtr(42)), run(seedPtr(42)), run(seedPtr(43))
		if !slices.Equal(a, b) {
			t.Errorf("%+v: same seed, different tokens", p)
		}
		if slices.Equal(a, c) {
			t.Errorf("%+v: seeds 42 and 43 gave identical 200-token runs", p)
		}
		if d, e := run(nil), run(nil); slices.Equal(d, e) {
			t.Errorf("%+v: two unseeded runs gave identical 200-token runs", p)
		}
	}
	s := New(params(func(p *Params) { p.Seed = seedPtr(7) }), 10, nil)
	if s.Seed() != 7 {
		t.Fatalf("Seed() = %d, want 7", s.Seed())
	}
}

// TestTopKNeverOutside draws 10k times on both top-k paths and checks
// every token is among the k largest logits.
func TestTopKNeverOutside(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	const v = 1500
	logits := make([]float32, v)
	for i := range logits {
		logits[i] = float32(r.NormFloat64()) // flat: the tail is likely
	}
	sorted := slices.Clone(logits)
	slices.Sort(sorted)
	for _, k := range []int{1, 7, 256, 257, 900} {
		thr := sorted[v-k]
		s := New(params(func(p *Params) { p.Temperature = 3; p.TopK = k }), v, nil)
		buf := make([]float32, v)
		seen := map[int32]bool{}
		for range 10000 {
			copy(buf, logits)
			tok := s.Sample(buf)
			if logits[tok] < thr {
				t.Fatalf("k=%d: drew token %d with logit %v below the k-th largest %v", k, tok, logits[tok], thr)
			}
			seen[tok] = true
		}
		if k >= 7 && len(seen) < k/2 { // at T=3 most of the k must show up
			t.Errorf("k=%d: only %d distinct tokens in 10000 draws", k, len(seen))
		}
	}
}

func TestTopPTinyIsArgmax(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	logits := randLogits(r, 4000, false)
	want := argmax(logits)
	for _, k := range []int{0, 20, 1000} {
		s := New(params(func(p *Params) { p.TopP = 1e-6; p.TopK = k; p.Temperature = 2 }), len(logits), nil)
		buf := make([]float32, len(logits))
		for range 500 {
			copy(buf, logits)
			if got := s.Sample(buf); got != want {
				t.Fatalf("top_k %d: got %d, want argmax %d", k, got, want)
			}
		}
	}
}

func TestMinPExcludesLowTokens(t *testing.T) {
	// Probabilities relative to the top at T=1: e^0, e^-1, e^-2, e^-3, e^-4.
	logits := []float32{10, 9, 8, 7, 6}
	for _, c := range []struct {
		minP float32
		n    int // tokens that must survive
	}{{0.3, 2}, {0.1, 3}, {0.01, 5}, {1, 1}} {
		for _, k := range []int{0, 4} { // scan path and heap path
			s := New(params(func(p *Params) { p.MinP = c.minP; p.TopK = k }), len(logits), nil)
			buf := make([]float32, len(logits))
			seen := map[int32]bool{}
			for range 5000 {
				copy(buf, logits)
				seen[s.Sample(buf)] = true
			}
			want := min(c.n, len(logits))
			if k > 0 {
				want = min(want, k)
			}
			if len(seen) != want {
				t.Errorf("min_p %v top_k %d: %d distinct tokens, want %d (%v)", c.minP, k, len(seen), want, seen)
			}
			for tok := range seen {
				if int(tok) >= want {
					t.Errorf("min_p %v top_k %d: drew excluded token %d", c.minP, k, tok)
				}
			}
		}
	}
}
