package sched

import (
	"context"
	"github.com/infernix/infernix/engine/model"
	"testing"
	"time"
)

// promptLogprobsOf runs r on s and returns its prompt log-probs and final event.
func promptLogprobsOf(t *testing.T, ch <-chan Event) ([]PromptLogprob, Event) {
	t.Helper()
	var lps []PromptLogprob
	for {
		ev, ok := <-ch
		if !ok {
			t.Fatal("channel closed before the final event")
		}
		if ev.PromptLogprobs != nil {
			lps = ev.PromptLogprobs
		}
		if ev.Done {
			return lps, ev
		}
	}
}

// TestPromptLogprobsSurvivePreemption: a scoring request preempted in the
// middle of its prompt recomputes it, and still reports exactly one log-prob
// per prompt position ≥ 1, equal to those of a run without pressure.
func TestPromptLogprobsSurvivePreemption(t *testing.T) {
	cases := []struct {
		name        string
		blocks      int
		olderPrompt int
		olderGen    int
		scorePrompt int
		chunk       int
	}{
		{"two-block-prompt", 3, 60, 120, 120, 16},
		{"three-block-prompt", 4, 60, 180, 170, 16},
		{"block-aligned-prompt", 3, 60, 120, 128, 16},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := prompt(tc.scorePrompt, 5)
			ref := New(testModel(t, 16), Config{MaxLanes: 1})
			r := req(p, 1)
			r.PromptLogprobs = true
			want, _ := promptLogprobsOf(t, mustSubmit(t, ref, r))
			ref.Close()
			if len(want) != len(p)-1 {
				t.Fatalf("reference: %d log-probs for %d tokens", len(want), len(p))
			}

			s := New(testModel(t, tc.blocks), Config{MaxLanes: 2, PrefillChunk: tc.chunk})
			defer s.Close()
			older := mustSubmit(t, s, req(prompt(tc.olderPrompt, 1), tc.olderGen))
			<-older // running and decoding before the scoring request arrives
			r = req(p, 1)
			r.PromptLogprobs = true
			got, fin := promptLogprobsOf(t, mustSubmit(t, s, r))
			if _, ofin := collect(t, older); ofin.Err != nil {
				t.Fatal(ofin.Err)
			}
			if fin.Err != nil {
				t.Fatal(fin.Err)
			}
			if fin.Stats.Preemptions == 0 {
				t.Fatalf("the scoring request was not preempted: %+v", fin.Stats)
			}
			if len(got) != len(want) {
				t.Fatalf("%d prompt log-probs after %d preemptions, want %d", len(got), fin.Stats.Preemptions, len(want))
			}
			for i := range want {
				if got[i].Token != want[i].Token || got[i].Logprob != want[i].Logprob {
					t.Fatalf("position %d: %+v, want %+v", i+1, got[i], want[i])
				}
			}
			if c := s.Counters(); c.KVUsed != 0 {
				t.Fatalf("KV blocks leaked: %+v", c)
			}
		})
	}
}

