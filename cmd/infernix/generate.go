package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"

	"github.com/infernix/infernix/engine"
	"github.com/infernix/infernix/engine/sample"
	"github.com/infernix/infernix/engine/sched"
)

func init() {
	register("generate", "raw completion from --prompt text or --tokens ids", cmdGenerate)
	register("score", "causal log-probs of --tokens (for each position ≥ 1)", cmdScore)
}

func cmdGenerate(args []string, stdout io.Writer) error {
	fs := newFlags("generate")
	var ef engineFlags
	ef.register(fs)
	prompt := fs.String("prompt", "", "prompt text (tokenized as is, no chat template)")
	tokens := fs.String("tokens", "", "prompt token ids, e.g. 1,2,3")
	maxTokens := fs.Int("max-tokens", 64, "new tokens at most")
	temperature := fs.Float64("temperature", -1, "sampling temperature (0 = greedy; default: the model's generation_config)")
	topP := fs.Float64("top-p", -1, "nucleus sampling (default: the model's)")
	topK := fs.Int("top-k", -1, "top-k sampling (default: the model's)")
	seed := fs.Int64("seed", -1, "random seed (same seed, same output)")
	asJSON := fs.Bool("json", false, `print {"tokens":[...],"text":...}`)
	if _, err := parse(fs, args); err != nil {
		return err
	}
	if *maxTokens < 0 {
		return fmt.Errorf("--max-tokens %d: must not be negative", *maxTokens)
	}
	if (*prompt == "") == (*tokens == "") {
		return fmt.Errorf("give exactly one of --prompt TEXT or --tokens 1,2,3")
	}
	var ids []int32
	if *tokens != "" {
		var err error
		if ids, err = parseIDs(*tokens); err != nil {
			return fmt.Errorf("--tokens: %w", err)
		}
	}
	e, err := ef.load()
	if err != nil {
		return err
	}
	defer e.Close()
	if *tokens == "" {
		if e.Tokenizer == nil {
			return fmt.Errorf("%s has no tokenizer.json: use --tokens", ef.model)
		}
		ids = e.Tokenizer.Encode(*prompt)
	}
	params := defaultSampling(e)
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if set["temperature"] {
		params.Temperature = float32(*temperature)
	}
	if set["top-p"] {
		params.TopP = float32(*topP)
	}
	if set["top-k"] {
		params.TopK = *topK
	}
	if *seed >= 0 {
		s := uint64(*seed)
		params.Seed = &s
	}
	if err := params.Validate(); err != nil {
		return err
	}
	req := &sched.Request{Prompt: ids, MaxTokens: *maxTokens, Sampling: params, StopTokens: e.StopTokens(), Logprobs: -1, ThinkBudget: -1, ThinkOpen: -1, ThinkClose: -1}
	events, err := e.Sched.Submit(context.Background(), req)
	if err != nil {
		return err
	}
	var out []int32
	var dec interface{ Add(int32) string }
	if e.Tokenizer != nil && !*asJSON {
		dec = e.Tokenizer.NewStreamDecoder(false)
	}
	for ev := range events {
		if ev.Done {
			if ev.Err != nil {
				return ev.Err
			}
			break
		}
		out = append(out, ev.Token)
		if dec != nil {
			fmt.Fprint(stdout, dec.Add(ev.Token))
		}
	}
	if *asJSON {
		res := struct {
			Tokens []int32 `json:"tokens"`
			Text   string  `json:"text"`
		}{Tokens: out}
		if res.Tokens == nil {
			res.Tokens = []int32{}
		}
		if e.Tokenizer != nil {
			res.Text = e.Tokenizer.Decode(out, false)
		}
		return json.NewEncoder(stdout).Encode(res)
	}
	if dec != nil {
		if f, ok := dec.(interface{ Flush() string }); ok {
			fmt.Fprint(stdout, f.Flush())
		}
		fmt.Fprintln(stdout)
	} else {
		return json.NewEncoder(stdout).Encode(out)
	}
	return nil
}

// defaultSampling takes the checkpoint's generation_config defaults.
func defaultSampling(e *engine.Engine) sample.Params {
	p := sample.Params{Temperature: 1, TopP: 1, RepetitionPenalty: 1}
	g := e.Gen
	if g.Temperature != nil {
		p.Temperature = float32(*g.Temperature)
	}
	if g.TopP != nil {
		p.TopP = float32(*g.TopP)
	}
	if g.TopK != nil {
		p.TopK = *g.TopK
	}
	if g.MinP != nil {
		p.MinP = float32(*g.MinP)
	}
	if g.RepetitionPenalty != nil {
		p.RepetitionPenalty = float32(*g.RepetitionPenalty)
	}
	if g.DoSample != nil && !*g.DoSample {
		p.Temperature = 0
	}
	return p
}

func cmdScore(args []string, stdout io.Writer) error {
	fs := newFlags("score")
	var ef engineFlags
	ef.register(fs)
	tokens := fs.String("tokens", "", "token ids to score, e.g. 1,2,3")
	top := fs.Int("top", 5, "alternatives per position")
	fs.Bool("json", true, "print JSON (the only format)")
	if _, err := parse(fs, args); err != nil {
		return err
	}
	if *top < 0 {
		return fmt.Errorf("--top %d: must not be negative", *top)
	}
	ids, err := parseIDs(*tokens)
	if err != nil {
		return fmt.Errorf("--tokens: %w", err)
	}
	if len(ids) < 2 {
		return fmt.Errorf("--tokens: scoring needs at least 2 tokens")
	}
	e, err := ef.load()
	if err != nil {
		return err
	}
	defer e.Close()
	req := &sched.Request{Prompt: ids, MaxTokens: 0, Sampling: sample.Params{TopP: 1, RepetitionPenalty: 1}, Logprobs: -1,
		PromptLogprobs: true, PromptTop: *top, ThinkBudget: -1, ThinkOpen: -1, ThinkClose: -1}
	events, err := e.Sched.Submit(context.Background(), req)
	if err != nil {
		return err
	}
	type position struct {
		Token   int32        `json:"token"`
		Logprob float32      `json:"logprob"`
		Top     [][2]float64 `json:"top"`
	}
	res := struct {
		Positions []position `json:"positions"`
	}{Positions: []position{}}
	for ev := range events {
		if ev.Done {
			if ev.Err != nil {
				return ev.Err
			}
			break
		}
		for _, p := range ev.PromptLogprobs {
			pos := position{Token: p.Token, Logprob: p.Logprob, Top: [][2]float64{}}
			for _, t := range p.Top {
				pos.Top = append(pos.Top, [2]float64{float64(t.ID), float64(t.LogProb)})
			}
			res.Positions = append(res.Positions, pos)
		}
	}
	return json.NewEncoder(stdout).Encode(res)
}
