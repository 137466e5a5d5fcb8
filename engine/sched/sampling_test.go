package sched

import (
	"fmt"
	"math"
	"reflect"
	"sync/atomic"
	"testing"

	"github.com/infernix/infernix/engine/arch/qwen3"
	"github.com/infernix/infernix/engine/backend"
	"github.com/infernix/infernix/engine/model"
	"github.com/infernix/infernix/engine/sample"
)

// hostOnly hides the model's device sampling: the scheduler then calls
// Forward and samples on the host, as it did before model.Sampling.
type hostOnly struct{ *qwen3.Model }

func (hostOnly) SampleLimits() backend.SampleLimits { return backend.SampleLimits{} }

// counted serves model.Sampling through the CPU backend (backend.SampleHost
// on the logits where they are) within given limits, and counts which path
// each step took.
type counted struct {
	*qwen3.Model
	lim              backend.SampleLimits
	forwards, device atomic.Int32
}

func (c *counted) SampleLimits() backend.SampleLimits { return c.lim }

func (c *counted) Forward(b *model.Batch, dst []float32) error {
	c.forwards.Add(1)
	return c.Model.Forward(b, dst)
}

func (c *counted) ForwardSample(b *model.Batch, req []backend.SampleRequest, out []backend.SampleResult) error {
	c.device.Add(1)
	for i := range req {
		if !c.lim.Serves(&req[i]) {
			return fmt.Errorf("row %d: request %+v beyond the limits %+v", i, req[i], c.lim)
		}
	}
	return c.Model.ForwardSample(b, req, out)
}

func sampling(f func(*sample.Params)) sample.Params {
	p := sample.DefaultParams()
	seed := uint64(12345)
	p.Seed = &seed
	f(&p)
	return p
}

// samplingRequests exercise every sampling parameter, log-probs with and
// without alternatives, the thinking budget's forced tokens and prompt
// scoring, several at a time (MaxLanes below) so that steps mix them.
func samplingRequests() []*Request {
	mk := func(salt, n int, f func(*sample.Params)) *Request {
		r := req(prompt(9+salt*7, salt), n)
		r.Sampling = sampling(f)
		return r
	}
	rs := []*Request{
		mk(1, 24, func(p *sample.Params) { p.Temperature = 0 }),
		mk(2, 24, func(p *sample.Params) {}),
		mk(3, 24, func(p *sample.Params) { p.Temperature = 0.7; p.TopK = 5 }),
		mk(4, 24, func(p *sample.Params) { p.Temperature = 1.3; p.TopK = 40; p.TopP = 0.9 }),
		mk(5, 24, func(p *sample.Params) { p.TopP = 0.8 }),
		mk(6, 24, func(p *sample.Params) { p.MinP = 0.1; p.Temperature = 1.5 }),
		mk(7, 24, func(p *sample.Params) {
			p.RepetitionPenalty, p.PresencePenalty, p.FrequencyPenalty = 1.3, 0.5, 0.4
		}),
		mk(8, 24, func(p *sample.Params) { p.LogitBias = map[int32]float32{3: 4, 7: -100} }),
		mk(9, 24, func(p *sample.Params) { p.Temperature = 0; p.RepetitionPenalty = 1.5 }),
	}
	lp := mk(10, 20, func(p *sample.Params) { p.TopK = 20; p.MinP = 0.02 })
	lp.Logprobs = 3
	lp0 := mk(11, 20, func(p *sample.Params) { p.TopP = 0.95 })
	lp0.Logprobs = 0
	think := mk(12, 20, func(p *sample.Params) { p.Temperature = 0.9 })
	think.InThink, think.ThinkBudget, think.ThinkClose, think.ForceClose, think.Logprobs = true, 4, 60, []int32{59, 60}, 2
	score := mk(13, 12, func(p *sample.Params) { p.TopK = 10 })
	score.PromptLogprobs, score.PromptTop, score.Logprobs = true, 2, 1
	scoreOnly := mk(14, 0, func(p *sample.Params) {})
	scoreOnly.PromptLogprobs = true
	return append(rs, lp, lp0, think, score, scoreOnly)
}

// runAll submits every request at once and returns each one's events.
func runAll(t *testing.T, m model.Model, rs []*Request) [][]Event {
	t.Helper()
	s := New(m, Config{MaxLanes: 4, PrefillChunk: 32})
	defer s.Close()
	chans := make([]<-chan Event, len(rs))
	for i, r := range rs {
		rc := *r // the scheduler does not modify requests, but keep runs apart
		chans[i] = mustSubmit(t, s, &rc)
	}
	out := make([][]Event, len(rs))
	for i, ch := range chans {
		for ev := range ch {
			ev.Stats = Stats{}
			out[i] = append(out[i], ev)
		}
		if fin := out[i][len(out[i])-1]; fin.Err != nil {
			t.Fatalf("request %d: %v", i, fin.Err)
		}
	}
	return out
}