// TestPreemptOnlyYounger: reserve preempts only lanes younger than the one
// that needs blocks (Lane.admitted); a younger lane that runs out waits or
// is preempted itself, never the older one. Here the older request scores a
// long prompt (so the younger one gets the rest of the prefill budget and
// decodes meanwhile) and stalls on a full pool while the younger one's
// decode is planned; when the younger one then needs a block it must not
// take the older one's.
func TestPreemptOnlyYounger(t *testing.T) {
	cases := []struct {
		name          string
		blocks        int
		olderPrompt   int
		youngerPrompt int
		youngerTokens int
		noPrefixReuse bool
	}{
		{"cache", 5, 300, 10, 100, false},
		{"no-cache", 5, 300, 10, 100, true},
		{"context-filling prompt, block-sized younger", 5, 319, 64, 100, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := New(testModel(t, tc.blocks), Config{MaxLanes: 2, PrefillChunk: 90, NoPrefixReuse: tc.noPrefixReuse})
			defer s.Close()
			op := prompt(tc.olderPrompt, 2)
			older := req(op, 1)
			older.PromptLogprobs = true
			yp := prompt(tc.youngerPrompt, 3)
			chans := submitTogether(t, s, older, req(yp, tc.youngerTokens))
			och, ych := chans[0], chans[1]
			ogot, ofin := collect(t, och)
			ygot, yfin := collect(t, ych)
			if ofin.Err != nil || yfin.Err != nil {
				t.Fatalf("errors: %v, %v", ofin.Err, yfin.Err)
			}
			if ofin.Stats.Preemptions != 0 {
				t.Fatalf("the older request was preempted %d times (younger: %d)", ofin.Stats.Preemptions, yfin.Stats.Preemptions)
			}
			ref := testModel(t, 8)
			if want := solo(t, ref, op, 1); !equal(ogot, want) {
				t.Fatalf("older: got %v, alone %v", ogot, want)
			}
			if want := solo(t, ref, yp, tc.youngerTokens); !equal(ygot, want) {
				t.Fatalf("younger: got %v, alone %v", ygot, want)
			}
			if c := s.Counters(); c.KVUsed != 0 {
				t.Fatalf("KV blocks leaked: %+v", c)
			}
		})
	}
}

// collectWithin gathers a request's tokens and its final event, failing
// after d (tests of lost tokens use a short one: those would hang).
func collectWithin(t *testing.T, ch <-chan Event, d time.Duration) ([]int32, Event) {
	t.Helper()
	var toks []int32
	timeout := time.After(d)
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatal("channel closed before the final event")
			}
			if ev.Done {
				return toks, ev
			}
			if ev.PromptLogprobs == nil {
				toks = append(toks, ev.Token)
			}
		case <-timeout:
			t.Fatalf("no final event within %v (%d tokens so far)", d, len(toks))
		}
	}
}

// repeated is a prompt that repeats a run of n tokens, so that prompt-lookup
// drafts are long.
func repeated(n, times, salt int) []int32 {
	var p []int32
	for i := 0; i < times; i++ {
		p = append(p, prompt(n, salt)...)
	}
	return p
}

// TestOutputRowsBound: one step has at most maxOutputs rows of logits. A
// lane whose token to sample falls in a step whose rows are already taken
// (by a scoring lane's prompt positions, or another lane's drafts) must wait
// for the next step, not compute its last token without a row (it would
// never sample and never finish). Both requests are submitted from the loop
// so that they share their first step.
func TestOutputRowsBound(t *testing.T) {
	cases := []struct {
		name  string
		first *Request
		other *Request
		spec  int
	}{
		{"scoring then prompt ending in the step", scoring(req(prompt(256, 2), 1)), req(prompt(20, 3), 30), 0},
		{"scoring then two-token prompt", scoring(req(prompt(200, 4), 2)), req(prompt(2, 5), 5), 0},
		{"scoring then prompt filling the chunk", scoring(req(prompt(130, 6), 1)), req(prompt(26, 7), 8), 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := New(testModel(t, 24), Config{MaxLanes: 2, PrefillChunk: 90, SpecTokens: tc.spec})
			defer s.Close()
			chans := submitTogether(t, s, tc.first, tc.other)
			ref := testModel(t, 8)
			for i, r := range []*Request{tc.first, tc.other} {
				got, fin := collectWithin(t, chans[i], 4*time.Second)
				if fin.Err != nil || fin.Finish != "length" {
					t.Fatalf("request %d: %s %v", i, fin.Finish, fin.Err)
				}
				if want := solo(t, ref, r.Prompt, r.MaxTokens); !equal(got, want) {
					t.Fatalf("request %d: got %v, alone %v", i, got, want)
				}
			}
			if c := s.Counters(); c.KVUsed != 0 {
				t.Fatalf("KV blocks leaked: %+v", c)
			}
		})
	}
}

// cycleModel is a fake model whose greedy next token is (token+1) mod
// period, whatever the position: its text repeats, so prompt-lookup drafts
// are as long as allowed.
type cycleModel struct {
	cfg    model.Config
	period int32
	blocks int
}

func newCycleModel(vocab, period, blocks int) *cycleModel {
	return &cycleModel{cfg: model.Config{VocabSize: vocab, MaxPositionEmbeddings: 4096}, period: int32(period), blocks: blocks}
}

