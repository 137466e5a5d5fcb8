package sample

import (
	"math/rand/v2"
	"testing"
)

// TestSharedExpPass: the exp pass shared with idle cores gives the same
// weights as one core, sums that are the chunks' sums added in chunk order
// (whoever computed them), and allocates nothing.
func TestSharedExpPass(t *testing.T) {
	cw := newChunkWork(qwenVocab, false)
	if cw == nil {
		t.Skip("one core: the pass is not shared")
	}
	r := rand.New(rand.NewPCG(3, 4))
	logits := randLogits(r, qwenVocab, true)
	m, _ := maxIndex(logits)
	const invT, wmin = 1 / 0.7, 0.01
	for _, floor := range []float32{negInf, m - 3} {
		want := append([]float32(nil), logits...)
		var wantSum, wantMin float64
		for lo := 0; lo < len(want); lo += expChunk {
			s, sm := expWeights(want[lo:min(lo+expChunk, len(want))], m, invT, floor, wmin)
			wantSum += s
			wantMin += sm
		}
		for rep := 0; rep < 20; rep++ {
			got := append([]float32(nil), logits...)
			sum, sumMin := cw.expWeights(got, m, invT, floor, wmin)
			if sum != wantSum || sumMin != wantMin {
				t.Fatalf("floor %v: sums %v, %v; want %v, %v", floor, sum, sumMin, wantSum, wantMin)
			}
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("floor %v: weight %d is %v, want %v", floor, i, got[i], want[i])
				}
			}
		}
	}
	buf := append([]float32(nil), logits...)
	if a := testing.AllocsPerRun(20, func() { cw.expWeights(buf, m, invT, negInf, 0) }); a != 0 {
		t.Errorf("%v allocations per pass", a)
	}
	// A sampler over a large vocabulary takes this path and still draws
	// the only token that has any weight.
	s := New(params(func(p *Params) { p.Temperature = 0.8 }), qwenVocab, nil)
	if s.shared == nil {
		t.Fatal("a large-vocabulary sampler does not share its exp pass")
	}
	one := make([]float32, qwenVocab)
	for i := range one {
		one[i] = negInf
	}
	one[123456] = 2
	if tok := s.Sample(one); tok != 123456 {
		t.Fatalf("drew %d, want 123456", tok)
	}
}

// TestDrawScanChunks: skipping whole chunks by their sums draws the token
// the full scan draws (the cumulative weight is added in another order, so
// only a draw within rounding of a boundary could differ).
func TestDrawScanChunks(t *testing.T) {
	cw := newChunkWork(qwenVocab, false)
	if cw == nil {
		t.Skip("one core: the pass is not shared")
	}
	r := rand.New(rand.NewPCG(5, 6))
	for _, invT := range []float32{1 / 0.7, 1 / 1.5} {
		w := randLogits(r, qwenVocab, true)
		m, top := maxIndex(w)
		z, _ := cw.expWeights(w, m, invT, negInf, 0)
		pl := scanPlan{lo: 0, iLim: -1, z: z, top: int32(top)}
		for k := 0; k < 3000; k++ {
			u := r.Float64()
			if k < 2 {
				u = []float64{0, 1 - 0x1p-53}[k]
			}
			a, b := drawScan(w, pl, u, nil), drawScan(w, pl, u, cw.sum)
			if a != b {
				t.Fatalf("u %v: full scan %d, by chunks %d", u, a, b)
			}
		}
	}
}

// TestSharedTopPHistogram: the top-p cutoff from the chunked histogram is
// the cutoff from the single-core one.
func TestSharedTopPHistogram(t *testing.T) {
	p := params(func(p *Params) { p.Temperature = 0.7; p.TopP = 0.95 })
	a, b := New(p, qwenVocab, nil), New(p, qwenVocab, nil)
	if a.shared == nil || a.shared.hists == nil {
		t.Skip("one core: the pass is not shared")
	}
	b.shared = nil
	r := rand.New(rand.NewPCG(7, 8))
	w := randLogits(r, qwenVocab, true)
	m, _ := maxIndex(w)
	z, _ := expWeights(w, m, a.invT, negInf, 0)
	for k := 0; k < 200; k++ {
		target := r.Float64() * z
		wa, ia, _, oka := a.topPCutoff(w, target)
		wb, ib, _, okb := b.topPCutoff(w, target)
		if wa != wb || ia != ib || oka != okb {
			t.Fatalf("target %v: chunked cutoff (%v, %d, %v), single-core (%v, %d, %v)", target, wa, ia, oka, wb, ib, okb)
		}
	}
	buf := append([]float32(nil), w...)
	if n := testing.AllocsPerRun(10, func() { copy(buf, w); a.Sample(buf) }); n != 0 {
		t.Errorf("%v allocations per top-p draw", n)
	}
}
