package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/infernix/infernix/engine"
	"github.com/infernix/infernix/engine/backend"
	"github.com/infernix/infernix/engine/model"
	"github.com/infernix/infernix/engine/sample"
	"github.com/infernix/infernix/engine/sched"
)

func init() {
	register("bench", "prefill and decode throughput of a model (try --synthetic-weights)", cmdBench)
}

type benchResult struct {
	Model           string  `json:"model"`
	Device          string  `json:"device"`
	WeightBytes     int64   `json:"weight_bytes"`
	DecodeBytes     int64   `json:"decode_weight_bytes"` // what one decode step reads of them
	LoadSeconds     float64 `json:"load_s"`
	PromptTokens    int     `json:"prompt_tokens"`
	DecodeTokens    int     `json:"decode_tokens"`
	PrefillTokPerS  float64 `json:"prefill_tok_per_s"`
	DecodeTokPerS   float64 `json:"decode_tok_per_s"`
	MemBandwidthGBs float64 `json:"mem_bandwidth_gb_per_s"`
	RooflineTokPerS float64 `json:"roofline_decode_tok_per_s"`
	RooflineRatio   float64 `json:"roofline_ratio"`
	// With --ttft: time to first token of one prompt-tokens prompt through
	// the scheduler, computed in full, then again with all but its last
	// block from the prefix cache.
	TTFTColdMs   float64 `json:"ttft_cold_ms,omitempty"`
	TTFTCachedMs float64 `json:"ttft_cached_ms,omitempty"`
	CachedTokens int     `json:"ttft_cached_tokens,omitempty"`
}