func (m *cycleModel) Config() *model.Config { return &m.cfg }
func (m *cycleModel) MaxBatchTokens() int   { return 96 }
func (m *cycleModel) KVBlocks() int         { return m.blocks }
func (m *cycleModel) Forward(b *model.Batch, dst []float32) error {
	v := m.cfg.VocabSize
	for r, o := range b.Outputs {
		row := dst[r*v : (r+1)*v]
		clear(row)
		row[(b.Tokens[o]+1)%m.period] = 10
	}
	return nil
}

func cycleTokens(from, n int, period int32) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = (int32(from) + int32(i)) % period
	}
	return out
}

// TestDraftRowsLeaveDecodeRows: a speculating lane's drafts take the rows
// left in the step; a decode lane planned after it must still get the row of
// its token (or wait), not have its token computed without one.
func TestDraftRowsLeaveDecodeRows(t *testing.T) {
	const period = 100
	cases := []struct {
		name   string
		lanes  int
		spec   int
		first  []int32
		others []int32
	}{
		{"two lanes", 2, 64, cycleTokens(0, 2*period+5, period), cycleTokens(7, 10, period)},
		{"three lanes", 3, 80, cycleTokens(3, 3*period, period), cycleTokens(50, 3, period)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := New(newCycleModel(128, period, 32), Config{MaxLanes: tc.lanes, PrefillChunk: 90, SpecTokens: tc.spec})
			defer s.Close()
			reqs := []*Request{req(tc.first, 150)}
			for len(reqs) < tc.lanes {
				reqs = append(reqs, req(tc.others, 150))
			}
			var chans []<-chan Event
			for _, r := range reqs {
				chans = append(chans, mustSubmit(t, s, r))
			}
			for i, r := range reqs {
				got, fin := collectWithin(t, chans[i], 4*time.Second)
				if fin.Err != nil || fin.Finish != "length" {
					t.Fatalf("request %d: %s %v", i, fin.Finish, fin.Err)
				}
				last := r.Prompt[len(r.Prompt)-1]
				if want := cycleTokens(int(last)+1, r.MaxTokens, period); !equal(got, want) {
					t.Fatalf("request %d: got %v, want %v", i, got, want)
				}
			}
			if c := s.Counters(); c.KVUsed != 0 || c.SpecDraftsKept == 0 {
				t.Fatalf("counters %+v", c)
			}
		})
	}
}

