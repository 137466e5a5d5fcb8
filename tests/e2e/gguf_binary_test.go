package e2e

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestServeGGUF: `infernix convert` writes the demo model as a Q8_0 GGUF,
// and `infernix serve` serves the file: the model's name is the file's,
// its tokenizer and chat template come from the GGUF metadata, and it
// answers a chat request and calls a tool as the original does.
func TestServeGGUF(t *testing.T) {
	root, tmp, bin := buildBinary(t)
	file := filepath.Join(tmp, "demo-q8.gguf")
	if out, err := exec.Command(bin, "convert", "--model", filepath.Join(root, "tests", "testdata", "models", "demo"), "--out", file, "--type", "q8_0").CombinedOutput(); err != nil {
		t.Fatalf("convert: %v %s", err, out)
	}
	cmd, stdout, stderr := startServe(t, bin, "--model", file, "--port", "0", "--context", "1024", "--no-prefix-reuse")
	url, _ := awaitBanner(t, cmd, stdout, stderr, "listening on ")
	st, _, r := post(t, url+"/v1/chat/completions", map[string]any{
		"messages":             []map[string]any{{"role": "user", "content": "What is the capital of France?"}},
		"temperature":          0,
		"max_tokens":           40,
		"chat_template_kwargs": map[string]any{"enable_thinking": false},
	})
	if st != 200 || r.Get("model").Str != "demo-q8" || !strings.Contains(r.Get("choices.0.message.content").Str, "Paris") {
		t.Fatalf("chat: %d %s", st, r.Raw)
	}
	st, _, r = post(t, url+"/v1/chat/completions", map[string]any{
		"messages":    []map[string]any{{"role": "user", "content": "What's the weather in Tokyo?"}},
		"temperature": 0,
		"max_tokens":  80,
		"tools": []map[string]any{{"type": "function", "function": map[string]any{"name": "get_weather",
			"parameters": map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []string{"city"}}}}},
	})
	call := r.Get("choices.0.message.tool_calls.0.function")
	if st != 200 || call.Get("name").Str != "get_weather" || !strings.Contains(call.Get("arguments").Str, "Tokyo") {
		t.Fatalf("tool call: %d %s", st, r.Raw)
	}
}