func cmdBench(args []string, stdout io.Writer) error {
	fs := newFlags("bench")
	var ef engineFlags
	ef.register(fs)
	promptN := fs.Int("prompt-tokens", 512, "prompt length for the prefill measurement and the decode context")
	decodeN := fs.Int("decode-tokens", 32, "decode steps to time")
	asJSON := fs.Bool("json", false, "print JSON")
	ttft := fs.Bool("ttft", false, "also time the first token of a prompt-tokens prompt through the scheduler, cold and from the prefix cache (set --prefill-chunk and --max-batch-tokens to the prompt length for one-pass prefill)")
	if _, err := parse(fs, args); err != nil {
		return err
	}
	if *promptN < 1 {
		return fmt.Errorf("--prompt-tokens %d: must be at least 1", *promptN)
	}
	if *decodeN < 1 {
		return fmt.Errorf("--decode-tokens %d: must be at least 1", *decodeN)
	}
	if ef.context == 0 {
		ef.context = *promptN + *decodeN + 1
	}
	ef.maxLanes = 1
	tLoad := time.Now()
	e, err := ef.load()
	if err != nil {
		return err
	}
	defer e.Close()
	// Loading: reading (or making) the weights and uploading them, building
	// the model and sizing the KV cache; kernels compile at the warm-up.
	loadTime := time.Since(tLoad)
	m := e.Model
	V := m.Config().VocabSize
	blocks := make([]int32, (*promptN+*decodeN+backend.BlockSize)/backend.BlockSize)
	for i := range blocks {
		blocks[i] = int32(i)
	}
	if need, most := *promptN+*decodeN, e.Config.Text().MaxPositionEmbeddings; need > most {
		return fmt.Errorf("--prompt-tokens + --decode-tokens = %d positions, past the model's %d (max_position_embeddings)", need, most)
	}
	if len(blocks) > m.KVBlocks() {
		return fmt.Errorf("the KV cache holds %d blocks, the benchmark needs %d: raise --context", m.KVBlocks(), len(blocks))
	}
	logits := make([]float32, V)
	tok := func(i int) int32 { return int32((i*7919 + 13) % V) }
	run := func(start, n int) error {
		b := &model.Batch{Attn: backend.AttnBatch{Blocks: [][]int32{blocks}}, Outputs: []int32{int32(n - 1)}}
		for i := 0; i < n; i++ {
			b.Tokens = append(b.Tokens, tok(start+i))
			b.Attn.Seq = append(b.Attn.Seq, 0)
			b.Attn.Pos = append(b.Attn.Pos, int32(start+i))
		}
		return m.Forward(b, logits)
	}
	// Model calls run on the scheduler's loop (a device backend's thread).
	var prefill, decode time.Duration
	var runErr error
	if err := e.Sched.Run(func() {
		prefillPass := func() error {
			for pos := 0; pos < *promptN; {
				n := min(m.MaxBatchTokens(), *promptN-pos)
				if err := run(pos, n); err != nil {
					return err
				}
				pos += n
			}
			return nil
		}
		// Warm up with the shapes that are timed (page in weights, compile
		// kernels, choose the products' algorithms, capture graphs): a
		// prefill pass whose first chunk would otherwise pay them, and two
		// decode steps. The timed pass writes the same KV positions again.
		if runErr = prefillPass(); runErr != nil {
			return
		}
		for i := 0; i < min(2, *decodeN); i++ {
			if runErr = run(*promptN+i, 1); runErr != nil {
				return
			}
		}
		t0 := time.Now()
		if runErr = prefillPass(); runErr != nil {
			return
		}
		prefill = time.Since(t0)
		t1 := time.Now()
		for i := 0; i < *decodeN; i++ {
			if runErr = run(*promptN+i, 1); runErr != nil {
				return
			}
		}
		decode = time.Since(t1)
	}); err != nil {
		return err
	}
	if runErr != nil {
		return runErr
	}
	res := benchResult{Model: ef.model, Device: e.Backend.Name(), WeightBytes: e.WeightBytes, DecodeBytes: e.DecodeBytes, LoadSeconds: loadTime.Seconds(),
		PromptTokens: *promptN, DecodeTokens: *decodeN,
		PrefillTokPerS: float64(*promptN) / prefill.Seconds(), DecodeTokPerS: float64(*decodeN) / decode.Seconds()}
	// The decode limit: every weight a step reads, read once per token at the
	// backend's measured bandwidth (the CPU's streaming read, a GPU's device
	// copy).
	if bm, ok := e.Backend.(backend.BandwidthMeter); ok {
		var bw float64
		var bwErr error
		if err := e.Sched.Run(func() { bw, bwErr = bm.MeasureBandwidth() }); err == nil && bwErr == nil && bw > 0 {
			res.MemBandwidthGBs = bw / 1e9
			res.RooflineTokPerS = bw / float64(max(e.DecodeBytes, 1))
			res.RooflineRatio = res.DecodeTokPerS / res.RooflineTokPerS
		}
	}
	if *ttft {
		// Medians of three: cold prompts differ in their first token (no
		// shared block), the cached runs repeat the last cold prompt; the
		// first of each kind also pays any one-time cost of its shapes.
		var colds, cacheds []time.Duration
		var prompt []int32
		for k := 0; k < 3; k++ {
			prompt = make([]int32, *promptN)
			for i := range prompt {
				prompt[i] = int32((i*104729 + 7 + k*7) % V) // not the throughput run's tokens
			}
			st, err := firstTokenStats(e, prompt)
			if err != nil {
				return err
			}
			colds = append(colds, st.TTFT)
		}
		for k := 0; k < 3; k++ {
			st, err := firstTokenStats(e, prompt)
			if err != nil {
				return err
			}
			cacheds = append(cacheds, st.TTFT)
			res.CachedTokens = st.CachedTokens
		}
		res.TTFTColdMs, res.TTFTCachedMs = ms(medianDuration(colds)), ms(medianDuration(cacheds))
	}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(res)
	}
	fmt.Fprintf(stdout, "model        %s (%s, %.2f GB weights, %.2f GB read a decode step)\n", res.Model, res.Device,
		float64(res.WeightBytes)/1e9, float64(res.DecodeBytes)/1e9)
	fmt.Fprintf(stdout, "load         %8.2f s\n", res.LoadSeconds)
	fmt.Fprintf(stdout, "prefill      %8.1f tok/s (%d tokens)\n", res.PrefillTokPerS, res.PromptTokens)
	fmt.Fprintf(stdout, "decode       %8.2f tok/s (%d tokens at context %d)\n", res.DecodeTokPerS, res.DecodeTokens, res.PromptTokens)
	if res.MemBandwidthGBs > 0 {
		fmt.Fprintf(stdout, "memory       %8.2f GB/s measured → roofline %.2f tok/s; decode reaches %.0f%% of it\n",
			res.MemBandwidthGBs, res.RooflineTokPerS, 100*res.RooflineRatio)
	}
	if *ttft {
		fmt.Fprintf(stdout, "ttft         %8.1f ms cold, %.1f ms with %d of %d tokens from the prefix cache\n",
			res.TTFTColdMs, res.TTFTCachedMs, res.CachedTokens, res.PromptTokens)
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func medianDuration(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// firstTokenStats submits prompt for one greedy token and returns its stats.
func firstTokenStats(e *engine.Engine, prompt []int32) (sched.Stats, error) {
	ch, err := e.Sched.Submit(context.Background(), &sched.Request{Prompt: prompt, MaxTokens: 1,
		Sampling: sample.Params{TopP: 1, RepetitionPenalty: 1}, Logprobs: -1, ThinkBudget: -1, ThinkOpen: -1, ThinkClose: -1})
	if err != nil {
		return sched.Stats{}, err
	}
	for ev := range ch {
		if ev.Done {
			return ev.Stats, ev.Err
		}
	}
	return sched.Stats{}, fmt.Errorf("the scheduler closed the request without a final event")
}
