package sched

import (
	"errors"
	"fmt"
	"testing"

	"github.com/infernix/infernix/engine/arch/qwen3"
	"github.com/infernix/infernix/engine/backend"
	"github.com/infernix/infernix/engine/model"
	"github.com/infernix/infernix/engine/sample"
)

// residueConstraint allows, at its n-th token, the ids ≡ n (mod 5) other
// than the stop and think tokens, and lets the output end after endAfter
// tokens. It records what it was asked and checks that every accepted
// token was allowed.
type residueConstraint struct {
	endAfter int
	accepted []int32
	allowed  []uint64 // the last mask given
	asks     int
	lie      bool // Accept fails (a scheduler must end the request)
}

func (c *residueConstraint) Allowed(mask []uint64) bool {
	c.asks++
	clear(mask)
	n := len(c.accepted)
	for id := 0; id < vocab; id++ {
		if id%5 == n%5 && id != testStop && id != testOpen && id != testClose {
			mask[id/64] |= 1 << (id % 64)
		}
	}
	c.allowed = append(c.allowed[:0], mask...)
	return n >= c.endAfter
}

func (c *residueConstraint) Accept(tok int32) error {
	if c.lie {
		return errors.New("not in the grammar")
	}
	if c.allowed == nil || c.allowed[tok/64]&(1<<(tok%64)) == 0 {
		return fmt.Errorf("token %d was not allowed", tok)
	}
	c.accepted = append(c.accepted, tok)
	c.allowed = nil
	return nil
}

const (
	testStop  = 7
	testOpen  = 11
	testClose = 12
	testThink = 13
)

// biased is a greedy request whose logit bias prefers the given tokens
// (the first most), so that a mask's effect shows in which one wins.
func biased(n int, prefer ...int32) *Request {
	r := req(prompt(6, 2), n)
	r.Sampling.LogitBias = map[int32]float32{}
	for i, t := range prefer {
		r.Sampling.LogitBias[t] = float32(100 - 10*i)
	}
	r.StopTokens = []int32{testStop}
	return r
}

func events(t *testing.T, m model.Model, r *Request) []Event {
	t.Helper()
	s := New(m, Config{MaxLanes: 2, PrefillChunk: 32})
	defer s.Close()
	var out []Event
	for ev := range mustSubmit(t, s, r) {
		out = append(out, ev)
	}
	return out
}

func TestConstraintMasksAndEnds(t *testing.T) {
	base := testModel(t, 16)
	for _, m := range []struct {
		name  string
		model model.Model
	}{{"host", hostOnly{base.(*qwen3.Model)}}, {"device sampler", &counted{Model: base.(*qwen3.Model), lim: backend.SampleLimits{Rows: 8, MaxLogprobs: 20, MaxBias: 8}}},
		{"device sampler with masks", &counted{Model: base.(*qwen3.Model), lim: backend.SampleLimits{Rows: 8, MaxLogprobs: 20, MaxBias: 8, Masks: true}}}} {
		t.Run(m.name, func(t *testing.T) {
			c := &residueConstraint{endAfter: 6}
			r := biased(30, testStop)
			r.Constraint = c
			evs := events(t, m.model, r)
			fin := evs[len(evs)-1]
			if fin.Finish != "stop" || fin.Err != nil {
				t.Fatalf("finish %q, %v; want stop", fin.Finish, fin.Err)
			}
			// The stop token, preferred by far, waits until the constraint
			// lets the output end.
			if len(c.accepted) != 6 || len(evs) != 8 || evs[6].Token != testStop {
				t.Fatalf("accepted %v, events %+v: want 6 constrained tokens, then the stop token", c.accepted, evs)
			}
			for i, tok := range c.accepted {
				if int(tok)%5 != i%5 || evs[i].Token != tok {
					t.Fatalf("token %d = %d, outside the mask or not the event's %d", i, tok, evs[i].Token)
				}
			}
			if cm, ok := m.model.(*counted); ok && (cm.device.Load() != 0) != cm.lim.Masks {
				t.Fatalf("%d steps sampled on the device with a mask in force (the device applies masks: %v)", cm.device.Load(), cm.lim.Masks)
			}
		})
	}
}