func compareEvents(t *testing.T, what string, got, want [][]Event) {
	t.Helper()
	for i := range want {
		if !reflect.DeepEqual(got[i], want[i]) {
			n := min(len(got[i]), len(want[i]))
			for j := 0; j < n; j++ {
				if !reflect.DeepEqual(got[i][j], want[i][j]) {
					t.Fatalf("%s: request %d, event %d: got %+v, host path %+v", what, i, j, got[i][j], want[i][j])
				}
			}
			t.Fatalf("%s: request %d: %d events, host path %d", what, i, len(got[i]), len(want[i]))
		}
	}
}

// TestDeviceSamplingMatchesHost: a model serving model.Sampling (the CPU
// backend's RowSampler) gives the same events — tokens, log-probs,
// alternatives, forced tokens, prompt scores — as Forward plus host
// sampling, for greedy and seeded requests with every parameter, and the
// steps with prompt scoring fall back to Forward.
func TestDeviceSamplingMatchesHost(t *testing.T) {
	rs := samplingRequests()
	want := runAll(t, hostOnly{testModel(t, 40).(*qwen3.Model)}, rs)
	for _, r := range want[:9] { // the sampled requests made tokens at all
		if len(r) < 5 {
			t.Fatalf("too few events: %+v", r)
		}
	}
	dev := &counted{Model: testModel(t, 40).(*qwen3.Model)}
	dev.lim = dev.Model.SampleLimits()
	if dev.lim.Rows == 0 {
		t.Fatal("the CPU backend does not sample rows")
	}
	compareEvents(t, "device path", runAll(t, dev, rs), want)
	if dev.device.Load() == 0 || dev.forwards.Load() == 0 {
		t.Fatalf("steps: %d sampled by the model, %d through Forward; want both (prompt scoring falls back)", dev.device.Load(), dev.forwards.Load())
	}
	t.Logf("steps: %d sampled by the model, %d through Forward", dev.device.Load(), dev.forwards.Load())
}

// TestDeviceSamplingLimits: requests beyond the device's limits (more
// alternatives, more logit_bias entries) make their steps fall back to
// the host, with unchanged results; within them the device serves.
func TestDeviceSamplingLimits(t *testing.T) {
	mk := func(logprobs int, bias map[int32]float32) *Request {
		r := req(prompt(20, 3), 16)
		r.Sampling = sampling(func(p *sample.Params) { p.TopK = 8; p.LogitBias = bias })
		r.Logprobs = logprobs
		return r
	}
	lim := backend.SampleLimits{Rows: 64, MaxLogprobs: 2, MaxBias: 1}
	for _, c := range []struct {
		name   string
		r      *Request
		device bool
	}{
		{"within", mk(2, map[int32]float32{5: 3}), true},
		{"logprobs", mk(3, nil), false},
		{"bias", mk(-1, map[int32]float32{5: 3, 6: -2}), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			want := runAll(t, hostOnly{testModel(t, 8).(*qwen3.Model)}, []*Request{c.r})
			dev := &counted{Model: testModel(t, 8).(*qwen3.Model), lim: lim}
			compareEvents(t, c.name, runAll(t, dev, []*Request{c.r}), want)
			if got := dev.device.Load() > 0; got != c.device {
				t.Fatalf("device steps %d, Forward steps %d; want device use %v", dev.device.Load(), dev.forwards.Load(), c.device)
			}
		})
	}
}

// TestSampleHostForced: a forced row reports the raw log-probs of the
// given token and draws nothing, so the stream stays in step with a
// sampler that never saw the row.
func TestSampleHostForced(t *testing.T) {
	logits := make([]float32, vocab)
	for i := range logits {
		logits[i] = float32(math.Sin(float64(i)))
	}
	p := sampling(func(p *sample.Params) {})
	a, b := sample.New(p, vocab, nil), sample.New(p, vocab, nil)
	out := make([]backend.SampleResult, 1)
	backend.SampleHost(append([]float32(nil), logits...), vocab, []backend.SampleRequest{{Sampler: a, Logprobs: 2, Force: 7}}, out)
	if out[0].Token != 7 || out[0].LogProb != sample.LogProbOf(logits, 7) || len(out[0].Top) != 2 {
		t.Fatalf("forced row: %+v", out[0])
	}
	for i := 0; i < 8; i++ {
		if x, y := a.Sample(append([]float32(nil), logits...)), b.Sample(append([]float32(nil), logits...)); x != y {
			t.Fatalf("draw %d: %d after a forced row, %d without", i, x, y)
		}
	}
}
