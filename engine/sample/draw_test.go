package sample

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// applyDraw edits logits as Draw documents it, for a sampler outside this
// package: bias, then repetition over Seen, then frequency and presence.
func applyDraw(logits []float32, d *Draw) {
	for _, b := range d.Bias {
		logits[b.ID] += b.LogProb
	}
	if d.Repetition != 1 {
		for _, t := range d.Seen {
			if l := logits[t]; l > 0 {
				logits[t] = l / d.Repetition
			} else {
				logits[t] = l * d.Repetition
			}
		}
	}
	for i, t := range d.Generated {
		l := logits[t] - d.Frequency*float32(d.Counts[i])
		logits[t] = l - d.Presence
	}
}

// drawFrom is the draw Draw documents, over the distribution Probs
// reports: the first kept token, in rank or id order, at which the running
// probability exceeds U. near reports that U lies so close to a boundary
// that rounding may pick the neighbour.
func drawFrom(probs []float64, adjusted []float32, d *Draw) (tok int32, near bool) {
	var ids []int32
	for i, p := range probs {
		if p > 0 {
			ids = append(ids, int32(i))
		}
	}
	if d.RankOrder {
		slices.SortFunc(ids, func(a, b int32) int {
			return cmpRank(TokenLogProb{ID: a, LogProb: adjusted[a]}, TokenLogProb{ID: b, LogProb: adjusted[b]})
		})
	}
	cum := 0.0
	for _, id := range ids {
		cum += probs[id]
		if math.Abs(cum-d.U) < 1e-9 {
			near = true
		}
		if d.U < cum {
			return id, near
		}
	}
	return ids[len(ids)-1], true
}

// TestNextDraw: what NextDraw describes — the edits, the order and the
// uniform number — reproduces Sample's token for the same seed, step after
// step (so it advances the stream exactly as Sample does), for every path
// and parameter.
func TestNextDraw(t *testing.T) {
	const v = 2000
	cases := []Params{
		params(func(p *Params) { p.Temperature = 0; p.RepetitionPenalty = 1.2 }),
		params(nil),
		params(func(p *Params) { p.Temperature = 0.6; p.TopK = 20; p.TopP = 0.95 }),
		params(func(p *Params) { p.TopK = 256; p.MinP = 0.05 }),
		params(func(p *Params) { p.TopK = 257; p.TopP = 0.7 }),
		params(func(p *Params) { p.TopP = 0.9; p.Temperature = 1.4 }),
		params(func(p *Params) { p.MinP = 0.1; p.TopP = 0.95 }),
		params(func(p *Params) {
			p.TopK = 50
			p.RepetitionPenalty = 1.3
			p.PresencePenalty = 0.5
			p.FrequencyPenalty = 0.4
			p.LogitBias = map[int32]float32{3: 5, 7: -100, 1999: 2.5}
		}),
		params(func(p *Params) {
			p.TopP = 0.9
			p.RepetitionPenalty = 0.8
			p.PresencePenalty = -1
			p.FrequencyPenalty = 1.5
			p.LogitBias = map[int32]float32{0: 10}
		}),
	}
	r := rand.New(rand.NewPCG(3, 4))
	for ci, p := range cases {
		t.Run(fmt.Sprint(ci), func(t *testing.T) {
			p.Seed = seedPtr(uint64(100 + ci))
			prompt := []int32{1, 5, 9, 9, 17}
			host, dev := New(p, v, prompt), New(p, v, prompt)
			var d Draw
			near := 0
			for step := range 40 {
				logits := randLogits(r, v, step%2 == 1)
				want := host.Sample(slices.Clone(logits))
				probs := dev.Probs(logits, nil)
				adjusted := slices.Clone(logits)
				dev.adjust(adjusted)
				dev.NextDraw(&d)
				edited := slices.Clone(logits)
				applyDraw(edited, &d)
				for i := range edited {
					if math.Float32bits(edited[i]) != math.Float32bits(adjusted[i]) {
						t.Fatalf("step %d token %d: Draw's edits give %v, Sample's %v", step, i, edited[i], adjusted[i])
					}
				}
				var got int32
				if d.Greedy {
					if d.U != 0 {
						t.Fatalf("greedy draw carries U %v", d.U)
					}
					got = argmax(adjusted)
				} else {
					var close bool
					got, close = drawFrom(probs, adjusted, &d)
					if close && got != want {
						near++
						got = want
					}
				}
				if got != want {
					t.Fatalf("step %d: Draw gives token %d (U %v, rank order %v), Sample %d", step, got, d.U, d.RankOrder, want)
				}
				host.Accept(want)
				dev.Accept(want)
			}
			if near > 1 {
				t.Fatalf("%d draws on a rounding boundary: U is not the stream's number", near)
			}
		})
	}
}

func TestHistoryFree(t *testing.T) {
	for _, c := range []struct {
		p    Params
		want bool
	}{
		{Params{Temperature: 0, TopP: 1, RepetitionPenalty: 1}, true},
		{Params{Temperature: 0, TopP: 1, RepetitionPenalty: 0, LogitBias: map[int32]float32{3: 5}}, true},
		{Params{Temperature: 0, TopP: 1, RepetitionPenalty: 1.1}, false},
		{Params{Temperature: 0, TopP: 1, RepetitionPenalty: 1, PresencePenalty: 0.5}, false},
		{Params{Temperature: 0, TopP: 1, RepetitionPenalty: 1, FrequencyPenalty: -0.5}, false},
		{Params{Temperature: 0.7, TopP: 1, RepetitionPenalty: 1}, false},
	} {
		if got := New(c.p, 10, []int32{1, 2}).HistoryFree(); got != c.want {
			t.Errorf("%+v: HistoryFree %v, want %v", c.p, got, c.want)
		}
	}
}
