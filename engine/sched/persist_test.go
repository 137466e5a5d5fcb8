package sched

import (
	"testing"

	"github.com/infernix/infernix/engine/arch/qwen3"
	"github.com/infernix/infernix/engine/backend"
	"github.com/infernix/infernix/engine/backend/cpu"
	"github.com/infernix/infernix/engine/model"
	"github.com/infernix/infernix/engine/prefix"
	"github.com/infernix/infernix/store"
)

// kvBackend records the KV pool the model creates, so that the test model
// can expose it as an architecture would (backend.KVCacheOwner).
type kvBackend struct {
	*cpu.Backend
	kv backend.KVCache
}

func (b *kvBackend) NewKVCache(spec backend.KVSpec) (backend.KVCache, error) {
	c, err := b.Backend.NewKVCache(spec)
	b.kv = c
	return c, err
}

type ownerModel struct {
	model.Model
	kv backend.KVCache
}

func (m ownerModel) KVCache() backend.KVCache { return m.kv }

func persistModel(t *testing.T, blocks int) ownerModel {
	t.Helper()
	cfg := &model.Config{Architectures: []string{"Qwen3ForCausalLM"}, VocabSize: vocab, HiddenSize: 32, IntermediateSize: 48,
		NumHiddenLayers: 2, NumAttentionHeads: 4, NumKeyValueHeads: 2, HeadDim: 8, RMSNormEps: 1e-6,
		RopeTheta: 10000, MaxPositionEmbeddings: 1024, HiddenAct: "silu", TieWordEmbeddings: true}
	be := &kvBackend{Backend: cpu.New(2)}
	m, err := qwen3.New(cfg, &model.SyntheticWeights{Be: be, Seed: 3, Std: 0.35}, be, model.Options{KVBlocks: blocks, MaxBatchTokens: 96})
	if err != nil {
		t.Fatal(err)
	}
	return ownerModel{m, be.kv}
}

