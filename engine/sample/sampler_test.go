package sample

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// params returns DefaultParams modified by f.
func params(f func(*Params)) Params {
	p := DefaultParams()
	if f != nil {
		f(&p)
	}
	return p
}

// TestMatchesReference compares the distribution every path plans with
// the naive reference, over random logits (some with bf16 ties) and
// parameter sets that exercise the heap path, the radix top-k, top-p,
// min-p and their combinations.
func TestMatchesReference(t *testing.T) {
	const v = 3000
	cases := []Params{
		params(func(p *Params) { p.Temperature = 0 }),
		params(nil),
		params(func(p *Params) { p.Temperature = 0.6; p.TopK = 20; p.TopP = 0.95 }),
		params(func(p *Params) { p.Temperature = 0.7; p.TopK = 20; p.TopP = 0.8 }),
		params(func(p *Params) { p.TopK = 5 }),
		params(func(p *Params) { p.TopK = 256; p.TopP = 0.5 }),
		params(func(p *Params) { p.TopK = 257 }),
		params(func(p *Params) { p.TopK = 1000; p.TopP = 0.9 }),
		params(func(p *Params) { p.TopK = 2999; p.MinP = 0.01 }),
		params(func(p *Params) { p.TopP = 0.9 }),
		params(func(p *Params) { p.TopP = 0.3; p.Temperature = 1.5 }),
		params(func(p *Params) { p.TopP = 1e-6 }),
		params(func(p *Params) { p.MinP = 0.05 }),
		params(func(p *Params) { p.MinP = 0.1; p.TopP = 0.95; p.Temperature = 0.8 }),
		params(func(p *Params) { p.MinP = 0.1; p.TopK = 40 }),
		params(func(p *Params) { p.MinP = 1; p.TopK = 40 }),
		params(func(p *Params) { p.Temperature = 0.2; p.TopP = 0.99 }),
		params(func(p *Params) { p.Temperature = 0.05; p.TopK = 600 }),
		params(func(p *Params) {
			p.TopK = 50
			p.RepetitionPenalty = 1.3
			p.PresencePenalty = 0.5
			p.FrequencyPenalty = 0.4
			p.LogitBias = map[int32]float32{3: 5, 7: -100, 2999: 2.5}
		}),
		params(func(p *Params) {
			p.TopP = 0.9
			p.RepetitionPenalty = 0.8
			p.PresencePenalty = -1
			p.FrequencyPenalty = 1.5
			p.LogitBias = map[int32]float32{0: 10}
		}),
	}
	r := rand.New(rand.NewPCG(1, 2))
	for ci, p := range cases {
		for trial := range 6 {
			bf16 := trial%2 == 1
			logits := randLogits(r, v, bf16)
			prompt := []int32{1, 5, 9, 9, int32(r.IntN(v)), int32(r.IntN(v))}
			gen := []int32{5, 5, 5, int32(r.IntN(v)), 42}
			name := fmt.Sprintf("case%d/trial%d", ci, trial)
			t.Run(name, func(t *testing.T) {
				s := New(p, v, prompt)
				for _, g := range gen {
					s.Accept(g)
				}
				want := refProbs(refAdjust(logits, p, prompt, gen), p)
				got := implProbs(s, logits)
				for i := range want {
					// The support must match exactly, except that weights
					// below float32's range (e^-87.3 of the top) are 0.
					support := (want[i] == 0) != (got[i] == 0) && !(got[i] == 0 && want[i] < 1.2e-38)
					if math.Abs(want[i]-got[i]) > 2e-6 || support {
						t.Fatalf("token %d: got prob %.9g, reference %.9g (params %+v)", i, got[i], want[i], p)
					}
				}
			})
		}
	}
}

