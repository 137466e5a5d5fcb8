package e2e

import (
	"testing"
)

// TestSpeculativeDecoding: a server decoding with prompt-lookup drafts
// (--spec-tokens) answers exactly as one without, through the chat API with
// tools, streaming or not, greedy and seeded; /metrics counts the drafts it
// kept.
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
		for _, f := range []string{"choices.0.message", "choices.0.finish_reason", "choices.0.logprobs", "usage.completion_tokens"} {
			if w, g := want.Get(f).Raw, got.Get(f).Raw; w != g {
				t.Fatalf("request %d %s: speculative %s, plain %s", i, f, g, w)
			}
		}
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
