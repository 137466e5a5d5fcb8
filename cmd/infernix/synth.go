package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/infernix/infernix/engine/backend"
	"github.com/infernix/infernix/engine/backend/cpu"
	"github.com/infernix/infernix/engine/model"
	"github.com/infernix/infernix/engine/safetensors"
)

func init() {
	register("synth", "write a random-weight BF16 checkpoint of a config's shapes (load benchmarks)", cmdSynth)
}

// cmdSynth writes what `--synthetic-weights` makes in memory as a real
// Hugging Face directory (config.json, sharded model-*.safetensors and
// model.safetensors.index.json), so that loading a large checkpoint from disk
// can be timed on a machine that cannot download one. The tensors are the
// ones the engine reads, under the names it asks for: for Qwen3 and
// Qwen3-MoE exactly a Hugging Face checkpoint's; for the hybrid
// architectures the split projections and per-expert weights the loader
// also accepts, and no MTP head.
func cmdSynth(args []string, stdout io.Writer) error {
	fs := newFlags("synth")
	cfgDir := fs.String("model", "", "directory with the config.json to follow")
	out := fs.String("out", "", "directory to write")
	shardBytes := fs.Int64("shard-bytes", 4<<30, "largest shard in bytes")
	seed := fs.Uint64("seed", 1, "random seed")
	if _, err := parse(fs, args); err != nil {
		return err
	}
	if *cfgDir == "" || *out == "" {
		return fmt.Errorf("--model DIR and --out DIR are required")
	}
	// Random weights next to a checkpoint would mix with it (a loader reads
	// the index, or every shard): write only where there is none.
	if old, _ := filepath.Glob(filepath.Join(*out, "*.safetensors")); len(old) > 0 {
		return fmt.Errorf("--out %s already holds a checkpoint (%s): choose an empty directory", *out, filepath.Base(old[0]))
	}
	if _, err := os.Stat(filepath.Join(*out, "model.safetensors.index.json")); err == nil {
		return fmt.Errorf("--out %s already holds a checkpoint (model.safetensors.index.json): choose an empty directory", *out)
	}
	cfg, err := model.LoadConfig(*cfgDir)
	if err != nil {
		return err
	}
	build, err := model.Lookup(cfg.Arch())
	if err != nil {
		return err
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	raw, err := os.ReadFile(filepath.Join(*cfgDir, "config.json"))
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(*out, "config.json"), raw, 0o644); err != nil {
		return err
	}
	t0 := time.Now()
	w := &shardWriter{dir: *out, limit: *shardBytes, index: map[string]string{}}
	rec := &recordingBackend{Backend: cpu.New(1), w: w}
	ws := &allWeights{model.SyntheticWeights{Be: rec, Seed: *seed}}
	if _, err := build(cfg, ws, rec, model.Options{KVBlocks: 1, MaxBatchTokens: 1}); err != nil {
		return err
	}
	if rec.err != nil {
		return rec.err
	}
	if err := w.finish(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s: %d tensors, %.2f GB in %d shard(s), %.1fs\n", *out, len(w.index),
		float64(w.total)/1e9, w.shards, time.Since(t0).Seconds())
	return nil
}

// allWeights also makes the tensors SyntheticWeights leaves to tying (an
// untied LM head), so the checkpoint has every tensor a real one has.
type allWeights struct{ model.SyntheticWeights }

func (a *allWeights) Has(string) bool { return true }

// recordingBackend hands every uploaded weight to the shard writer and keeps
// only a placeholder; the model's other allocations are tiny (one KV block,
// one batch token).
type recordingBackend struct {
	*cpu.Backend
	w   *shardWriter
	err error
}

func (r *recordingBackend) Upload(name string, dt backend.DType, shape []int, data []byte) (backend.Tensor, error) {
	if r.err == nil {
		r.err = r.w.add(name, dt, shape, data)
	}
	return r.Backend.Upload(name, dt, []int{1}, data[:dt.Size()])
}

// shardWriter buffers tensors up to a shard's size, then writes the shard.
type shardWriter struct {
	dir          string
	limit        int64
	pending      []safetensors.WriteTensor
	pendingBytes int64
	names        []string // shard file names, in order
	index        map[string]string
	shards       int
	total        int64
}

func (w *shardWriter) add(name string, dt backend.DType, shape []int, data []byte) error {
	if _, dup := w.index[name]; dup {
		return nil // a tensor uploaded twice (tied weights) is stored once
	}
	if w.pendingBytes > 0 && w.pendingBytes+int64(len(data)) > w.limit {
		if err := w.flush(); err != nil {
			return err
		}
	}
	st := map[backend.DType]safetensors.DType{backend.F32: "F32", backend.F16: "F16", backend.BF16: "BF16"}[dt]
	w.pending = append(w.pending, safetensors.WriteTensor{Name: name, DType: st, Shape: append([]int(nil), shape...),
		Data: append([]byte(nil), data...)})
	w.pendingBytes += int64(len(data))
	w.index[name] = "" // filled in when the shard is named
	return nil
}

func (w *shardWriter) flush() error {
	if len(w.pending) == 0 {
		return nil
	}
	w.shards++
	file := fmt.Sprintf("model-%05d.safetensors", w.shards)
	if err := safetensors.WriteFile(filepath.Join(w.dir, file), w.pending, map[string]string{"format": "pt"}); err != nil {
		return err
	}
	for _, t := range w.pending {
		w.index[t.Name] = file
	}
	w.names = append(w.names, file)
	w.total += w.pendingBytes
	w.pending, w.pendingBytes = nil, 0
	return nil
}

// finish writes the last shard and the index (with Hugging Face's final
// names, model-0000i-of-0000n.safetensors).
func (w *shardWriter) finish() error {
	if err := w.flush(); err != nil {
		return err
	}
	rename := map[string]string{}
	for i, f := range w.names {
		final := fmt.Sprintf("model-%05d-of-%05d.safetensors", i+1, len(w.names))
		if err := os.Rename(filepath.Join(w.dir, f), filepath.Join(w.dir, final)); err != nil {
			return err
		}
		rename[f] = final
	}
	keys := make([]string, 0, len(w.index))
	for k := range w.index {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	wm := make(map[string]string, len(keys))
	for _, k := range keys {
		wm[k] = rename[w.index[k]]
	}
	b, err := json.MarshalIndent(map[string]any{"metadata": map[string]any{"total_size": w.total}, "weight_map": wm}, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(w.dir, "model.safetensors.index.json"), b, 0o644)
}
