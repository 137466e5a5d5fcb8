package sample

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestKthLargest checks the top-k floor against a sort, on vocabularies
// whose k-th bin holds more than 1,024 logits (so that the second radix
// level runs): half the logits -Inf, as a constrained decoding mask makes
// them, or crowded into a narrow range. A floor one bit too coarse kept
// 1,308 tokens for a top-k of 1,000 here.
func TestKthLargest(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const v = 151936
	shapes := []struct {
		name string
		gen  func() float32
	}{
		{"normal", func() float32 { return float32(r.NormFloat64() * 2.5) }},
		{"half -Inf", func() float32 {
			if r.IntN(2) == 0 {
				return float32(math.Inf(-1))
			}
			return float32(r.NormFloat64() * 2.5)
		}},
		{"narrow", func() float32 { return 3 + float32(r.Float64())*1e-3 }},
		{"bf16 ties", func() float32 {
			return math.Float32frombits(math.Float32bits(float32(r.NormFloat64())) &^ 0xffff)
		}},
	}
	for _, sh := range shapes {
		l := make([]float32, v)
		for i := range l {
			l[i] = sh.gen()
		}
		sorted := slices.Clone(l)
		slices.Sort(sorted)
		for _, k := range []int{257, 1000, 5000, 60000} { // the scan path's top-k (the heap path takes k <= 256)
			p := DefaultParams()
			p.TopK = k
			s := New(p, v, nil)
			if got, want := s.kthLargest(slices.Clone(l)), sorted[v-k]; got != want {
				t.Errorf("%s, k %d: floor %v, the %d-th largest is %v", sh.name, k, got, k, want)
			}
		}
	}
}
