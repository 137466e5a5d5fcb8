package sched

import (
	"testing"
	"time"

	"github.com/infernix/infernix/engine/arch/qwen3"
	"github.com/infernix/infernix/engine/backend/cpu"
	"github.com/infernix/infernix/engine/model"
)

// BenchmarkTTFT4K is the time to first token of a 4096-token prompt computed
// in full (cold) and with all but its last block from the prefix cache, on a
// small synthetic model on the CPU.
func BenchmarkTTFT4K(b *testing.B) {
	cfg := &model.Config{Architectures: []string{"Qwen3ForCausalLM"}, VocabSize: vocab, HiddenSize: 128, IntermediateSize: 256,
		NumHiddenLayers: 4, NumAttentionHeads: 4, NumKeyValueHeads: 2, HeadDim: 32, RMSNormEps: 1e-6,
		RopeTheta: 10000, MaxPositionEmbeddings: 8192, HiddenAct: "silu", TieWordEmbeddings: true}
	p := prompt(4096, 1)
	for _, mode := range []struct {
		name string
		off  bool
	}{{"cold", true}, {"cached", false}} {
		b.Run(mode.name, func(b *testing.B) {
			be := cpu.New(0)
			m, err := qwen3.New(cfg, &model.SyntheticWeights{Be: be, Seed: 3}, be, model.Options{KVBlocks: 80, MaxBatchTokens: 512})
			if err != nil {
				b.Fatal(err)
			}
			s := New(m, Config{MaxLanes: 1, PrefillChunk: 512, NoPrefixReuse: mode.off})
			defer s.Shutdown()
			run := func() Stats {
				_, fin := collectB(b, mustSubmitB(b, s, req(p, 1)))
				return fin.Stats
			}
			run() // warm (fills the cache when on)
			var ttft time.Duration
			for b.Loop() {
				st := run()
				ttft += st.TTFT
				if !mode.off && st.CachedTokens != 4032 {
					b.Fatalf("cached %d tokens", st.CachedTokens)
				}
			}
			b.ReportMetric(float64(ttft.Microseconds())/1000/float64(b.N), "ttft-ms")
		})
	}
}

func mustSubmitB(b *testing.B, s *Scheduler, r *Request) <-chan Event {
	ch, err := s.Submit(b.Context(), r)
	if err != nil {
		b.Fatal(err)
	}
	return ch
}

func collectB(b *testing.B, ch <-chan Event) ([]int32, Event) {
	var toks []int32
	for ev := range ch {
		if ev.Done {
			return toks, ev
		}
		toks = append(toks, ev.Token)
	}
	b.Fatal("no final event")
	return nil, Event{}
}
