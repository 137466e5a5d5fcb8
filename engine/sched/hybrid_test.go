package sched

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/infernix/infernix/engine/arch/qwen3next"
	"github.com/infernix/infernix/engine/backend/cpu"
	"github.com/infernix/infernix/engine/model"
	"github.com/infernix/infernix/engine/safetensors"
)

func hybridModel(t *testing.T, blocks int) model.Model {
	t.Helper()
	return hybridModelCtx(t, blocks, 0)
}

// hybridModelCtx can stretch the fixture's context (256 positions) for tests
// that compare the model only with itself.
func hybridModelCtx(t *testing.T, blocks, maxPos int) model.Model {
	t.Helper()
	dir := filepath.Join("..", "..", "tests", "testdata", "models", "qwen35-tiny")
	cfg, err := model.LoadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	if maxPos > 0 {
		cfg.Text().MaxPositionEmbeddings = maxPos
	}
	set, err := safetensors.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { set.Close() })
	be := cpu.New(2)
	m, err := qwen3next.New(cfg, &model.FileWeights{Set: set, Be: be}, be, model.Options{KVBlocks: blocks, MaxBatchTokens: 96})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestHybridLanes: a hybrid (Gated DeltaNet) model served with several lanes,
// chunked prefill and preemption gives each request the output it gets alone:
// every lane keeps its own recurrent-state slot.
func TestHybridLanes(t *testing.T) {
	ref := hybridModel(t, 8)
	V := ref.Config().VocabSize
	prompts := [][]int32{}
	for i, n := range []int{5, 90, 33, 140, 70} {
		p := make([]int32, n)
		for j := range p {
			p[j] = int32((j*17 + i*5 + 3) % V)
		}
		prompts = append(prompts, p)
	}
	var want [][]int32
	for _, p := range prompts {
		s := New(hybridModel(t, 8), Config{MaxLanes: 1, PrefillChunk: 64})
		got, fin := collect(t, mustSubmit(t, s, req(p, 10)))
		if fin.Err != nil {
			t.Fatal(fin.Err)
		}
		want = append(want, got)
		s.Shutdown()
	}
	// Six blocks for up to 3 lanes of up to 150 tokens: preemption happens.
	s := New(hybridModel(t, 6), Config{MaxLanes: 3, PrefillChunk: 40})
	defer s.Shutdown()
	var chans []<-chan Event
	for _, p := range prompts {
		ch, err := s.Submit(context.Background(), req(p, 10))
		if err != nil {
			t.Fatal(err)
		}
		chans = append(chans, ch)
	}
	for i, ch := range chans {
		got, fin := collect(t, ch)
		if fin.Err != nil {
			t.Fatalf("request %d: %v", i, fin.Err)
		}
		if !equal(got, want[i]) {
			t.Fatalf("request %d: got %v, alone %v", i, got, want[i])
		}
	}
}

// TestHybridPrefixReuse: a hybrid model resumes a growing conversation from
// its cached KV blocks plus the recurrent-state snapshot at the last full
// block of the previous prompt, with the same greedy output as computing
// everything, and reports the reused tokens.
func TestHybridPrefixReuse(t *testing.T) {
	V := int32(hybridModel(t, 8).Config().VocabSize)
	turn1 := make([]int32, 150)
	for i := range turn1 {
		turn1[i] = int32(i*13+7) % V
	}
	turn2 := append(append([]int32(nil), turn1...), 11, 12, 13, 14, 15, 16, 17, 18, 19, 20)
	run := func(s *Scheduler, p []int32) ([]int32, int) {
		got, fin := collect(t, mustSubmit(t, s, req(p, 8)))
		if fin.Err != nil {
			t.Fatal(fin.Err)
		}
		return got, fin.Stats.CachedTokens
	}
	cold := New(hybridModel(t, 16), Config{MaxLanes: 2, NoPrefixReuse: true})
	want1, _ := run(cold, turn1)
	want2, _ := run(cold, turn2)
	cold.Shutdown()

	s := New(hybridModel(t, 16), Config{MaxLanes: 2, PrefillChunk: 256})
	defer s.Shutdown()
	got1, cached1 := run(s, turn1)
	got2, cached2 := run(s, turn2)
	if !equal(got1, want1) || !equal(got2, want2) {
		t.Fatalf("with reuse %v / %v, without %v / %v", got1, got2, want1, want2)
	}
	// turn1's last full block ends at 128: snapshot there, resumed by turn2.
	if cached1 != 0 || cached2 != 128 {
		t.Fatalf("cached tokens %d, %d; want 0, 128", cached1, cached2)
	}
	// The same prompt again resumes from the same point.
	if got, cached := run(s, turn2); !equal(got, want2) || cached != 128 {
		t.Fatalf("repeat: %v cached %d", got, cached)
	}
}

// TestHybridAgentReplay replays a 20-turn agent conversation (a long system
// prompt, then per turn the model's answer and a tool result appended) on a
// hybrid model in one process: at least 80% of the prompt tokens come from
// the cache (KV blocks + state snapshots), and outputs equal computing every
// prompt in full.
func TestHybridAgentReplay(t *testing.T) {
	V := int32(hybridModel(t, 8).Config().VocabSize)
	tokens := func(n, salt int) []int32 {
		p := make([]int32, n)
		for i := range p {
			p[i] = int32(i*31+salt*17+5) % V
		}
		return p
	}
	s := New(hybridModelCtx(t, 40, 1024), Config{MaxLanes: 2, PrefillChunk: 128})
	defer s.Shutdown()
	full := New(hybridModelCtx(t, 40, 1024), Config{MaxLanes: 2, PrefillChunk: 128, NoPrefixReuse: true})
	defer full.Shutdown()
	conv := tokens(250, 1)
	var promptTotal, cachedTotal int
	for turn := 0; turn < 20; turn++ {
		got, fin := collect(t, mustSubmit(t, s, req(conv, 6)))
		if fin.Err != nil {
			t.Fatalf("turn %d: %v", turn, fin.Err)
		}
		if turn%5 == 0 || turn == 19 {
			if want, _ := collect(t, mustSubmit(t, full, req(conv, 6))); !equal(got, want) {
				t.Fatalf("turn %d: with reuse %v, in full %v", turn, got, want)
			}
		}
		promptTotal += fin.Stats.PromptTokens
		cachedTotal += fin.Stats.CachedTokens
		conv = append(append(conv, got...), tokens(29, 40+turn)...) // tool result
	}
	ratio := float64(cachedTotal) / float64(promptTotal)
	if ratio < 0.8 {
		t.Fatalf("%.1f%% of %d prompt tokens from cache, want ≥ 80%%", 100*ratio, promptTotal)
	}
	t.Logf("%.1f%% of %d prompt tokens from cache", 100*ratio, promptTotal)
}
