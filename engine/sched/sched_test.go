package sched

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/infernix/infernix/engine/arch/qwen3"
	"github.com/infernix/infernix/engine/backend"
	"github.com/infernix/infernix/engine/backend/cpu"
	"github.com/infernix/infernix/engine/model"
	"github.com/infernix/infernix/engine/sample"
)

const vocab = 61

func testModel(t testing.TB, blocks int) model.Model {
	t.Helper()
	cfg := &model.Config{Architectures: []string{"Qwen3ForCausalLM"}, VocabSize: vocab, HiddenSize: 32, IntermediateSize: 48,
		NumHiddenLayers: 2, NumAttentionHeads: 4, NumKeyValueHeads: 2, HeadDim: 8, RMSNormEps: 1e-6,
		RopeTheta: 10000, MaxPositionEmbeddings: 1024, HiddenAct: "silu", TieWordEmbeddings: true}
	be := cpu.New(2)
	// Larger weights than the default synthetic scale so that greedy paths vary.
	m, err := qwen3.New(cfg, &model.SyntheticWeights{Be: be, Seed: 3, Std: 0.35}, be, model.Options{KVBlocks: blocks, MaxBatchTokens: 96})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func greedy() sample.Params { return sample.Params{Temperature: 0, TopP: 1, RepetitionPenalty: 1} }

func prompt(n, salt int) []int32 {
	p := make([]int32, n)
	for i := range p {
		p[i] = int32((i*13 + salt*7 + 1) % vocab)
	}
	return p
}

// solo decodes greedily with direct model calls: the reference for the scheduler.
func solo(t *testing.T, m model.Model, p []int32, n int) []int32 {
	t.Helper()
	blocks := []int32{}
	for i := 0; i < (len(p)+n+63)/64; i++ {
		blocks = append(blocks, int32(i))
	}
	logits := make([]float32, vocab)
	seq := append([]int32(nil), p...)
	var out []int32
	start := 0
	for len(out) < n {
		b := &model.Batch{Attn: backend.AttnBatch{Blocks: [][]int32{blocks}}}
		end := min(len(seq), start+64)
		for i := start; i < end; i++ {
			b.Tokens = append(b.Tokens, seq[i])
			b.Attn.Seq = append(b.Attn.Seq, 0)
			b.Attn.Pos = append(b.Attn.Pos, int32(i))
		}
		b.Outputs = []int32{int32(len(b.Tokens) - 1)}
		if err := m.Forward(b, logits); err != nil {
			t.Fatal(err)
		}
		best := int32(0)
		for i, v := range logits {
			if v > logits[best] {
				best = int32(i)
			}
		}
		start = end
		if end < len(seq) {
			continue // more prompt to prefill
		}
		seq = append(seq, best)
		out = append(out, best)
	}
	return out
}

func collect(t *testing.T, ch <-chan Event) ([]int32, Event) {
	t.Helper()
	return collectWithin(t, ch, 30*time.Second)
}

func req(p []int32, n int) *Request {
	return &Request{Prompt: p, MaxTokens: n, Sampling: greedy(), Logprobs: -1, ThinkBudget: -1, ThinkOpen: -1, ThinkClose: -1}
}

// TestContinuousBatchingMatchesSolo: more requests than lanes, different
// prompt lengths (several prefill chunks), all equal to decoding alone.
func TestContinuousBatchingMatchesSolo(t *testing.T) {
	m := testModel(t, 40)
	s := New(m, Config{MaxLanes: 3, PrefillChunk: 40})
	defer s.Close()
	lens := []int{5, 70, 33, 130, 2, 64}
	var chans []<-chan Event
	for i, n := range lens {
		ch, err := s.Submit(context.Background(), req(prompt(n, i), 12))
		if err != nil {
			t.Fatal(err)
		}
		chans = append(chans, ch)
	}
	for i, ch := range chans {
		got, fin := collect(t, ch)
		if fin.Err != nil || fin.Finish != "length" {
			t.Fatalf("request %d: finish %q err %v", i, fin.Finish, fin.Err)
		}
		want := solo(t, testModel(t, 8), prompt(lens[i], i), 12)
		if !equal(got, want) {
			t.Fatalf("request %d (prompt %d): got %v, alone %v", i, lens[i], got, want)
		}
		if fin.Stats.PromptTokens != lens[i] || fin.Stats.GeneratedTokens != 12 {
			t.Fatalf("request %d: stats %+v", i, fin.Stats)
		}
	}
}

// TestPreemption: a pool too small for all lanes at once forces preemption
// and recompute; outputs stay those of decoding alone.
func TestPreemption(t *testing.T) {
	m := testModel(t, 5) // 320 token slots
	s := New(m, Config{MaxLanes: 3, PrefillChunk: 64})
	defer s.Close()
	var chans []<-chan Event
	for i := 0; i < 3; i++ {
		ch, err := s.Submit(context.Background(), req(prompt(100, i), 30))
		if err != nil {
			t.Fatal(err)
		}
		chans = append(chans, ch)
	}
	preempted := 0
	for i, ch := range chans {
		got, fin := collect(t, ch)
		if fin.Err != nil {
			t.Fatalf("request %d: %v", i, fin.Err)
		}
		preempted += fin.Stats.Preemptions
		want := solo(t, testModel(t, 8), prompt(100, i), 30)
		if !equal(got, want) {
			t.Fatalf("request %d: got %v, alone %v", i, got, want)
		}
	}
	if preempted == 0 {
		t.Fatal("expected at least one preemption with 5 blocks for 3×130 tokens")
	}
	if c := s.Counters(); c.KVUsed != 0 {
		t.Fatalf("KV blocks leaked: %+v", c)
	}
}

func TestCancelFreesLane(t *testing.T) {
	m := testModel(t, 16)
	s := New(m, Config{MaxLanes: 1})
	defer s.Close()
	ctx, cancel := context.WithCancel(context.Background())
	ch, err := s.Submit(ctx, req(prompt(10, 1), 500))
	if err != nil {
		t.Fatal(err)
	}
	<-ch // first token
	cancel()
	_, fin := collect(t, ch)
	if fin.Finish != "cancelled" {
		t.Fatalf("finish %q, want cancelled", fin.Finish)
	}
	// The only lane is free again: a new request completes.
	ch2, err := s.Submit(context.Background(), req(prompt(4, 2), 3))
	if err != nil {
		t.Fatal(err)
	}
	if got, fin := collect(t, ch2); len(got) != 3 || fin.Finish != "length" {
		t.Fatalf("after cancel: %v %q", got, fin.Finish)
	}
}

func TestQueueFullAndContext(t *testing.T) {
	m := testModel(t, 16)
	s := New(m, Config{MaxLanes: 1, MaxQueue: 1})
	defer s.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var err error
	for i := 0; i < 10 && err == nil; i++ {
		_, err = s.Submit(ctx, req(prompt(8, i), 400))
	}
	if !errors.Is(err, ErrQueueFull) {
		t.Fatalf("got %v, want ErrQueueFull", err)
	}
	var ce *ContextError
	if _, err := s.Submit(ctx, req(prompt(10, 0), 5000)); !errors.As(err, &ce) || ce.Prompt != 10 || ce.MaxTokens != 5000 {
		t.Fatalf("got %v, want a ContextError naming 10 and 5000", err)
	}
}

func TestStopTokenAndThinkingBudget(t *testing.T) {
	m := testModel(t, 16)
	s := New(m, Config{MaxLanes: 2})
	defer s.Close()
	p := prompt(9, 4)
	want := solo(t, testModel(t, 8), p, 10)
	r := req(p, 10)
	r.StopTokens = []int32{want[3]}
	got, fin := collect(t, mustSubmit(t, s, r))
	// The stop token is the first occurrence of want[3] in want.
	stopAt := 0
	for stopAt < len(want) && want[stopAt] != want[3] {
		stopAt++
	}
	if fin.Finish != "stop" || !equal(got, want[:stopAt+1]) {
		t.Fatalf("stop: got %v (%s), want %v", got, fin.Finish, want[:stopAt+1])
	}
	// Thinking budget: inside a think block from the start, 3 tokens allowed,
	// then the forced closing sequence.
	r = req(p, 12)
	r.InThink, r.ThinkBudget, r.ThinkClose, r.ForceClose = true, 3, 60, []int32{59, 60}
	got, _ = collect(t, mustSubmit(t, s, r))
	if len(got) < 5 || got[3] != 59 || got[4] != 60 {
		t.Fatalf("budget: got %v, want 3 sampled tokens then 59 60", got)
	}
	// A budget larger than max_tokens allows still leaves a quarter for the answer.
	r = req(p, 8)
	r.InThink, r.ThinkBudget, r.ThinkClose, r.ForceClose = true, 100, 60, []int32{60}
	got, _ = collect(t, mustSubmit(t, s, r))
	if len(got) != 8 || got[5] != 60 {
		t.Fatalf("budget cap: got %v, want the close at index 5 (8 - 8/4 - 1)", got)
	}
}

func TestPromptLogprobs(t *testing.T) {
	m := testModel(t, 16)
	s := New(m, Config{MaxLanes: 1})
	defer s.Close()
	p := prompt(150, 9)
	r := req(p, 0)
	r.PromptLogprobs, r.PromptTop = true, 3
	ch := mustSubmit(t, s, r)
	var lps []PromptLogprob
	for ev := range ch {
		if ev.PromptLogprobs != nil {
			lps = ev.PromptLogprobs
		}
	}
	if len(lps) != len(p)-1 {
		t.Fatalf("%d prompt log-probs for %d tokens", len(lps), len(p))
	}
	for i, lp := range lps {
		if lp.Token != p[i+1] || lp.Logprob > 0 || len(lp.Top) != 3 || lp.Top[0].LogProb < lp.Logprob {
			t.Fatalf("position %d: %+v", i+1, lp)
		}
	}
}

func mustSubmit(t *testing.T, s *Scheduler, r *Request) <-chan Event {
	t.Helper()
	ch, err := s.Submit(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

func equal(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestShutdownCancelsEverything(t *testing.T) {
	m := testModel(t, 16)
	s := New(m, Config{MaxLanes: 1})
	running := mustSubmit(t, s, req(prompt(8, 1), 900))
	queued := mustSubmit(t, s, req(prompt(8, 2), 900))
	<-running
	s.Shutdown()
	for _, ch := range []<-chan Event{running, queued} {
		_, fin := collect(t, ch)
		if fin.Finish != "cancelled" || !errors.Is(fin.Err, ErrClosed) {
			t.Fatalf("finish %q err %v", fin.Finish, fin.Err)
		}
	}
	if _, err := s.Submit(context.Background(), req(prompt(3, 0), 1)); !errors.Is(err, ErrClosed) {
		t.Fatalf("submit after shutdown: %v", err)
	}
}

// TestRunOnLoop: Run executes on the loop goroutine between steps, while
// requests are being served, and fails once the loop has exited.
func TestRunOnLoop(t *testing.T) {
	m := testModel(t, 16)
	s := New(m, Config{MaxLanes: 1})
	ch := mustSubmit(t, s, req(prompt(8, 1), 50))
	ran := false
	if err := s.Run(func() { ran = true }); err != nil || !ran {
		t.Fatalf("Run: %v, ran %v", err, ran)
	}
	if got, fin := collect(t, ch); len(got) != 50 || fin.Finish != "length" {
		t.Fatalf("request around Run: %d tokens, %s", len(got), fin.Finish)
	}
	s.Shutdown()
	if err := s.Run(func() {}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Run after shutdown: %v", err)
	}
}
