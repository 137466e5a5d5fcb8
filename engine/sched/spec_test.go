package sched

import (
	"context"
	"fmt"
	"testing"

	"github.com/infernix/infernix/engine/sample"
)

// TestSpeculativeMatchesPlain: with prompt-lookup drafts the scheduler's
// outputs are token for token, log-prob for log-prob, those of decoding one
// token a step: greedy and seeded sampling with penalties, several lanes at
// once, token limits that cut drafts short, and a thinking budget whose
// forced tokens interrupt them; and drafts were kept.
func TestSpeculativeMatchesPlain(t *testing.T) {
	seeded := func(seed uint64) sample.Params {
		return sample.Params{Temperature: 0.9, TopP: 0.95, TopK: 20, RepetitionPenalty: 1.1, PresencePenalty: 0.3, Seed: &seed}
	}
	type job struct {
		r    *Request
		name string
	}
	jobs := func() []job {
		var js []job
		for i, n := range []int{70, 130, 9, 200} {
			r := req(prompt(n, i), 40+i*7)
			js = append(js, job{r, fmt.Sprintf("greedy %d", n)})
			r = req(prompt(n, i+10), 33)
			r.Sampling, r.Logprobs = seeded(uint64(i+1)), 2
			js = append(js, job{r, fmt.Sprintf("sampled %d", n)})
		}
		r := req(prompt(150, 3), 30)
		r.InThink, r.ThinkBudget, r.ThinkOpen, r.ThinkClose, r.ForceClose = true, 6, 5, 7, []int32{7, 8}
		return append(js, job{r, "think budget"})
	}
	run := func(spec int) ([][]int32, [][]float32, Counters) {
		s := New(testModel(t, 60), Config{MaxLanes: 3, PrefillChunk: 64, SpecTokens: spec})
		defer s.Close()
		var chans []<-chan Event
		for _, j := range jobs() {
			ch, err := s.Submit(context.Background(), j.r)
			if err != nil {
				t.Fatal(err)
			}
			chans = append(chans, ch)
		}
		var toks [][]int32
		var lps [][]float32
		for i, ch := range chans {
			var got []int32
			var lp []float32
			for ev := range ch {
				if ev.Done {
					if ev.Err != nil {
						t.Fatalf("job %d: %v", i, ev.Err)
					}
					break
				}
				got, lp = append(got, ev.Token), append(lp, ev.Logprob)
				for _, tl := range ev.Top {
					lp = append(lp, float32(tl.ID), tl.LogProb)
				}
			}
			toks, lps = append(toks, got), append(lps, lp)
		}
		return toks, lps, s.Counters()
	}
	plainT, plainL, c0 := run(0)
	specT, specL, c := run(5)
	if c0.SpecTokens != 0 {
		t.Fatalf("speculation off, yet %d tokens sampled speculatively", c0.SpecTokens)
	}
	for i, j := range jobs() {
		if !equal(plainT[i], specT[i]) {
			t.Fatalf("%s: speculative %v, plain %v", j.name, specT[i], plainT[i])
		}
		if fmt.Sprint(plainL[i]) != fmt.Sprint(specL[i]) {
			t.Fatalf("%s: log-probs differ", j.name)
		}
	}
	t.Logf("speculation: %d tokens sampled on speculating lanes, %d of them drafts kept", c.SpecTokens, c.SpecDraftsKept)
	if c.SpecDraftsKept == 0 {
		t.Fatal("no draft was kept: speculation did not happen")
	}
}
