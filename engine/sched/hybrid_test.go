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
	dir := filepath.Join("..", "..", "tests", "testdata", "models", "qwen35-tiny")
	cfg, err := model.LoadConfig(dir)
	if err != nil {
		t.Fatal(err)
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
