package sched

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/infernix/infernix/engine/arch/qwen3next"
	"github.com/infernix/infernix/engine/backend"
	"github.com/infernix/infernix/engine/backend/cpu"
	"github.com/infernix/infernix/engine/model"
	"github.com/infernix/infernix/engine/prefix"
	"github.com/infernix/infernix/engine/safetensors"
	"github.com/infernix/infernix/store"
)

// tinyHybrid loads one of the hybrid test models with blocks KV blocks and
// its context stretched to maxPos (the tests compare it only with itself).
func tinyHybrid(t *testing.T, name string, blocks, maxPos int) model.Model {
	t.Helper()
	dir := filepath.Join("..", "..", "tests", "testdata", "models", name)
	cfg, err := model.LoadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Text().MaxPositionEmbeddings = maxPos
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

// chainSnapshots lists the snapshots held on the chain of toks's full
// blocks, as "depth" plus kind letters (S shared, T turn, I interval), e.g.
// "3S 4TI". It reads the store on the loop goroutine.
func chainSnapshots(t *testing.T, s *Scheduler, toks []int32) string {
	t.Helper()
	var out []string
	err := s.Run(func() {
		key := prefix.Seed(s.cfg.PrefixSeed, nil)
		for d := 1; d*prefix.BlockSize <= len(toks); d++ {
			key = prefix.BlockKey(key, toks[(d-1)*prefix.BlockSize:d*prefix.BlockSize])
			e := s.snaps.byKey[key]
			if e == nil {
				continue
			}
			w := fmt.Sprint(d)
			for _, k := range []struct {
				bit    snapKind
				letter string
			}{{snapShared, "S"}, {snapTurn, "T"}, {snapInterval, "I"}} {
				if e.kind&k.bit != 0 {
					w += k.letter
				}
			}
			out = append(out, w)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(out, " ")
}

func hybridTokens(n, salt int, vocab int32) []int32 {
	p := make([]int32, n)
	for i := range p {
		p[i] = int32(i*31+salt*17+5) % vocab
	}
	return p
}

func cat(parts ...[]int32) []int32 {
	var out []int32
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// TestSnapshotRules walks the snapshot rules (snapshots.go) step by step on
// a hybrid model with a snapshot every 2 blocks: conversations A, B and C
// share a 200-token system prompt (3 full blocks) and differ from token 200.
// After each request it checks the tokens reused and which snapshots the
// request's chain holds: interval (I) and turn-boundary (T) snapshots that a
// conversation passed are released when it resumes deeper; the branch point
// after the system prompt becomes shared (S) as soon as a second
// conversation diverges there, and stays; every step's output equals
// computing the prompt in full. The same on each tiny hybrid model.
func TestSnapshotRules(t *testing.T) {
	for _, name := range []string{"qwen35-tiny", "qwen3next-tiny", "qwen35moe-tiny"} {
		t.Run(name, func(t *testing.T) { snapshotRules(t, name) })
	}
}

func snapshotRules(t *testing.T, name string) {
	V := int32(tinyHybrid(t, name, 8, 1024).Config().VocabSize)
	s := New(tinyHybrid(t, name, 64, 1024), Config{MaxLanes: 1, PrefillChunk: 128, SnapshotInterval: 2})
	defer s.Shutdown()
	full := New(tinyHybrid(t, name, 64, 1024), Config{MaxLanes: 1, PrefillChunk: 128, NoPrefixReuse: true})
	defer full.Shutdown()
	sys := hybridTokens(200, 1, V)
	convs := map[string][]int32{
		"A": cat(sys, hybridTokens(80, 2, V)), // 280 tokens: last full block 4
		"B": cat(sys, hybridTokens(80, 3, V)),
		"C": cat(sys, hybridTokens(80, 4, V)),
	}
	steps := []struct {
		conv   string
		tool   int // tokens appended after the previous answer (0: first turn)
		cached int
		chain  string // snapshots on the request's chain afterwards
		total  int    // snapshots held in all
	}{
		// Computed in full: an interval snapshot at 2, the turn boundary at 4.
		{"A", 0, 0, "2I 4TI", 2},
		// Resumes from A's snapshot at 2; its lookup stopped at block 3, a
		// branch (A continues from there), so a shared snapshot is taken at 3.
		{"B", 0, 128, "2I 3S 4TI", 4},
		// A's next turn resumes from its turn boundary at 4 and releases the
		// interval snapshot at 2 that it passed; the shared one stays.
		{"A", 29, 256, "3S 4TI", 3},
		// A third conversation resumes from the shared snapshot.
		{"C", 0, 192, "3S 4TI", 4},
		// A long tool result: interval snapshots at 6, the turn boundary at 8.
		{"A", 200, 256, "3S 4TI 6I 8TI", 6},
		// The next turn resumes at 8: 4 and 6 are behind it and released.
		{"A", 29, 512, "3S 8TI", 4},
		// B continues: it resumes from its turn boundary and releases nothing
		// (the shared snapshot is its only one above).
		{"B", 29, 256, "3S 4TI", 4},
	}
	for i, st := range steps {
		p := convs[st.conv]
		if st.tool > 0 {
			p = cat(p, hybridTokens(st.tool, 10+i, V))
		}
		got, stats := run(t, s, req(p, 6))
		want, _ := run(t, full, req(p, 6))
		if !equal(got, want) {
			t.Fatalf("step %d (%s): with the cache %v, in full %v", i, st.conv, got, want)
		}
		if stats.CachedTokens != st.cached {
			t.Errorf("step %d (%s): %d cached tokens, want %d", i, st.conv, stats.CachedTokens, st.cached)
		}
		if chain := chainSnapshots(t, s, p); chain != st.chain {
			t.Errorf("step %d (%s): chain snapshots %q, want %q", i, st.conv, chain, st.chain)
		}
		if n := s.SnapshotStats().Snapshots; n != st.total {
			t.Errorf("step %d (%s): %d snapshots held, want %d", i, st.conv, n, st.total)
		}
		convs[st.conv] = cat(p, got)
	}
	ss := s.SnapshotStats()
	if ss.Taken != 7 || ss.Released != 3 || ss.Evictions != 0 || ss.Hits != 6 || int(ss.Taken-ss.Released) != ss.Snapshots {
		t.Errorf("stats %+v, want 7 taken, 3 released, none evicted, 6 hits", ss)
	}
}

// TestSnapshotReplayBounded replays three 20-turn agent conversations that
// share a system prompt, interleaved, on the tiny Qwen3.5 hybrid model with a
// snapshot every 2 blocks: outputs equal computing the prompt in full (a
// quarter of the turns checked, and the last), at least 80% of the prompt
// tokens come from the cache, and the snapshots held stay bounded by release,
// not by the memory bound (nothing is evicted): after every round at most
// 1 shared + 2 per conversation (its last two turn boundaries) = 7, while 35
// are taken over the replay (without release all would be held).
func TestSnapshotReplayBounded(t *testing.T) {
	const name = "qwen35-tiny"
	V := int32(tinyHybrid(t, name, 8, 1024).Config().VocabSize)
	s := New(tinyHybrid(t, name, 96, 1024), Config{MaxLanes: 2, PrefillChunk: 128, SnapshotInterval: 2})
	defer s.Shutdown()
	full := New(tinyHybrid(t, name, 24, 1024), Config{MaxLanes: 1, PrefillChunk: 128, NoPrefixReuse: true})
	defer full.Shutdown()
	sys := hybridTokens(200, 1, V)
	convs := [][]int32{cat(sys, hybridTokens(80, 2, V)), cat(sys, hybridTokens(80, 3, V)), cat(sys, hybridTokens(80, 4, V))}
	const bound = 1 + 2*3
	var promptTotal, cachedTotal, most int
	for turn := 0; turn < 20; turn++ {
		for c := range convs {
			got, stats := run(t, s, req(convs[c], 6))
			if turn%4 == c || turn == 19 {
				if want, _ := run(t, full, req(convs[c], 6)); !equal(got, want) {
					t.Fatalf("turn %d, conversation %d: with the cache %v, in full %v", turn, c, got, want)
				}
			}
			promptTotal += stats.PromptTokens
			cachedTotal += stats.CachedTokens
			convs[c] = cat(convs[c], got, hybridTokens(29, 40+turn*3+c, V))
		}
		n := s.SnapshotStats().Snapshots
		most = max(most, n)
		if n > bound {
			t.Fatalf("after turn %d: %d snapshots held, want ≤ %d", turn, n, bound)
		}
	}
	ratio := float64(cachedTotal) / float64(promptTotal)
	if ratio < 0.8 {
		t.Fatalf("%.1f%% of %d prompt tokens from cache, want ≥ 80%%", 100*ratio, promptTotal)
	}
	ss := s.SnapshotStats()
	if ss.Evictions != 0 || ss.Taken < 4*bound || int(ss.Taken-ss.Released) != ss.Snapshots {
		t.Fatalf("snapshot stats %+v: want none evicted, ≥ %d taken, all released but those held", ss, 4*bound)
	}
	t.Logf("%.1f%% of %d prompt tokens from cache; %d snapshots taken, %d released, at most %d held", 100*ratio, promptTotal, ss.Taken, ss.Released, most)
}

// TestHybridReplayRestarts replays a 20-turn agent conversation on the tiny
// Qwen3.5 hybrid model with a restart (new model, scheduler and store
// handle) before every turn, so that every turn resumes from KV blocks and a
// state snapshot read back from the data directory: at least 80% of the
// prompt tokens come from the cache and outputs equal computing the prompt in
// full (a quarter of the turns checked, and the last).
func TestHybridReplayRestarts(t *testing.T) {
	const name = "qwen35-tiny"
	V := int32(tinyHybrid(t, name, 8, 1024).Config().VocabSize)
	full := New(tinyHybrid(t, name, 24, 1024), Config{MaxLanes: 1, PrefillChunk: 128, NoPrefixReuse: true})
	defer full.Shutdown()
	dir := t.TempDir()
	fp := []byte("qwen35-tiny")
	conv := cat(hybridTokens(200, 1, V), hybridTokens(50, 2, V))
	var promptTotal, cachedTotal int
	for turn := 0; turn < 20; turn++ {
		st, err := store.Open(dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		m := tinyHybrid(t, name, 24, 1024)
		kc := m.(backend.KVCacheOwner).KVCache().(backend.KVBlockCopier)
		ps, err := st.Prefix(fp, kc.BlockBytes(), 0)
		if err != nil {
			t.Fatal(err)
		}
		s := New(m, Config{MaxLanes: 1, PrefillChunk: 128, SnapshotInterval: 2, PrefixSeed: fp, PrefixDisk: ps, SnapshotDisk: ps, SaveInterval: time.Hour})
		got, stats := run(t, s, req(conv, 6))
		s.Shutdown() // saves what the turn made
		ps.Close()
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
		if turn%4 == 0 || turn == 19 {
			if want, _ := run(t, full, req(conv, 6)); !equal(got, want) {
				t.Fatalf("turn %d: after a restart %v, in full %v", turn, got, want)
			}
		}
		if turn > 0 && stats.CachedTokens == 0 {
			t.Fatalf("turn %d: nothing reused after the restart", turn)
		}
		promptTotal += stats.PromptTokens
		cachedTotal += stats.CachedTokens
		conv = cat(conv, got, hybridTokens(29, 40+turn, V))
	}
	ratio := float64(cachedTotal) / float64(promptTotal)
	if ratio < 0.8 {
		t.Fatalf("%.1f%% of %d prompt tokens from cache, want ≥ 80%%", 100*ratio, promptTotal)
	}
	t.Logf("%.1f%% of %d prompt tokens from cache with a restart before every turn", 100*ratio, promptTotal)
}

// TestSharedPrefixSnapshot: with Request.SharedPrefix (the server's
// system/tools block, 200 tokens: block 3) the snapshot at that boundary is
// kept as shared from the FIRST conversation on, survives the release of
// the turn boundaries conversation A passes over three turns, and a second
// conversation B with the same system prompt resumes from it. Without the
// hint A holds only its turn boundaries and B computes in full (then the
// branch-point inference, the fallback, marks block 3 shared). Every output
// equals computing the prompt in full.
func TestSharedPrefixSnapshot(t *testing.T) {
	const name = "qwen35-tiny"
	V := int32(tinyHybrid(t, name, 8, 1024).Config().VocabSize)
	full := New(tinyHybrid(t, name, 64, 1024), Config{MaxLanes: 1, PrefillChunk: 128, NoPrefixReuse: true})
	defer full.Shutdown()
	sys := hybridTokens(200, 1, V)
	cases := []struct {
		name   string
		shared int
		chains []string // A's chain after each of its turns (280, 386, 492 tokens)
		cached []int    // A's cached tokens per turn
		bCache int      // B's cached tokens
	}{
		{"hint", 200, []string{"3S 4T", "3S 4T 6T", "3S 6T 7T"}, []int{0, 256, 384}, 192},
		{"no hint", 0, []string{"4T", "4T 6T", "6T 7T"}, []int{0, 256, 384}, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// The default interval (16 blocks) takes no interval snapshot here.
			s := New(tinyHybrid(t, name, 64, 1024), Config{MaxLanes: 1, PrefillChunk: 128})
			defer s.Shutdown()
			check := func(what string, p []int32, wantCached int, wantChain string) []int32 {
				t.Helper()
				r := req(p, 6)
				r.SharedPrefix = c.shared
				got, stats := run(t, s, r)
				if want, _ := run(t, full, req(p, 6)); !equal(got, want) {
					t.Fatalf("%s: with the cache %v, in full %v", what, got, want)
				}
				if stats.CachedTokens != wantCached {
					t.Errorf("%s: %d cached tokens, want %d", what, stats.CachedTokens, wantCached)
				}
				if chain := chainSnapshots(t, s, p); chain != wantChain {
					t.Errorf("%s: chain snapshots %q, want %q", what, chain, wantChain)
				}
				return got
			}
			a := cat(sys, hybridTokens(80, 2, V))
			for turn, chain := range c.chains {
				got := check(fmt.Sprintf("A turn %d", turn+1), a, c.cached[turn], chain)
				a = cat(a, got, hybridTokens(100, 20+turn, V))
			}
			check("B", cat(sys, hybridTokens(80, 3, V)), c.bCache, "3S 4T")
		})
	}
}
