package e2e

import (
	"math"
	"testing"

	"github.com/tidwall/gjson"
)

// TestSpeculativeDecoding: a server decoding with prompt-lookup drafts
// (--spec-tokens) answers exactly as one without, through the chat API with
// tools, streaming or not, greedy and seeded; /metrics counts the drafts it
// kept. Log-probs are held to the same tokens and to within logprobTol:
// a verifying forward of several rows may take other kernels than a
// one-token step (on the GPU they part in the 7th digit, run 32).
func TestSpeculativeDecoding(t *testing.T) {
	model := demoModel(t, "demo", true)
	plain := start(t, opts{model: model})
	defer plain.close()
	spec := start(t, opts{model: model, spec: 6})
	defer spec.close()
	tools := []map[string]any{{"type": "function", "function": map[string]any{"name": "write_file", "parameters": map[string]any{
		"type": "object", "properties": map[string]any{"path": map[string]any{"type": "string"}, "content": map[string]any{"type": "string"}}}}}}
	bodies := []map[string]any{
		{"messages": userMsg("Write 'the quick brown fox jumps over the lazy dog, the quick brown fox' to fox.txt"), "tools": tools, "max_tokens": 120, "temperature": 0},
		{"messages": userMsg("What is the capital of France? And the capital of France again?"), "max_tokens": 80, "temperature": 0},
		{"messages": userMsg("Tell me about the capital of Peru, the capital of Peru."), "max_tokens": 80, "temperature": 0.8, "seed": 7, "logprobs": true, "top_logprobs": 2},
	}
	for i, b := range bodies {
		_, _, want := post(t, plain.URL+"/v1/chat/completions", b)
		_, _, got := post(t, spec.URL+"/v1/chat/completions", b)
		for _, f := range []string{"choices.0.message", "choices.0.finish_reason", "usage.completion_tokens"} {
			if w, g := want.Get(f).Raw, got.Get(f).Raw; w != g {
				t.Fatalf("request %d %s: speculative %s, plain %s", i, f, g, w)
			}
		}
		if b["logprobs"] == true && len(want.Get("choices.0.logprobs.content").Array()) == 0 {
			t.Fatalf("request %d: no log-probs from the plain server: %s", i, want.Raw)
		}
		sameLogprobs(t, i, want.Get("choices.0.logprobs"), got.Get("choices.0.logprobs"))
		ds := assembleChat(t, streamEvents(t, spec.URL+"/v1/chat/completions", withStream(b)))
		if ds.content != want.Get("choices.0.message.content").Str {
			t.Fatalf("request %d streamed: %q, plain %q", i, ds.content, want.Get("choices.0.message.content").Str)
		}
	}
	kept, sampled := metric(t, spec, "infernix_spec_drafts_kept_total"), metric(t, spec, "infernix_spec_tokens_total")
	t.Logf("speculative server: %v tokens sampled on speculating lanes, %v drafts kept", sampled, kept)
	if kept == 0 || metric(t, plain, "infernix_spec_tokens_total") != 0 {
		t.Fatalf("drafts kept %v (want > 0), plain server's speculative tokens %v (want 0)", kept, metric(t, plain, "infernix_spec_tokens_total"))
	}
}

// logprobTol is how far a speculative server's log-probs may stray from a
// plain one's (absolute, or relative past 1).
const logprobTol = 1e-4

// sameLogprobs fails t unless got lists the tokens of want (and their top
// alternatives, in order) with log-probs within logprobTol.
func sameLogprobs(t *testing.T, req int, want, got gjson.Result) {
	t.Helper()
	near := func(a, b float64) bool { return math.Abs(a-b) <= logprobTol*math.Max(1, math.Abs(a)) }
	same := func(w, g gjson.Result) bool {
		return w.Get("token").Str == g.Get("token").Str && w.Get("bytes").Raw == g.Get("bytes").Raw && near(w.Get("logprob").Num, g.Get("logprob").Num)
	}
	if want.Get("refusal").Raw != got.Get("refusal").Raw {
		t.Fatalf("request %d logprobs.refusal: speculative %s, plain %s", req, got.Get("refusal").Raw, want.Get("refusal").Raw)
	}
	wc, gc := want.Get("content").Array(), got.Get("content").Array()
	if len(wc) != len(gc) {
		t.Fatalf("request %d: %d log-prob entries speculative, %d plain", req, len(gc), len(wc))
	}
	for k := range wc {
		wt, gt := wc[k].Get("top_logprobs").Array(), gc[k].Get("top_logprobs").Array()
		ok := same(wc[k], gc[k]) && len(wt) == len(gt)
		for j := 0; ok && j < len(wt); j++ {
			ok = same(wt[j], gt[j])
		}
		if !ok {
			t.Fatalf("request %d token %d: speculative %s, plain %s", req, k, gc[k].Raw, wc[k].Raw)
		}
	}
}
