package sample

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestLogProbs(t *testing.T) {
	ln := func(x float64) float32 { return float32(math.Log(x)) }
	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	cases := []struct {
		name   string
		logits []float32
		want   []float32 // log-probability of every token
	}{
		{"uniform", []float32{0, 0}, []float32{ln(0.5), ln(0.5)}},
		{"proportions", []float32{0, ln(2), ln(3), ln(4)}, []float32{ln(0.1), ln(0.2), ln(0.3), ln(0.4)}},
		// exp(1000) overflows: stable only if the max is subtracted.
		{"large", []float32{1000, 1000}, []float32{ln(0.5), ln(0.5)}},
		{"very negative", []float32{-1000, -999}, []float32{ln(1 / (1 + math.E)), ln(math.E / (1 + math.E))}},
		{"masked", []float32{0, float32(math.Inf(-1)), nan}, []float32{0, negInf, negInf}},
		{"all masked", []float32{negInf, negInf}, []float32{negInf, negInf}},
		{"+inf certain", []float32{1, inf}, []float32{negInf, 0}},
		// Tiny probabilities keep their precision in log space.
		{"tiny", []float32{0, -200}, []float32{0, -200}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for i := range c.logits {
				got := LogProbOf(c.logits, int32(i))
				if !(got == c.want[i] || math.Abs(float64(got-c.want[i])) < 1e-6) {
					t.Fatalf("LogProbOf(%d) = %v, want %v", i, got, c.want[i])
				}
			}
			top := TopLogProbs(c.logits, len(c.logits), nil)
			for j, tp := range top {
				if tp.LogProb != LogProbOf(c.logits, tp.ID) {
					t.Fatalf("TopLogProbs[%d] = %v, LogProbOf says %v", j, tp, LogProbOf(c.logits, tp.ID))
				}
				if j > 0 && ranksBelow(top[j-1], tp) {
					t.Fatalf("TopLogProbs out of order: %v", top)
				}
			}
		})
	}
}

func TestLogSumExpMatchesFloat64(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	for range 20 {
		l := randLogits(r, 5000, false)
		m := float64(slices.Max(l))
		s := 0.0
		for _, x := range l {
			s += math.Exp(float64(x) - m)
		}
		want := m + math.Log(s)
		if got := LogSumExp(l); math.Abs(got-want) > 1e-9 {
			t.Fatalf("LogSumExp = %.12f, want %.12f", got, want)
		}
	}
	if got := LogSumExp(nil); !math.IsInf(got, -1) {
		t.Fatalf("LogSumExp(nil) = %v", got)
	}
}

func TestTopLogProbsSelection(t *testing.T) {
	logits := []float32{1, 5, 3, 5, 2, 4}
	got := TopLogProbs(logits, 3, nil)
	ids := []int32{got[0].ID, got[1].ID, got[2].ID}
	if !slices.Equal(ids, []int32{1, 3, 5}) { // 5 (id 1) before 5 (id 3)
		t.Fatalf("ids %v", ids)
	}
	if got := TopLogProbs(logits, 0, nil); len(got) != 0 {
		t.Fatalf("n=0 gave %v", got)
	}
	if got := TopLogProbs(logits, 99, nil); len(got) != len(logits) {
		t.Fatalf("n=99 gave %d", len(got))
	}
	// Reusing the result allocates nothing.
	big := randLogits(rand.New(rand.NewPCG(1, 2)), 10000, true)
	dst := TopLogProbs(big, 20, nil)
	if n := testing.AllocsPerRun(20, func() { dst = TopLogProbs(big, 20, dst) }); n != 0 {
		t.Fatalf("%v allocations", n)
	}
}
