package engine

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/infernix/infernix/engine/backend"
	"github.com/infernix/infernix/engine/sample"
	"github.com/infernix/infernix/engine/sched"
	"github.com/infernix/infernix/store"
)

// stretchedModel is a copy of a tests/testdata model (weights linked) whose
// config allows positions positions, so that a tiny model takes 4K prompts.
func stretchedModel(b *testing.B, name string, positions int) string {
	b.Helper()
	src := filepath.Join(testdata, "models", name)
	dst := b.TempDir()
	entries, err := os.ReadDir(src)
	if err != nil {
		b.Fatal(err)
	}
	for _, e := range entries {
		abs, _ := filepath.Abs(filepath.Join(src, e.Name()))
		if e.Name() != "config.json" {
			if err := os.Symlink(abs, filepath.Join(dst, e.Name())); err != nil {
				b.Fatal(err)
			}
			continue
		}
		raw, err := os.ReadFile(abs)
		if err != nil {
			b.Fatal(err)
		}
		var cfg map[string]any
		if err := json.Unmarshal(raw, &cfg); err != nil {
			b.Fatal(err)
		}
		cfg["max_position_embeddings"] = positions
		out, _ := json.Marshal(cfg)
		if err := os.WriteFile(filepath.Join(dst, "config.json"), out, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return dst
}

func benchOpen(b *testing.B, dir string) Persister {
	b.Helper()
	st, err := store.Open(dir, nil)
	if err != nil {
		b.Fatal(err)
	}
	return storeDir{st}
}

// firstToken submits p for one token and returns the request's stats.
func firstToken(b *testing.B, e *Engine, p []int32) sched.Stats {
	b.Helper()
	ch, err := e.Sched.Submit(context.Background(), &sched.Request{Prompt: p, MaxTokens: 1,
		Sampling: sample.Params{TopP: 1, RepetitionPenalty: 1}, Logprobs: -1, ThinkBudget: -1, ThinkOpen: -1, ThinkClose: -1})
	if err != nil {
		b.Fatal(err)
	}
	for ev := range ch {
		if ev.Done {
			if ev.Err != nil {
				b.Fatal(ev.Err)
			}
			return ev.Stats
		}
	}
	b.Fatal("no final event")
	return sched.Stats{}
}

// BenchmarkPrefixTTFT4K is the time to first token of a 4096-token prompt on
// the CPU with the real engine and the demo model (tests/testdata/models/demo,
// 8 layers, context stretched to 4K): computed in full (cold), with all but
// its last block from the prefix cache in memory, and from the data directory
// after a restart (blocks read from Badger into the KV pool).
func BenchmarkPrefixTTFT4K(b *testing.B) {
	model := stretchedModel(b, "demo", 4224)
	p := make([]int32, 4096)
	for i := range p {
		p[i] = int32((i*37 + 11) % 4000)
	}
	load := func(b *testing.B, o Options) *Engine {
		o.Device, o.ContextLength = "cpu", 4224
		o.Sched.MaxLanes, o.Sched.PrefillChunk = 1, 512
		e, err := Load(model, o)
		if err != nil {
			b.Fatal(err)
		}
		return e
	}
	report := func(b *testing.B, ttft time.Duration, cached, n int) {
		b.ReportMetric(float64(ttft.Microseconds())/1000/float64(n), "ttft-ms")
		b.ReportMetric(float64(cached), "cached-tokens")
	}
	b.Run("cold", func(b *testing.B) {
		e := load(b, Options{NoPrefixReuse: true})
		defer e.Close()
		var ttft time.Duration
		n := 0
		for b.Loop() {
			ttft += firstToken(b, e, p).TTFT
			n++
		}
		report(b, ttft, 0, n)
	})
	b.Run("cached-memory", func(b *testing.B) {
		e := load(b, Options{})
		defer e.Close()
		firstToken(b, e, p) // fills the cache
		var ttft time.Duration
		n, cached := 0, 0
		for b.Loop() {
			st := firstToken(b, e, p)
			ttft += st.TTFT
			cached = st.CachedTokens
			n++
		}
		report(b, ttft, cached, n)
	})
	b.Run("cached-disk", func(b *testing.B) {
		dir := b.TempDir()
		e := load(b, Options{Persist: benchOpen(b, dir)})
		firstToken(b, e, p)
		if err := e.Close(); err != nil { // saves the blocks
			b.Fatal(err)
		}
		var ttft time.Duration
		n, cached := 0, 0
		for b.Loop() {
			b.StopTimer()
			e := load(b, Options{Persist: benchOpen(b, dir)}) // a restart: the KV pool is empty
			b.StartTimer()
			st := firstToken(b, e, p)
			b.StopTimer()
			e.Close()
			b.StartTimer()
			ttft += st.TTFT
			cached = st.CachedTokens
			n++
		}
		report(b, ttft, cached, n)
	})
}

// BenchmarkPrefixMemory reports what one cached block and one snapshot cost:
// a block's KV bytes in the pool (and in the host pool) and its bytes on disk
// (sealed value) for the demo model; the host memory of a recurrent-state
// snapshot and its bytes on disk for the hybrid qwen35-tiny. The index's own
// overhead per block is engine/prefix BenchmarkIndexMemory.
func BenchmarkPrefixMemory(b *testing.B) {
	cases := []struct {
		name   string
		model  string
		prompt int
	}{
		{"block/demo", "demo", 1024},
		{"snapshot/qwen35-tiny", "qwen35-tiny", 200},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				dir := b.TempDir()
				e, err := Load(filepath.Join(testdata, "models", c.model), Options{Device: "cpu", ContextLength: 1100, Persist: benchOpen(b, dir)})
				if err != nil {
					b.Fatal(err)
				}
				p := make([]int32, c.prompt)
				for i := range p {
					p[i] = int32(3 + i%97)
				}
				firstToken(b, e, p)
				kvBytes := e.Model.(backend.KVCacheOwner).KVCache().(backend.KVBlockCopier).BlockBytes()
				cnt := e.Sched.Counters()
				ps := e.PrefixTier.(*store.PrefixStore)
				if err := e.Close(); err != nil {
					b.Fatal(err)
				}
				st := ps.Stats()
				if c.model == "demo" {
					b.ReportMetric(float64(kvBytes), "kv-B/block")
					b.ReportMetric(float64(st.Bytes)/float64(st.Blocks), "disk-B/block")
					continue
				}
				if cnt.Snapshots == 0 || st.Snapshots == 0 {
					b.Fatalf("no snapshot taken: %+v %+v", cnt, st)
				}
				b.ReportMetric(float64(cnt.SnapshotBytes)/float64(cnt.Snapshots), "mem-B/snapshot")
				b.ReportMetric(float64(kvBytes), "kv-B/block")
				b.ReportMetric(float64(st.Bytes-int64(st.Blocks)*int64(kvBytes+5))/float64(st.Snapshots), "disk-B/snapshot")
			}
		})
	}
}
