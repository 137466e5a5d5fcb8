package sample

import (
	"math"
	"testing"
)

func TestExpWeightsAccuracy(t *testing.T) {
	const n = 200000
	w := make([]float32, n)
	for i := range w {
		w[i] = -87.3 * float32(i) / (n - 1) // logits in [-87.3, 0], max 0
	}
	xs := append([]float32(nil), w...)
	sum, _ := expWeights(w, 0, 1, negInf, 0)
	var want float64
	for i, x := range xs {
		e := math.Exp(float64(x))
		want += float64(float32(e))
		if rel := math.Abs(float64(w[i])-e) / e; rel > 3e-7 {
			t.Fatalf("exp(%v) = %v, want %v (relative error %.2g)", x, w[i], e, rel)
		}
		if w[i] > 1 {
			t.Fatalf("exp(%v) = %v > 1", x, w[i])
		}
	}
	if math.Abs(sum-want)/want > 1e-6 {
		t.Fatalf("sum %v, want %v", sum, want)
	}
}

func TestExpWeightsEdges(t *testing.T) {
	nan := float32(math.NaN())
	cases := []struct {
		name              string
		logits            []float32
		m, invT, floor, w float32
		want              []float32
	}{
		{"max is exactly 1", []float32{3, 2.5}, 3, 1, negInf, 0, []float32{1, float32(math.Exp(-0.5))}},
		{"temperature scales", []float32{3, 2}, 3, 2, negInf, 0, []float32{1, float32(math.Exp(-2))}},
		{"underflow is 0", []float32{0, -87.4, -1000, negInf, nan}, 0, 1, negInf, 0, []float32{1, 0, 0, 0, 0}},
		{"below floor is 0", []float32{5, 4, 3}, 5, 1, 4, 0, []float32{1, float32(math.Exp(-1)), 0}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := append([]float32(nil), c.logits...)
			expWeights(w, c.m, c.invT, c.floor, c.w)
			for i := range w {
				if math.Abs(float64(w[i]-c.want[i])) > 3e-7*float64(c.want[i]) {
					t.Fatalf("weights %v, want %v", w, c.want)
				}
			}
		})
	}
	// sumMin counts only weights >= wmin.
	w := []float32{0, -1, -2, -3}
	sum, sumMin := expWeights(w, 0, 1, negInf, float32(math.Exp(-1.5)))
	if want := 1 + math.Exp(-1); math.Abs(sumMin-want) > 1e-6 {
		t.Fatalf("sumMin %v, want %v", sumMin, want)
	}
	if want := 1 + math.Exp(-1) + math.Exp(-2) + math.Exp(-3); math.Abs(sum-want) > 1e-6 {
		t.Fatalf("sum %v, want %v", sum, want)
	}
}

func TestSumExp64(t *testing.T) {
	cases := [][]float32{
		{0},
		{0, -1, -2, -700.5, float32(math.Inf(-1)), float32(math.NaN())},
		{-0.5, -0.25, -3.75, -30, -88, -200},
	}
	for _, l := range cases {
		want := 0.0
		for _, x := range l {
			if x == x && x >= -700 {
				want += math.Exp(float64(x))
			}
		}
		if got := sumExp64(l, 0); math.Abs(got-want) > 1e-9*want {
			t.Errorf("%v: got %v, want %v", l, got, want)
		}
	}
}