func TestConstraintThinkBlock(t *testing.T) {
	m := hostOnly{testModel(t, 16).(*qwen3.Model)}
	think := func(may bool) (*residueConstraint, []Event) {
		c := &residueConstraint{endAfter: 100}
		r := biased(12, testThink, testOpen)
		r.ThinkOpen, r.ThinkClose, r.ThinkBudget, r.ForceClose = testOpen, testClose, 3, []int32{testClose}
		r.MayOpenThink = may
		r.Constraint = c
		return c, events(t, m, r)
	}
	c, evs := think(true)
	// <think>, three free tokens (the bias's 13), the forced </think>, then
	// constrained tokens.
	want := []int32{testOpen, testThink, testThink, testThink, testClose}
	for i, w := range want {
		if evs[i].Token != w {
			t.Fatalf("event %d = %d, want %d (events %+v)", i, evs[i].Token, w, evs)
		}
	}
	if got := len(evs) - 1 - len(want); len(c.accepted) != got || got == 0 {
		t.Fatalf("%d constrained tokens accepted, %d generated after the think block", len(c.accepted), got)
	}
	c, evs = think(false)
	if evs[0].Token == testOpen || len(c.accepted) != len(evs)-1 {
		t.Fatalf("MayOpenThink false: events %+v, accepted %v", evs, c.accepted)
	}
}

func TestConstraintAcceptError(t *testing.T) {
	m := hostOnly{testModel(t, 16).(*qwen3.Model)}
	r := biased(10)
	r.Constraint = &residueConstraint{lie: true}
	evs := events(t, m, r)
	if fin := evs[len(evs)-1]; fin.Finish != "error" || fin.Err == nil || len(evs) != 1 {
		t.Fatalf("events %+v: want one final error event", evs)
	}
}

// TestMaskedSamplerDraws checks sample.Sampler's mask on its own paths.
func TestMaskedSamplerDraws(t *testing.T) {
	for _, p := range []sample.Params{greedy(), sampling(func(p *sample.Params) { p.TopK = 3 }), sampling(func(p *sample.Params) {})} {
		s := sample.New(p, vocab, nil)
		mask := make([]uint64, 1)
		mask[0] = 1<<5 | 1<<40
		s.SetMask(mask)
		for i := 0; i < 50; i++ {
			logits := make([]float32, vocab)
			logits[3] = 50
			if tok := s.Sample(logits); tok != 5 && tok != 40 {
				t.Fatalf("%+v: drew %d outside the mask", p, tok)
			}
		}
	}
}

// gateConstraint is a residueConstraint in force for span tokens after each
// trigger token, and free otherwise.
type gateConstraint struct {
	residueConstraint
	trigger    int32
	span, left int
	seen       []int32 // every token Accept saw
	freeDraws  int     // tokens drawn while free
}

func (c *gateConstraint) Free() bool { return c.left == 0 }

func (c *gateConstraint) Accept(tok int32) error {
	c.seen = append(c.seen, tok)
	if c.left == 0 {
		c.freeDraws++
		if tok == c.trigger {
			c.left = c.span
		}
		return nil
	}
	c.left--
	return c.residueConstraint.Accept(tok)
}

var _ Intermittent = (*gateConstraint)(nil)

func TestIntermittentConstraint(t *testing.T) {
	const trigger = 21 // ≡ 1 (mod 5): the first constrained draw (≡ 0) may not take it
	base := testModel(t, 16)
	for _, m := range []struct {
		name  string
		model model.Model
	}{{"host", hostOnly{base.(*qwen3.Model)}}, {"device sampler", &counted{Model: base.(*qwen3.Model), lim: backend.SampleLimits{Rows: 8, MaxLogprobs: 20, MaxBias: 8}}}} {
		t.Run(m.name, func(t *testing.T) {
			c := &gateConstraint{trigger: trigger, span: 3, residueConstraint: residueConstraint{endAfter: 100}}
			r := biased(13, trigger)
			r.Constraint = c
			evs := events(t, m.model, r)
			if fin := evs[len(evs)-1]; fin.Finish != "length" || fin.Err != nil {
				t.Fatalf("finish %q, %v; want length", fin.Finish, fin.Err)
			}
			if len(c.seen) != 13 {
				t.Fatalf("Accept saw %d tokens, want all 13", len(c.seen))
			}
			// Free draws take the biased trigger; each opens 3 constrained
			// draws, the n-th of them ≡ n (mod 5).
			for i := 0; i < 13; i += 4 {
				if c.seen[i] != trigger {
					t.Fatalf("free draw %d = %d, want the trigger (tokens %v)", i, c.seen[i], c.seen)
				}
			}
			for n, tok := range c.accepted {
				if int(tok)%5 != n%5 || tok != c.seen[n+n/3+1] {
					t.Fatalf("constrained token %d = %d, outside its mask (tokens %v)", n, tok, c.seen)
				}
			}
			if c.freeDraws != 4 || len(c.accepted) != 9 || c.asks == 0 {
				t.Fatalf("%d free draws, %d constrained, %d masks asked", c.freeDraws, len(c.accepted), c.asks)
			}
			if cm, ok := m.model.(*counted); ok && cm.device.Load() == 0 {
				t.Fatal("no step sampled on the device while the constraint was free")
			}
		})
	}
}
