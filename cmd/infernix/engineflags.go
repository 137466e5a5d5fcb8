package main

import (
	"flag"
	"fmt"
	"strconv"
	"strings"

	"github.com/infernix/infernix/engine"
)

// engineFlags are the flags of every command that loads a model.
type engineFlags struct {
	model        string
	device       string
	threads      int
	context      int
	maxLanes     int
	maxQueue     int
	prefillChunk int
	batchTokens  int
	synthetic    bool
	chatTemplate string
	prefix       prefixFlags
	gpuFraction  float64
	specTokens   int
}

func (f *engineFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.model, "model", "", "Hugging Face model directory (config.json, *.safetensors, tokenizer)")
	fs.StringVar(&f.device, "device", "auto", "auto, cpu or cuda")
	fs.IntVar(&f.threads, "threads", 0, "CPU threads (0 = all cores)")
	fs.IntVar(&f.context, "context", 0, "context length in tokens (0 = the model's, at most 32768)")
	fs.IntVar(&f.maxLanes, "max-lanes", 4, "sequences decoded together")
	fs.IntVar(&f.maxQueue, "max-queue", 64, "requests waiting for a lane before 429")
	fs.IntVar(&f.prefillChunk, "prefill-chunk", 256, "most prompt tokens computed per step")
	fs.IntVar(&f.batchTokens, "max-batch-tokens", 512, "largest forward pass in tokens")
	fs.BoolVar(&f.synthetic, "synthetic-weights", false, "random weights of the model's shapes (benchmarks)")
	fs.StringVar(&f.chatTemplate, "chat-template", "", "a Jinja chat template file overriding the model's")
	fs.Float64Var(&f.gpuFraction, "gpu-memory-fraction", 0.9, "share of the GPU's free memory for weights and KV cache")
	fs.IntVar(&f.specTokens, "spec-tokens", 0, "speculative decoding by prompt lookup: up to N draft tokens a step from an earlier occurrence of the last tokens (0 = off; outputs unchanged)")
	f.prefix.register(fs)
}

func (f *engineFlags) load() (*engine.Engine, error) {
	if f.model == "" {
		return nil, fmt.Errorf("--model DIR is required")
	}
	for _, c := range []struct {
		name     string
		v, least int
	}{{"threads", f.threads, 0}, {"context", f.context, 0}, {"max-lanes", f.maxLanes, 1}, {"max-queue", f.maxQueue, 0},
		{"prefill-chunk", f.prefillChunk, 1}, {"max-batch-tokens", f.batchTokens, 1}, {"host-cache-mib", f.prefix.hostMiB, 0}} {
		if c.v < c.least {
			return nil, fmt.Errorf("--%s %d: must be at least %d", c.name, c.v, c.least)
		}
	}
	opt := engine.Options{Device: f.device, Threads: f.threads, ContextLength: f.context,
		MaxBatchTokens: f.batchTokens, SyntheticWeights: f.synthetic, ChatTemplate: f.chatTemplate}
	opt.Sched.MaxLanes = f.maxLanes
	opt.Sched.MaxQueue = f.maxQueue
	opt.Sched.PrefillChunk = f.prefillChunk
	if f.specTokens < 0 || f.specTokens > 32 {
		return nil, fmt.Errorf("--spec-tokens must be in [0, 32], got %d", f.specTokens)
	}
	opt.Sched.SpecTokens = f.specTokens
	if f.gpuFraction <= 0 || f.gpuFraction > 1 {
		return nil, fmt.Errorf("--gpu-memory-fraction must be in (0, 1], got %g", f.gpuFraction)
	}
	opt.GPUMemoryFraction = f.gpuFraction
	if err := f.prefix.apply(&opt); err != nil {
		return nil, err
	}
	e, err := engine.Load(f.model, opt)
	if err != nil && opt.Persist != nil {
		opt.Persist.Close()
	}
	return e, err
}

// parseIDs reads "1,2,3" (spaces allowed).
func parseIDs(s string) ([]int32, error) {
	var ids []int32
	for _, part := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\t' }) {
		v, err := strconv.ParseInt(part, 10, 32)
		if err != nil || v < 0 {
			return nil, fmt.Errorf("token id %q is not a non-negative integer", part)
		}
		ids = append(ids, int32(v))
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("no token ids given")
	}
	return ids, nil
}
