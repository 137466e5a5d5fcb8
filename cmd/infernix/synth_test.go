package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/infernix/infernix/engine/safetensors"
)

// TestSynthWritesEveryTensorOfTheRealCheckpoint writes random checkpoints of
// committed fixtures' configs (tied and untied, dense and MoE) in 64 KiB shards
// and checks them against the fixtures' own files: the same tensor names and
// shapes, all BF16, an index naming the right shard, and a model the CLI
// loads and runs.
func TestSynthWritesEveryTensorOfTheRealCheckpoint(t *testing.T) {
	for _, name := range []string{"qwen3-tied-f32", "qwen3-untied-bf16", "qwen3moe-bf16"} {
		t.Run(name, func(t *testing.T) {
			src := filepath.Join(testdata, "models", name)
			out := t.TempDir()
			stdout, stderr, code := cli(t, "synth", "--model", src, "--out", out, "--shard-bytes", "65536")
			if code != 0 {
				t.Fatalf("synth exit %d: %s", code, stderr)
			}
			if !strings.Contains(stdout, "shard(s)") {
				t.Fatalf("unexpected output %q", stdout)
			}
			real, err := safetensors.OpenDir(src)
			if err != nil {
				t.Fatal(err)
			}
			defer real.Close()
			syn, err := safetensors.OpenDir(out) // also checks the index against the shards
			if err != nil {
				t.Fatal(err)
			}
			defer syn.Close()
			if got, want := len(syn.Names()), len(real.Names()); got != want {
				t.Errorf("%d tensors, the real checkpoint has %d", got, want)
			}
			for _, n := range real.Names() {
				r, s := real.Get(n), syn.Get(n)
				if s == nil {
					t.Errorf("tensor %s missing", n)
					continue
				}
				if s.DType != "BF16" || len(s.Shape) != len(r.Shape) {
					t.Errorf("%s: %s%v, real %s%v", n, s.DType, s.Shape, r.DType, r.Shape)
					continue
				}
				for i := range r.Shape {
					if r.Shape[i] != s.Shape[i] {
						t.Errorf("%s: shape %v, real %v", n, s.Shape, r.Shape)
						break
					}
				}
			}
			shards, _ := filepath.Glob(filepath.Join(out, "model-*-of-*.safetensors"))
			if want := int(syn.Bytes()/65536) + 1; len(shards) < want/2 || len(shards) < 2 {
				t.Errorf("%d shards for %d bytes in 64 KiB shards", len(shards), syn.Bytes())
			}
			if _, stderr, code := cli(t, "bench", "--model", out, "--device", "cpu", "--prompt-tokens", "8", "--decode-tokens", "2"); code != 0 {
				t.Fatalf("bench on the synthetic checkpoint: exit %d: %s", code, stderr)
			}
		})
	}
}

// TestBenchReportsItsLimit: `bench --json` reports the load time, both
// speeds and the decode roofline from the backend's measured bandwidth.
func TestBenchReportsItsLimit(t *testing.T) {
	stdout, stderr, code := cli(t, "bench", "--model", filepath.Join(testdata, "models", "qwen3-tied-f32"), "--device", "cpu",
		"--prompt-tokens", "8", "--decode-tokens", "2", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var r benchResult
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatalf("%v: %q", err, stdout)
	}
	if r.LoadSeconds <= 0 || r.PrefillTokPerS <= 0 || r.DecodeTokPerS <= 0 {
		t.Errorf("missing figures: %+v", r)
	}
	if r.MemBandwidthGBs <= 0 || r.RooflineTokPerS <= 0 || r.RooflineRatio <= 0 {
		t.Errorf("no roofline: %+v", r)
	}
	if got := r.DecodeTokPerS / r.RooflineTokPerS; got < r.RooflineRatio*0.999 || got > r.RooflineRatio*1.001 {
		t.Errorf("ratio %.4f is not decode/roofline %.4f", r.RooflineRatio, got)
	}
}

// TestBenchRooflineReadsWhatDecodeReads: with an untied embedding table the
// roofline divides the bandwidth by the bytes a decode step reads, not by
// every loaded byte; a run longer than the model's context is refused.
func TestBenchRooflineReadsWhatDecodeReads(t *testing.T) {
	dir := filepath.Join(testdata, "models", "qwen3-untied-bf16") // vocab 1000 × hidden 96, bf16
	stdout, stderr, code := cli(t, "bench", "--model", dir, "--device", "cpu", "--prompt-tokens", "8", "--decode-tokens", "2", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var r benchResult
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatalf("%v: %q", err, stdout)
	}
	if r.DecodeBytes != r.WeightBytes-999*96*2 {
		t.Errorf("%d of %d bytes read a decode step, want all but 999 embedding rows", r.DecodeBytes, r.WeightBytes)
	}
	if want := r.MemBandwidthGBs * 1e9 / float64(r.DecodeBytes); r.RooflineTokPerS < want*0.999 || r.RooflineTokPerS > want*1.001 {
		t.Errorf("roofline %.1f tok/s, want bandwidth / decode bytes = %.1f", r.RooflineTokPerS, want)
	}
	_, stderr, code = cli(t, "bench", "--model", dir, "--device", "cpu", "--prompt-tokens", "250", "--decode-tokens", "10")
	if code == 0 || !strings.Contains(stderr, "max_position_embeddings") {
		t.Errorf("a run past the model's 256 positions: exit %d, %q", code, stderr)
	}
}

// TestBenchTTFT: --ttft times a prompt through the scheduler cold and then
// with every full block but the last from the prefix cache.
func TestBenchTTFT(t *testing.T) {
	stdout, stderr, code := cli(t, "bench", "--model", filepath.Join(testdata, "models", "qwen3-tied-f32"), "--device", "cpu",
		"--prompt-tokens", "200", "--decode-tokens", "2", "--ttft", "--prefill-chunk", "256", "--max-batch-tokens", "256", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var r benchResult
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatalf("%v: %q", err, stdout)
	}
	if r.TTFTColdMs <= 0 || r.TTFTCachedMs <= 0 {
		t.Errorf("missing TTFT figures: %+v", r)
	}
	// 200 tokens: three full blocks; the last prompt token is always computed.
	if r.CachedTokens != 192 {
		t.Errorf("%d cached tokens, want 192", r.CachedTokens)
	}
}

// TestSynthKeepsExistingCheckpoints: synth refuses to write random weights
// into a directory that already holds a checkpoint (its own --model, a
// real model's directory), which would mix them with the real ones.
func TestSynthKeepsExistingCheckpoints(t *testing.T) {
	src := t.TempDir()
	for _, f := range []string{"config.json", "model.safetensors"} {
		b, err := os.ReadFile(filepath.Join(testdata, "models", "qwen3-tied-f32", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(src, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	indexed := t.TempDir()
	if err := os.WriteFile(filepath.Join(indexed, "model.safetensors.index.json"), []byte(`{"weight_map":{}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, out := range []string{src, indexed} {
		before, _ := os.ReadDir(out)
		_, stderr, code := cli(t, "synth", "--model", src, "--out", out, "--shard-bytes", "65536")
		after, _ := os.ReadDir(out)
		if code == 0 || !strings.Contains(stderr, "--out "+out) || len(after) != len(before) {
			t.Errorf("synth --out %s: exit %d, stderr %q, %d files before, %d after", out, code, stderr, len(before), len(after))
		}
	}
}