// submitTogether submits rs from the loop goroutine, so that they are
// admitted together, in order, before the next step.
func submitTogether(t *testing.T, s *Scheduler, rs ...*Request) []<-chan Event {
	t.Helper()
	var chans []<-chan Event
	var errs []error
	err := s.Run(func() {
		for _, r := range rs {
			ch, err := s.Submit(context.Background(), r)
			chans, errs = append(chans, ch), append(errs, err)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return chans
}

// TestCancelReleasesEverything: a request cancelled while queued, in the
// middle of its prompt, while decoding, or whose consumer went away with
// its channel full gives back every block reference, prefix-cache pin and
// recurrent-state slot; the lanes then serve a new request as if alone.
func TestCancelReleasesEverything(t *testing.T) {
	type phase int
	const (
		queued phase = iota
		midPrefill
		midDecode
		consumerGone
	)
	models := []struct {
		name string
		load func(t *testing.T) model.Model
	}{
		{"attention", func(t *testing.T) model.Model { return testModel(t, 16) }},
		{"hybrid", func(t *testing.T) model.Model { return hybridModelCtx(t, 16, 1024) }},
	}
	phases := []struct {
		name string
		at   phase
	}{{"queued", queued}, {"mid-prefill", midPrefill}, {"mid-decode", midDecode}, {"consumer gone", consumerGone}}
	for _, mc := range models {
		for _, ph := range phases {
			t.Run(mc.name+"/"+ph.name, func(t *testing.T) {
				m := mc.load(t)
				V := int32(m.Config().VocabSize)
				s := New(m, Config{MaxLanes: 1, PrefillChunk: 16})
				defer s.Shutdown() // the loop ends before the weights close
				long := hybridTokens(200, 1, V)
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				blocker := req(hybridTokens(70, 2, V), 150)
				var bch, ch <-chan Event
				if ph.at == queued {
					bch = mustSubmit(t, s, blocker)
				}
				ch, err := s.Submit(ctx, req(long, 300))
				if err != nil {
					t.Fatal(err)
				}
				// Cancel at the phase, seen from the loop between steps.
				deadline := time.Now().Add(4 * time.Second)
				for done := false; !done; {
					if time.Now().After(deadline) {
						t.Fatal("phase not reached")
					}
					s.Run(func() {
						var l *lane
						for _, o := range s.running {
							if o.nPrompt == len(long) {
								l = o
							}
						}
						switch ph.at {
						case queued:
							done = len(s.waiting) == 1
						case midPrefill:
							done = l != nil && l.computed > 64 && l.computed < l.nPrompt
						case midDecode:
							done = l != nil && l.gen > 2
						case consumerGone:
							done = l != nil && !room(l)
						}
						if done {
							cancel()
						}
					})
				}
				_, fin := collectWithin(t, ch, 4*time.Second)
				if fin.Finish != "cancelled" {
					t.Fatalf("finish %q, want cancelled", fin.Finish)
				}
				if bch != nil {
					collectWithin(t, bch, 4*time.Second)
				}
				s.Run(func() {
					used := s.alloc.Total() - s.alloc.FreeCount()
					if st := s.pc.Stats(); used != st.Blocks || st.Idle != st.Blocks {
						t.Errorf("after cancel: %d blocks referenced, cache %+v", used, st)
					}
					if st, ok := m.(stateful); ok && len(s.freeSlots) != st.StateSlots() {
						t.Errorf("%d of %d state slots free", len(s.freeSlots), st.StateSlots())
					}
				})
				p := hybridTokens(90, 3, V)
				got, fin := collectWithin(t, mustSubmit(t, s, req(p, 6)), 4*time.Second)
				alone := New(mc.load(t), Config{MaxLanes: 1, NoPrefixReuse: true})
				defer alone.Shutdown()
				want, _ := collectWithin(t, mustSubmit(t, alone, req(p, 6)), 4*time.Second)
				if fin.Err != nil || !equal(got, want) {
					t.Fatalf("after cancel: %v %v, alone %v", got, fin.Err, want)
				}
			})
		}
	}
}

// TestValidateBounds: the context bound is inclusive (prompt + max_tokens
// may fill the context exactly), and malformed requests are refused by
// Submit with an error rather than accepted or crashing it.
func TestValidateBounds(t *testing.T) {
	s := New(testModel(t, 4), Config{MaxLanes: 1}) // 256-token context
	defer s.Close()
	ctx := s.Config().MaxContext
	cases := []struct {
		name   string
		prompt []int32
		max    int
		ok     bool
	}{
		{"fills the context", prompt(ctx-10, 1), 10, true},
		{"prompt is the whole context, scoring", prompt(ctx, 2), 0, true},
		{"one over", prompt(ctx-10, 3), 11, false},
		{"empty prompt", nil, 5, false},
		{"token past the vocabulary", []int32{1, vocab}, 1, false},
		{"negative token", []int32{-1, 2}, 1, false},
		{"negative max tokens", prompt(5, 4), -1, false},
		{"very negative max tokens", prompt(5, 5), -100, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ch, err := s.Submit(context.Background(), req(tc.prompt, tc.max))
			if (err == nil) != tc.ok {
				t.Fatalf("submit: %v, want ok=%v", err, tc.ok)
			}
			if err != nil {
				return
			}
			got, fin := collectWithin(t, ch, 4*time.Second)
			if fin.Err != nil || fin.Finish != "length" || len(got) != tc.max {
				t.Fatalf("%d tokens, %s %v; want %d, length", len(got), fin.Finish, fin.Err, tc.max)
			}
			if c := s.Counters(); c.KVUsed != 0 {
				t.Fatalf("KV blocks leaked: %+v", c)
			}
		})
	}
}