func TestGreedy(t *testing.T) {
	cases := []struct {
		name   string
		logits []float32
		p      Params
		want   int32
	}{
		{"argmax", []float32{1, 3, 2}, params(func(p *Params) { p.Temperature = 0 }), 1},
		{"tie lowest id", []float32{1, 3, 3, 2}, params(func(p *Params) { p.Temperature = 0 }), 1},
		{"below 1e-5", []float32{5, 3, 9}, params(func(p *Params) { p.Temperature = 9e-6 }), 2},
		{"nan ignored", []float32{float32(math.NaN()), 1, 0}, params(func(p *Params) { p.Temperature = 0 }), 1},
		{"all -inf", []float32{negInf, negInf}, params(func(p *Params) { p.Temperature = 0 }), 0},
		{"bias flips", []float32{1, 3, 2}, params(func(p *Params) { p.Temperature = 0; p.LogitBias = map[int32]float32{2: 1.5} }), 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := New(c.p, len(c.logits), nil)
			if !s.Greedy() {
				t.Fatal("Greedy() = false")
			}
			if got := s.Sample(slices.Clone(c.logits)); got != c.want {
				t.Fatalf("got %d, want %d", got, c.want)
			}
		})
	}
}

// TestPenaltiesChangeArgmax uses crafted logits where each penalty alone
// moves the greedy choice.
func TestPenaltiesChangeArgmax(t *testing.T) {
	greedy := func(f func(*Params)) Params {
		return params(func(p *Params) { p.Temperature = 0; f(p) })
	}
	cases := []struct {
		name   string
		logits []float32
		p      Params
		prompt []int32
		gen    []int32
		want   int32
	}{
		// 4/2 = 2 < 3: the repeated positive token loses.
		{"repetition positive", []float32{4, 3, 0}, greedy(func(p *Params) { p.RepetitionPenalty = 2 }), []int32{0}, nil, 1},
		// -1*2 = -2 < -1.5: a negative logit is multiplied, not divided.
		{"repetition negative", []float32{-1, -1.5, -9}, greedy(func(p *Params) { p.RepetitionPenalty = 2 }), nil, []int32{0}, 1},
		{"repetition off keeps", []float32{4, 3, 0}, greedy(func(p *Params) {}), []int32{0}, nil, 0},
		// Prompt-only tokens do not get presence/frequency penalties.
		{"presence ignores prompt", []float32{4, 3.5, 0}, greedy(func(p *Params) { p.PresencePenalty = 1 }), []int32{0}, nil, 0},
		{"presence", []float32{4, 3.5, 0}, greedy(func(p *Params) { p.PresencePenalty = 1 }), nil, []int32{0, 0, 0}, 1},
		// Presence counts once: 4-1 = 3 > 2.5.
		{"presence once", []float32{4, 2.5, 0}, greedy(func(p *Params) { p.PresencePenalty = 1 }), nil, []int32{0, 0, 0}, 0},
		// Frequency counts each time: 4 - 3*0.5 = 2.5 < 3.
		{"frequency", []float32{4, 3, 0}, greedy(func(p *Params) { p.FrequencyPenalty = 0.5 }), nil, []int32{0, 0, 0}, 1},
		{"frequency twice not enough", []float32{4, 3, 0}, greedy(func(p *Params) { p.FrequencyPenalty = 0.4 }), nil, []int32{0, 0}, 0},
		{"negative presence rewards", []float32{3, 4, 0}, greedy(func(p *Params) { p.PresencePenalty = -2 }), nil, []int32{0}, 0},
		{"bias", []float32{4, 3, 0}, greedy(func(p *Params) { p.LogitBias = map[int32]float32{2: 4.5} }), nil, nil, 2},
		{"bias -100 bans", []float32{40, 3, 0}, greedy(func(p *Params) { p.LogitBias = map[int32]float32{0: -100} }), nil, nil, 1},
		// Bias applies before the repetition penalty: (2+4)/2 = 3 < 3.5.
		{"bias then repetition", []float32{2, 3.5, 0}, greedy(func(p *Params) {
			p.LogitBias = map[int32]float32{0: 4}
			p.RepetitionPenalty = 2
		}), []int32{0}, nil, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := New(c.p, len(c.logits), c.prompt)
			for _, g := range c.gen {
				s.Accept(g)
			}
			if got := s.Sample(slices.Clone(c.logits)); got != c.want {
				t.Fatalf("got %d, want %d", got, c.want)
			}
		})
	}
}

