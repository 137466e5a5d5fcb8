package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/infernix/infernix/engine"
	"github.com/infernix/infernix/server"
	"github.com/infernix/infernix/server/testmodel"
	"github.com/infernix/infernix/store"
)

// hybridModelDir is the tiny Qwen3.5 hybrid test model (no tokenizer of its
// own) with a byte-level tokenizer of its 457 ids (256 bytes, fillers, and
// <|endoftext|> = 456, its eos) so that the server can load it, and its
// context stretched to 1024 positions.
func hybridModelDir(t *testing.T) string {
	t.Helper()
	root, err := testmodel.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(root, "tests", "testdata", "models", "qwen35-tiny")
	dst := t.TempDir()
	for _, f := range []string{"generation_config.json", "model.safetensors"} {
		if err := os.Symlink(filepath.Join(src, f), filepath.Join(dst, f)); err != nil {
			t.Fatal(err)
		}
	}
	var cfg map[string]any
	raw, err := os.ReadFile(filepath.Join(src, "config.json"))
	if err == nil {
		err = json.Unmarshal(raw, &cfg)
	}
	if err != nil {
		t.Fatal(err)
	}
	cfg["max_position_embeddings"] = 1024
	vocab := map[string]int{}
	for b, r := range byteLevelRunes() {
		vocab[string(r)] = b
	}
	for id := 256; id < 456; id++ {
		vocab[fmt.Sprintf("<x%d>", id)] = id
	}
	tok := map[string]any{
		"version":       "1.0",
		"added_tokens":  []any{map[string]any{"id": 456, "content": "<|endoftext|>", "special": true}},
		"normalizer":    nil,
		"pre_tokenizer": map[string]any{"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},
		"decoder":       map[string]any{"type": "ByteLevel"},
		"model":         map[string]any{"type": "BPE", "vocab": vocab, "merges": []any{}},
	}
	for name, v := range map[string]any{"config.json": cfg, "tokenizer.json": tok} {
		data, _ := json.Marshal(v)
		if err := os.WriteFile(filepath.Join(dst, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// byteLevelRunes is GPT-2's byte-to-rune table of byte-level tokenizers.
func byteLevelRunes() [256]rune {
	var out [256]rune
	n := 0
	for b := 0; b < 256; b++ {
		if b >= '!' && b <= '~' || b >= 0xA1 && b <= 0xAC || b >= 0xAE {
			out[b] = rune(b)
		} else {
			out[b] = rune(256 + n)
			n++
		}
	}
	return out
}

// dataDir is the engine's Persister over a Badger store with a byte cap.
type dataDir struct {
	st       *store.Store
	capBytes int64
}

func (d dataDir) OpenPrefix(fp []byte, blockBytes int) (engine.PrefixTier, error) {
	return d.st.Prefix(fp, blockBytes, d.capBytes)
}
func (d dataDir) Close() error { return d.st.Close() }

// TestPrefixCacheMetrics: /metrics (text and JSON) reports the prefix
// cache's snapshot and disk counters of a real server over a hybrid model
// with a data directory (saved as soon as made, a 96 KiB cap): a repeated
// prompt resumes from a snapshot, a conversation's third turn releases the
// turn boundary it passed, blocks and snapshots reach the disk, and the
// cap evicts some.
func TestPrefixCacheMetrics(t *testing.T) {
	dir := hybridModelDir(t)
	st, err := store.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	const capBytes = 96 << 10
	eo := engine.Options{Device: testDevice(), ContextLength: 1024, MaxBatchTokens: 96, Persist: dataDir{st, capBytes}}
	eo.Sched.MaxLanes = 1
	e, err := engine.Load(dir, eo)
	if err != nil {
		t.Fatal(err)
	}
	ts := serveEngine(t, e, server.Config{})
	defer ts.close()

	tokens := func(n, salt int) []int {
		p := make([]int, n)
		for i := range p {
			p[i] = (i*31 + salt*17 + 5) % 456
		}
		return p
	}
	complete := func(prompt []int) ([]int, int64) {
		t.Helper()
		code, _, r := post(t, ts.URL+"/v1/completions", map[string]any{"prompt": prompt, "max_tokens": 4, "temperature": 0})
		if code != 200 {
			t.Fatalf("completion: %d %s", code, r.Raw)
		}
		ids := e.Tokenizer.Encode(r.Get("choices.0.text").Str)
		out := make([]int, len(ids))
		for i, id := range ids {
			out[i] = int(id)
		}
		return out, r.Get("usage.prompt_tokens_details.cached_tokens").Int()
	}
	// A 150-token prompt: its turn boundary is block 2 (128 tokens).
	turn1 := tokens(150, 1)
	gen, cached := complete(turn1)
	if cached != 0 {
		t.Fatalf("first request: %d cached tokens", cached)
	}
	if _, cached = complete(turn1); cached != 128 {
		t.Fatalf("repeat: %d cached tokens, want 128", cached)
	}
	// The conversation goes on: turn 2 resumes at block 2 and ends at 4;
	// turn 3 resumes at 4 and releases the boundary at 2 that it passed.
	turn2 := append(append(append([]int(nil), turn1...), gen...), tokens(120, 2)...)
	gen2, _ := complete(turn2)
	turn3 := append(append(append([]int(nil), turn2...), gen2...), tokens(20, 3)...)
	if _, cached = complete(turn3); cached < 256 {
		t.Fatalf("turn 3: %d cached tokens, want ≥ 256", cached)
	}

	// The writer works in the background: wait for what was saved.
	waitFor := func(name string, ok func(float64) bool) float64 {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			v := metric(t, ts, name)
			if ok(v) {
				return v
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s = %v", name, v)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitFor("infernix_prefix_cache_disk_saved_total", func(v float64) bool { return v >= 6 })
	waitFor("infernix_prefix_cache_disk_evicted_total", func(v float64) bool { return v > 0 })

	_, text := get(t, ts.URL+"/metrics")
	_, js := get(t, ts.URL+"/metrics?format=json")
	m := gjson.ParseBytes(js)
	checks := []struct {
		name string
		ok   func(float64) bool
		want string
	}{
		{"infernix_prefix_cache_snapshots", func(v float64) bool { return v == 1 }, "1 (turn 3's boundary at 4)"},
		{"infernix_prefix_cache_snapshot_bytes", func(v float64) bool { return v > 0 }, "> 0"},
		{"infernix_prefix_cache_snapshots_taken_total", func(v float64) bool { return v == 2 }, "2 (at 2 and 4)"},
		{"infernix_prefix_cache_snapshot_hits_total", func(v float64) bool { return v == 3 }, "3 (repeat, turns 2 and 3)"},
		{"infernix_prefix_cache_snapshots_released_total", func(v float64) bool { return v == 1 }, "1 (the boundary at 2)"},
		{"infernix_prefix_cache_snapshots_evicted_total", func(v float64) bool { return v == 0 }, "0"},
		{"infernix_prefix_cache_disk_saved_total", func(v float64) bool { return v >= 6 }, "≥ 6 (4 blocks, 2 snapshots)"},
		{"infernix_prefix_cache_disk_evicted_total", func(v float64) bool { return v > 0 }, "> 0 (over the cap)"},
		{"infernix_prefix_cache_disk_dropped_total", func(v float64) bool { return v == 0 }, "0"},
		{"infernix_prefix_cache_disk_loaded_total", func(v float64) bool { return v == 0 }, "0 (all hits from memory)"},
		{"infernix_prefix_cache_disk_bytes", func(v float64) bool { return v > 0 && v <= capBytes }, "within the cap"},
		{"infernix_prefix_cache_disk_blocks", func(v float64) bool { return v > 0 }, "> 0"},
		{"infernix_prefix_cache_blocks", func(v float64) bool { return v >= 4 }, "≥ 4"},
	}
	for _, c := range checks {
		r := m.Get(c.name)
		if !r.Exists() || !c.ok(r.Float()) {
			t.Errorf("JSON %s = %s, want %s", c.name, r.Raw, c.want)
		}
		// The text form carries the same value (the writer may have moved
		// the disk figures on between the two reads: compare the others).
		var line string
		for _, l := range strings.Split(string(text), "\n") {
			if strings.HasPrefix(l, c.name+" ") {
				line = l
			}
		}
		if line == "" {
			t.Errorf("text form lacks %s", c.name)
		} else if !strings.Contains(c.name, "_disk_") && line != c.name+" "+r.Raw {
			t.Errorf("text %q, JSON %s", line, r.Raw)
		}
	}
	for _, typ := range []string{"# TYPE infernix_prefix_cache_snapshots gauge", "# TYPE infernix_prefix_cache_disk_saved_total counter"} {
		if !strings.Contains(string(text), typ) {
			t.Errorf("text form lacks %q", typ)
		}
	}
}
