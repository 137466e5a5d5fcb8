package engine

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/infernix/infernix/engine/backend"
	"github.com/infernix/infernix/engine/sample"
	"github.com/infernix/infernix/engine/sched"
	"github.com/infernix/infernix/store"
)

// storeDir is the Persister cmd/infernix builds over the Badger store; the
// test keeps its own copy so that the engine package never imports store.
type storeDir struct{ st *store.Store }

func (d storeDir) OpenPrefix(fp []byte, blockBytes int) (PrefixTier, error) {
	return d.st.Prefix(fp, blockBytes, 64<<20)
}
func (d storeDir) Close() error { return d.st.Close() }

func openDir(t *testing.T, dir string) Persister {
	t.Helper()
	st, err := store.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	return storeDir{st}
}

// TestPersisterLifecycle: the engine owns the data directory it is given and
// closes it; --no-prefix-reuse keeps it open without a prefix tier.
func TestPersisterLifecycle(t *testing.T) {
	model := filepath.Join(testdata, "models", "qwen3-tied-f32")
	dir := t.TempDir()
	e, err := Load(model, Options{Persist: openDir(t, dir), ContextLength: 256})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Open(dir, nil); !errors.Is(err, store.ErrInUse) {
		t.Fatalf("second open of the same data directory: %v", err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := Load(model, Options{Persist: openDir(t, dir), ContextLength: 256, NoPrefixReuse: true})
	if err != nil {
		t.Fatalf("after close: %v", err)
	}
	if f.Persist == nil || f.PrefixTier != nil {
		t.Fatal("--no-prefix-reuse: the directory stays open, without a prefix tier")
	}
	f.Close()
}

// TestFingerprint: the same checkpoint gives the same fingerprint; another
// checkpoint or synthetic weights give another.
func TestFingerprint(t *testing.T) {
	load := func(name string, o Options) []byte {
		e, err := Load(filepath.Join(testdata, "models", name), o)
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		return e.ck.fingerprint()
	}
	a := load("qwen3-tied-f32", Options{ContextLength: 256})
	cases := []struct {
		name string
		fp   []byte
		same bool
	}{
		{"same checkpoint", load("qwen3-tied-f32", Options{ContextLength: 256}), true},
		{"synthetic weights", load("qwen3-tied-f32", Options{ContextLength: 256, SyntheticWeights: true}), false},
		{"another model", load("demo", Options{ContextLength: 256}), false},
	}
	for _, c := range cases {
		if bytes.Equal(a, c.fp) != c.same {
			t.Errorf("%s: equal = %v", c.name, !c.same)
		}
	}
}

// TestPrefixAcrossRestarts: with --data-dir, a prompt computed before a
// restart of the engine is served from the stored prefix cache after it,
// with the same greedy output. It needs the architecture to expose its KV
// pool (backend.KVCacheOwner) and is skipped until it does.
func TestPrefixAcrossRestarts(t *testing.T) {
	model := filepath.Join(testdata, "models", "qwen3-tied-f32")
	dir := t.TempDir()
	p := make([]int32, 150)
	for i := range p {
		p[i] = int32(3 + i%40)
	}
	var outs [][]int32
	var cached []int
	for restart := 0; restart < 2; restart++ {
		e, err := Load(model, Options{Device: os.Getenv("INFERNIX_TEST_DEVICE"), Persist: openDir(t, dir), ContextLength: 256})
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := e.Model.(backend.KVCacheOwner); !ok {
			e.Close()
			t.Skip("the architecture does not implement backend.KVCacheOwner yet")
		}
		if e.PrefixTier == nil {
			e.Close()
			t.Fatal("no prefix store although the model exposes its KV pool")
		}
		ch, err := e.Sched.Submit(context.Background(), &sched.Request{Prompt: p, MaxTokens: 5,
			Sampling: sample.Params{TopP: 1, RepetitionPenalty: 1}, Logprobs: -1, ThinkBudget: -1, ThinkOpen: -1, ThinkClose: -1})
		if err != nil {
			t.Fatal(err)
		}
		var toks []int32
		for ev := range ch {
			if ev.Done {
				if ev.Err != nil {
					t.Fatal(ev.Err)
				}
				cached = append(cached, ev.Stats.CachedTokens)
				break
			}
			toks = append(toks, ev.Token)
		}
		outs = append(outs, toks)
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if cached[0] != 0 || cached[1] != 128 {
		t.Fatalf("cached tokens %v, want [0 128]", cached)
	}
	if !slices.Equal(outs[0], outs[1]) {
		t.Fatalf("outputs differ after the restart: %v vs %v", outs[0], outs[1])
	}
}

type formattedKV struct {
	backend.KVBlockCopier
	format string
}

func (f formattedKV) BlockFormat() string { return f.format }

// TestFormatSeed: caches that name their block encoding get seeds that
// differ by encoding (so persisted blocks never cross encodings); caches
// that name none keep the model's seed; the model's seed is not modified.
func TestFormatSeed(t *testing.T) {
	seed := []byte("model fingerprint")
	if got := formatSeed(seed, nil); string(got) != string(seed) {
		t.Fatalf("no formatter: %q", got)
	}
	a := formatSeed(seed, formattedKV{format: "cuda-kv1-bf16"})
	b := formatSeed(seed, formattedKV{format: "cuda-kv1-f16"})
	if string(a) == string(b) || string(a) == string(seed) {
		t.Fatalf("seeds do not separate the encodings: %q %q", a, b)
	}
	if string(seed) != "model fingerprint" {
		t.Fatalf("the model's seed was modified: %q", seed)
	}
}