// TestPenaltiesPersistAcrossSteps feeds fresh logits each step, as the
// engine does, and checks the penalty is recomputed from the counts rather
// than compounded on stale values.
func TestPenaltiesPersistAcrossSteps(t *testing.T) {
	p := params(func(p *Params) { p.Temperature = 0; p.FrequencyPenalty = 1 })
	s := New(p, 3, nil)
	var got []int32
	for range 6 {
		tok := s.Sample([]float32{3, 2.5, 0})
		s.Accept(tok)
		got = append(got, tok)
	}
	// 0 (3), then 1 (2.5 > 2), then 0? 3-1=2 vs 2.5-1=1.5 → 0; then
	// 3-2=1 vs 1.5 → 1; 1 vs 0.5 → 0; 0 vs 0.5 → 1.
	want := []int32{0, 1, 0, 1, 0, 1}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	s.Accept(-1) // out of range: ignored, no panic
	s.Accept(3)
}

func TestTopKKeepsTies(t *testing.T) {
	// top_k 2 over [5, 4, 4, 4, 1]: the three 4s tie with the 2nd largest.
	logits := []float32{5, 4, 4, 4, 1}
	for _, k := range []int{2} {
		s := New(params(func(p *Params) { p.TopK = k; p.Temperature = 5 }), len(logits), nil)
		probs := implProbs(s, logits)
		for i, pr := range probs {
			if (pr > 0) != (i < 4) {
				t.Fatalf("probs %v: want tokens 0-3 kept, 4 dropped", probs)
			}
		}
	}
	// top_k 1 is not greedy: tied maxima share the draw, as in HF/vLLM.
	s := New(params(func(p *Params) { p.TopK = 1 }), 4, nil)
	if probs := implProbs(s, []float32{5, 7, 7, 1}); probs[1] != 0.5 || probs[2] != 0.5 {
		t.Fatalf("top_k 1 with tied maxima: %v", probs)
	}
	// The radix path: vocab 600, k 300, many ties at the boundary.
	v := 600
	l := make([]float32, v)
	for i := range l {
		l[i] = float32(i % 10) // 60 tokens of each value 0..9
	}
	s = New(params(func(p *Params) { p.TopK = 300; p.Temperature = 5 }), v, nil)
	probs := implProbs(s, l)
	for i, pr := range probs {
		if (pr > 0) != (l[i] >= 5) { // values 9..5 give exactly 300
			t.Fatalf("token %d (logit %v): prob %v", i, l[i], pr)
		}
	}
	s = New(params(func(p *Params) { p.TopK = 290; p.Temperature = 5 }), v, nil)
	probs = implProbs(s, l)
	for i, pr := range probs {
		if (pr > 0) != (l[i] >= 5) { // the 290th is a 5: all 5s kept
			t.Fatalf("k=290: token %d (logit %v): prob %v", i, l[i], pr)
		}
	}
}

func TestDegenerateLogits(t *testing.T) {
	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	cases := []struct {
		name   string
		logits []float32
		want   int32
	}{
		{"all -inf", []float32{negInf, negInf, negInf}, 0},
		{"all nan", []float32{nan, nan}, 0},
		{"+inf wins", []float32{1, inf, 3, inf}, 1},
		{"one finite", []float32{negInf, nan, 2, negInf}, 2},
	}
	for _, c := range cases {
		for _, p := range []Params{
			params(nil),
			params(func(p *Params) { p.TopK = 2 }),
			params(func(p *Params) { p.TopK = 3; p.TopP = 0.5 }),
			params(func(p *Params) { p.TopP = 0.5; p.MinP = 0.2 }),
		} {
			s := New(p, len(c.logits), nil)
			for range 20 {
				if got := s.Sample(slices.Clone(c.logits)); got != c.want {
					t.Fatalf("%s %+v: got %d, want %d", c.name, p, got, c.want)
				}
			}
		}
	}
}

func TestSampleWrongLengthPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("no panic")
		}
	}()
	New(DefaultParams(), 4, nil).Sample(make([]float32, 3))
}

