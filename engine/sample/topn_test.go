package sample

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// naiveTop sorts everything.
func naiveTop(logits []float32, n int) (top []TokenLogProb, ties int) {
	all := make([]TokenLogProb, len(logits))
	for i, l := range logits {
		if l != l {
			l = negInf
		}
		all[i] = TokenLogProb{ID: int32(i), LogProb: l}
	}
	slices.SortStableFunc(all, cmpRank)
	n = min(max(n, 0), len(all))
	top = all[:n]
	if n > 0 && top[n-1].LogProb != negInf {
		for _, c := range all[n:] {
			if c.LogProb == top[n-1].LogProb {
				ties++
			}
		}
	}
	return top, ties
}

func TestTopN(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	cases := []struct {
		name   string
		logits []float32
		n      int
	}{
		{"empty", nil, 3},
		{"zero n", []float32{1, 2}, 0},
		{"negative n", []float32{1, 2}, -1},
		{"n above len", []float32{1, 3, 2}, 10},
		{"ties by id", []float32{2, 5, 2, 5, 2}, 3},
		{"ties outside", []float32{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, 2},
		{"eviction leaves tie", []float32{5, 5, 9, 1, 1, 1, 1, 1, 1, 1, 1}, 2},
		{"nan and inf", []float32{nan, 1, inf, nan, negInf, 3, nan, 2, 0, 0, 0}, 4},
		{"all -inf", []float32{negInf, negInf, negInf, negInf, negInf, negInf, negInf, negInf, negInf}, 3},
		{"ascending", []float32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18}, 5},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			check(t, c.logits, c.n)
		})
	}
	r := rand.New(rand.NewPCG(21, 22))
	for trial := range 300 {
		v := 1 + r.IntN(400)
		l := randLogits(r, v, trial%2 == 0)
		if trial%3 == 0 { // coarse values: many ties
			for i := range l {
				l[i] = float32(math.Round(float64(l[i])))
			}
		}
		check(t, l, r.IntN(v+2))
	}
}

func check(t *testing.T, logits []float32, n int) {
	t.Helper()
	want, wantTies := naiveTop(logits, n)
	tied := make([]int32, 0, 1000)
	got, ties := topN(logits, n, nil, &tied)
	if !slices.Equal(got, want) || ties != wantTies {
		t.Fatalf("topN(%v, %d) = %v, %d ties; want %v, %d", logits, n, got, ties, want, wantTies)
	}
	if ties > 0 {
		// The recorded ties are exactly the tokens outside equal to the last.
		var wantIDs []int32
		last := want[len(want)-1]
		for i, l := range logits {
			if l == last.LogProb && !slices.ContainsFunc(want, func(c TokenLogProb) bool { return c.ID == int32(i) }) {
				wantIDs = append(wantIDs, int32(i))
			}
		}
		slices.Sort(tied)
		if !slices.Equal(tied, wantIDs) {
			t.Fatalf("tied %v, want %v", tied, wantIDs)
		}
	}
}

// TestAddTiesFallback overflows the tie buffer so the second pass runs.
func TestAddTiesFallback(t *testing.T) {
	logits := make([]float32, 1000)
	logits[500] = 2
	s := New(params(func(p *Params) { p.TopK = 5 }), len(logits), nil)
	probs := implProbs(s, logits)
	if len(s.cand) != 1000 {
		t.Fatalf("%d candidates, want all 1000 (999 tie at 0)", len(s.cand))
	}
	for i, c := range s.cand[1:] {
		if c.ID != int32(i) && c.ID != int32(i+1) {
			t.Fatalf("candidate %d is %v: ties not in id order", i+1, c)
		}
	}
	if e2 := math.Exp(2); math.Abs(probs[500]-e2/(e2+999)) > 1e-12 {
		t.Fatalf("p(top) = %v", probs[500])
	}
}

func TestOrderKey(t *testing.T) {
	vals := []float32{negInf, -3e38, -1, -1e-30, -1e-45, 0, 1e-45, 1e-30, 1, 3e38, float32(math.Inf(1))}
	for i := range vals {
		if fromOrderKey(orderKey(vals[i])) != vals[i] {
			t.Fatalf("round trip of %v", vals[i])
		}
		if i > 0 && orderKey(vals[i-1]) >= orderKey(vals[i]) {
			t.Fatalf("key(%v) >= key(%v)", vals[i-1], vals[i])
		}
	}
	// -0 and +0 are equal as floats; their keys are adjacent.
	if orderKey(float32(math.Copysign(0, -1)))+1 != orderKey(0) {
		t.Fatal("-0/+0 keys not adjacent")
	}
}
