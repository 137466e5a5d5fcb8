package sched

import (
	"context"
	"testing"
)

func run(t *testing.T, s *Scheduler, r *Request) ([]int32, Stats) {
	t.Helper()
	got, fin := collect(t, mustSubmit(t, s, r))
	if fin.Err != nil {
		t.Fatalf("finish %q: %v", fin.Finish, fin.Err)
	}
	return got, fin.Stats
}

// TestPrefixReuseMatchesNoCache: an agent conversation that grows every turn
// (history + the model's answer + a new message) reuses the previous turns'
// blocks, and every turn's greedy output equals that of a scheduler without
// the cache.
func TestPrefixReuseMatchesNoCache(t *testing.T) {
	cached := New(testModel(t, 40), Config{MaxLanes: 2, PrefillChunk: 48})
	defer cached.Close()
	plain := New(testModel(t, 40), Config{MaxLanes: 2, PrefillChunk: 48, NoPrefixReuse: true})
	defer plain.Close()
	conv := prompt(150, 1)
	prevFull := 0 // full blocks of the previous turn's prompt + answer
	for turn := 0; turn < 5; turn++ {
		got, st := run(t, cached, req(conv, 16))
		want, pst := run(t, plain, req(conv, 16))
		if !equal(got, want) {
			t.Fatalf("turn %d: with cache %v, without %v", turn, got, want)
		}
		if pst.CachedTokens != 0 {
			t.Fatalf("turn %d: NoPrefixReuse reported %d cached tokens", turn, pst.CachedTokens)
		}
		// Everything computed before (prompt + answer except the last
		// sampled token, which was never fed) is cached in whole blocks.
		if wantCached := min(prevFull, (len(conv)-1)/64) * 64; st.CachedTokens != wantCached {
			t.Fatalf("turn %d: %d cached tokens, want %d", turn, st.CachedTokens, wantCached)
		}
		if turn > 0 && st.CachedTokens == 0 {
			t.Fatalf("turn %d: no reuse", turn)
		}
		prevFull = (len(conv) + len(got) - 1) / 64
		conv = append(append(conv, got...), prompt(23+turn*11, turn+5)...)
	}
	c := cached.Counters()
	if c.PrefixQueries != 5 || c.PrefixHits != 4 || c.PrefixHitTokens == 0 || c.KVUsed != 0 || c.KVCached == 0 {
		t.Fatalf("counters %+v", c)
	}
	if pc := plain.Counters(); pc.PrefixQueries != 0 || pc.KVCached != 0 {
		t.Fatalf("NoPrefixReuse counters %+v", pc)
	}
}

// TestPrefixCases: block alignment, salts and prompt scoring.
func TestPrefixCases(t *testing.T) {
	base := prompt(128, 7)
	cases := []struct {
		name       string
		first, sec *Request
		wantCached int
	}{
		{"aligned prompt computes its last token", req(base, 4), req(base, 4), 64},
		{"longer prompt reuses both blocks", req(base, 4), req(append(append([]int32(nil), base...), 5), 4), 128},
		{"shorter than a block", req(base[:40], 4), req(base[:40], 4), 0},
		{"different first token", req(base, 4), req(append([]int32{3}, base[1:]...), 4), 0},
		{"other salt", req(base, 4), salted(req(base, 4), "tenant-b"), 0},
		{"same salt", salted(req(base, 4), "a"), salted(req(base, 4), "a"), 64},
		{"prompt scoring computes everything", req(base, 4), scoring(req(base, 4)), 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := New(testModel(t, 16), Config{MaxLanes: 2})
			defer s.Close()
			run(t, s, tc.first)
			got, st := run(t, s, tc.sec)
			if st.CachedTokens != tc.wantCached {
				t.Fatalf("%d cached tokens, want %d", st.CachedTokens, tc.wantCached)
			}
			if want := solo(t, testModel(t, 8), tc.sec.Prompt, 4); !equal(got, want) {
				t.Fatalf("got %v, alone %v", got, want)
			}
		})
	}
}

func salted(r *Request, salt string) *Request { r.CacheSalt = salt; return r }

func scoring(r *Request) *Request { r.PromptLogprobs = true; return r }

// TestPrefixUnderPressure: a pool too small for all the cached blocks and the
// running lanes together: idle cached blocks are evicted before any lane is
// preempted, blocks in use are never evicted (outputs stay those of decoding
// alone), and nothing leaks.
func TestPrefixUnderPressure(t *testing.T) {
	s := New(testModel(t, 7), Config{MaxLanes: 3, PrefillChunk: 64})
	defer s.Close()
	shared := prompt(130, 3)
	type job struct {
		p  []int32
		ch <-chan Event
	}
	var jobs []job
	for round := 0; round < 3; round++ {
		jobs = jobs[:0]
		for i := 0; i < 4; i++ {
			// Half share a 2-block prefix, half are unrelated.
			p := prompt(70+i*9, 20+round*4+i)
			if i%2 == 0 {
				p = append(append([]int32(nil), shared...), p[:10+i]...)
			}
			ch, err := s.Submit(context.Background(), req(p, 20))
			if err != nil {
				t.Fatal(err)
			}
			jobs = append(jobs, job{p, ch})
		}
		for i, j := range jobs {
			got, fin := collect(t, j.ch)
			if fin.Err != nil {
				t.Fatalf("round %d request %d: %v", round, i, fin.Err)
			}
			if want := solo(t, testModel(t, 8), j.p, 20); !equal(got, want) {
				t.Fatalf("round %d request %d: got %v, alone %v", round, i, got, want)
			}
		}
	}
	c := s.Counters()
	if c.KVUsed != 0 {
		t.Fatalf("KV blocks leaked: %+v", c)
	}
	if c.PrefixHits == 0 {
		t.Fatalf("no prefix hits under pressure: %+v", c)
	}
	if st := s.pc.Stats(); st.Evictions == 0 || st.Idle != st.Blocks {
		t.Fatalf("expected evictions and only idle blocks at the end: %+v", st)
	}
}

// TestPrefixConcurrentSamePrompt: lanes computing the same prompt at once
// each keep a private copy (the index keeps the first); a later request
// reuses it.
func TestPrefixConcurrentSamePrompt(t *testing.T) {
	s := New(testModel(t, 24), Config{MaxLanes: 3, PrefillChunk: 32})
	defer s.Close()
	p := prompt(200, 11)
	want := solo(t, testModel(t, 8), p, 10)
	var chans []<-chan Event
	for i := 0; i < 3; i++ {
		chans = append(chans, mustSubmit(t, s, req(p, 10)))
	}
	for i, ch := range chans {
		got, fin := collect(t, ch)
		if fin.Err != nil || !equal(got, want) {
			t.Fatalf("lane %d: %v %v, want %v", i, got, fin.Err, want)
		}
	}
	got, st := run(t, s, req(p, 10))
	if !equal(got, want) || st.CachedTokens != 192 {
		t.Fatalf("after: %v with %d cached, want %v with 192", got, st.CachedTokens, want)
	}
	if c := s.Counters(); c.KVUsed != 0 {
		t.Fatalf("KV blocks leaked: %+v", c)
	}
}