func TestSampleLogProbs(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	logits := randLogits(r, 3000, false)
	orig := slices.Clone(logits)
	for _, p := range []Params{
		params(func(p *Params) { p.Temperature = 0 }),                        // greedy: reads only
		params(func(p *Params) { p.TopK = 20; p.Temperature = 0.7 }),         // heap: reads only
		params(func(p *Params) { p.TopP = 0.9 }),                             // scan: writes
		params(func(p *Params) { p.Temperature = 0; p.PresencePenalty = 1 }), // adjusts
		params(func(p *Params) {
			p.TopK = 20
			p.Temperature = 0.7
			p.LogitBias = map[int32]float32{5: 3}
			p.RepetitionPenalty = 1.2
		}),
	} {
		p.Seed = seedPtr(1)
		s := New(p, len(logits), []int32{1, 2, 3})
		s2 := New(p, len(logits), []int32{1, 2, 3})
		var top []TokenLogProb
		for range 20 {
			tok, lp, alts := s.SampleLogProbs(logits, 5, top)
			top = alts
			if !slices.Equal(logits, orig) {
				t.Fatalf("%+v: SampleLogProbs modified logits", p)
			}
			if want := s2.Sample(slices.Clone(logits)); tok != want {
				t.Fatalf("%+v: token %d differs from Sample's %d with the same seed", p, tok, want)
			}
			if want := LogProbOf(logits, tok); lp != want {
				t.Fatalf("logprob %v, want %v", lp, want)
			}
			if want := TopLogProbs(logits, 5, nil); !slices.Equal(alts, want) {
				t.Fatalf("alternatives %v, want %v", alts, want)
			}
			s.Accept(tok)
			s2.Accept(tok)
		}
	}
}

// TestNoAllocs checks the per-token contract on every path once warm.
func TestNoAllocs(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	logits := randLogits(r, 20000, true)
	buf := make([]float32, len(logits))
	for _, p := range []Params{
		params(func(p *Params) { p.Temperature = 0 }),
		params(func(p *Params) { p.TopK = 20; p.TopP = 0.8; p.Temperature = 0.7 }),
		params(func(p *Params) { p.TopK = 2000; p.TopP = 0.8 }),
		params(func(p *Params) { p.TopP = 0.95; p.MinP = 0.01 }),
		params(func(p *Params) {
			p.RepetitionPenalty = 1.1
			p.PresencePenalty = 0.5
			p.FrequencyPenalty = 0.5
			p.LogitBias = map[int32]float32{1: 1}
		}),
	} {
		s := New(p, len(logits), []int32{1, 2, 3})
		var top []TokenLogProb
		step := func() {
			copy(buf, logits)
			tok := s.Sample(buf)
			s.Accept(tok % 50) // a bounded set of tokens: the map stops growing
			_, _, top = s.SampleLogProbs(logits, 5, top)
		}
		for range 30 { // warm: scratch buffers and penalty tables grow
			step()
		}
		if n := testing.AllocsPerRun(20, step); n != 0 {
			t.Errorf("%+v: %v allocations per token", p, n)
		}
	}
}

func TestAdjustsLogits(t *testing.T) {
	if New(DefaultParams(), 10, nil).AdjustsLogits() {
		t.Error("defaults adjust logits")
	}
	for _, p := range []Params{
		params(func(p *Params) { p.RepetitionPenalty = 1.1 }),
		params(func(p *Params) { p.PresencePenalty = 0.1 }),
		params(func(p *Params) { p.FrequencyPenalty = -0.1 }),
		params(func(p *Params) { p.LogitBias = map[int32]float32{1: 1} }),
	} {
		if !New(p, 10, nil).AdjustsLogits() {
			t.Errorf("%+v: AdjustsLogits false", p)
		}
	}
	// A bias only for ids outside the vocabulary adjusts nothing.
	if New(params(func(p *Params) { p.LogitBias = map[int32]float32{10: 1} }), 10, nil).AdjustsLogits() {
		t.Error("out-of-vocabulary bias counted")
	}
}