// TestPrefixPersistRestart: blocks computed before a restart are read from
// the store after it: the same conversation reports cached tokens and its
// greedy output is unchanged.
func TestPrefixPersistRestart(t *testing.T) {
	dir := t.TempDir()
	fp := []byte("synthetic-3")
	conv := prompt(200, 6)
	for restart := 0; restart < 3; restart++ {
		st, err := store.Open(dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		m := persistModel(t, 12)
		ps, err := st.Prefix(fp, m.kv.(backend.KVBlockCopier).BlockBytes(), 0)
		if err != nil {
			t.Fatal(err)
		}
		s := New(m, Config{MaxLanes: 2, PrefixSeed: fp, PrefixDisk: ps})
		got, stats := run(t, s, req(conv, 12))
		// A second request in the same process hits memory, not disk.
		again, stats2 := run(t, s, req(conv, 12))
		s.Close()
		ps.Close()
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
		if want := solo(t, testModel(t, 8), conv, 12); !equal(got, want) || !equal(again, want) {
			t.Fatalf("restart %d: got %v and %v, alone %v", restart, got, again, want)
		}
		wantCached := 0
		if restart > 0 {
			wantCached = 192 // 3 full blocks of the 200-token prompt
		}
		if stats.CachedTokens != wantCached || stats2.CachedTokens != 192 {
			t.Fatalf("restart %d: cached %d then %d, want %d then 192", restart, stats.CachedTokens, stats2.CachedTokens, wantCached)
		}
		if pst := ps.Stats(); restart == 0 && pst.Saved < 3 || restart > 0 && pst.Loaded != 3 {
			t.Fatalf("restart %d: store stats %+v", restart, pst)
		}
	}
	// Another model fingerprint never reads these blocks.
	st, err := store.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	m := persistModel(t, 12)
	ps, err := st.Prefix([]byte("another model"), m.kv.(backend.KVBlockCopier).BlockBytes(), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer ps.Close()
	s := New(m, Config{MaxLanes: 2, PrefixSeed: []byte("another model"), PrefixDisk: ps})
	defer s.Close()
	if _, stats := run(t, s, req(conv, 12)); stats.CachedTokens != 0 {
		t.Fatalf("another fingerprint reused %d tokens", stats.CachedTokens)
	}
}

// TestAgentReplay replays a 20-turn agent conversation (a long system
// prompt, then per turn the model's answer and a tool result appended): at
// least 80% of all prompt tokens come from the cache, in one process and
// with a restart (new model, new scheduler, store reopened) before every
// turn; outputs equal decoding alone and are the same in both runs.
func TestAgentReplay(t *testing.T) {
	ref := testModel(t, 24)
	var wants [][]int32 // per turn, the expected output (the same in both runs)
	for _, restartEachTurn := range []bool{false, true} {
		dir := t.TempDir()
		fp := []byte("synthetic-3")
		var st *store.Store
		var ps *store.PrefixStore
		var s *Scheduler
		open := func() {
			var err error
			if st, err = store.Open(dir, nil); err != nil {
				t.Fatal(err)
			}
			m := persistModel(t, 24)
			if ps, err = st.Prefix(fp, m.kv.(backend.KVBlockCopier).BlockBytes(), 0); err != nil {
				t.Fatal(err)
			}
			s = New(m, Config{MaxLanes: 2, PrefillChunk: 64, PrefixSeed: fp, PrefixDisk: ps})
		}
		closeAll := func() {
			s.Shutdown()
			ps.Close()
			if err := st.Close(); err != nil {
				t.Fatal(err)
			}
		}
		open()
		conv := prompt(250, 30)
		var promptTotal, cachedTotal int
		for turn := 0; turn < 20; turn++ {
			if restartEachTurn && turn > 0 {
				closeAll()
				open()
			}
			got, stats := run(t, s, req(conv, 6))
			if turn == len(wants) {
				// First run: every fifth turn against decoding alone (the
				// costly part); the second run must repeat the first.
				want := got
				if turn%5 == 0 || turn == 19 {
					want = solo(t, ref, conv, 6)
				}
				wants = append(wants, want)
			}
			if want := wants[turn]; !equal(got, want) {
				t.Fatalf("restarts=%v turn %d: got %v, alone %v", restartEachTurn, turn, got, want)
			}
			promptTotal += stats.PromptTokens
			cachedTotal += stats.CachedTokens
			conv = append(append(conv, got...), prompt(29, 40+turn)...) // tool result
		}
		closeAll()
		if ratio := float64(cachedTotal) / float64(promptTotal); ratio < 0.8 {
			t.Fatalf("restarts=%v: %.1f%% of %d prompt tokens from cache, want ≥ 80%%", restartEachTurn, 100*ratio, promptTotal)
		} else {
			t.Logf("restarts=%v: %.1f%% of %d prompt tokens from cache", restartEachTurn, 100*ratio, promptTotal)
		}
	}
}

// TestHostPool: blocks evicted from a small device pool go to the host pool
// and come back on a later hit, with unchanged output.
func TestHostPool(t *testing.T) {
	m := persistModel(t, 6)
	host := prefix.NewHostPool(1 << 20)
	s := New(m, Config{MaxLanes: 1, PrefixHost: host})
	defer s.Shutdown()
	a := prompt(200, 50)
	want := solo(t, testModel(t, 8), a, 8)
	if got, _ := run(t, s, req(a, 8)); !equal(got, want) {
		t.Fatalf("first: %v, alone %v", got, want)
	}
	// Other prompts need the whole device pool: A's blocks are evicted.
	for i := 0; i < 3; i++ {
		run(t, s, req(prompt(300, 60+i), 4))
	}
	if st := host.Stats(); st.Saved == 0 {
		t.Fatalf("nothing evicted to the host pool: %+v", st)
	}
	got, st := run(t, s, req(a, 8))
	if !equal(got, want) || st.CachedTokens != 192 {
		t.Fatalf("after eviction: %v with %d cached, want %v with 192", got, st.CachedTokens, want)
	}
	if hs := host.Stats(); hs.Loaded < 3 {
		t.Fatalf("host pool served %d blocks, want 3", hs.Loaded)
	}
	if c := s.Counters(); c.KVUsed != 0 {
		t.Fatalf("KV leaked: %+v", c)
	}
}
