package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/infernix/infernix/engine"
	"github.com/infernix/infernix/engine/chat"
	"github.com/infernix/infernix/server"
	"github.com/infernix/infernix/server/testmodel"
)

// TestSharedPrefixSnapshot: on a real server over the tiny hybrid model with
// the Qwen3.5 chat template (which refuses to render a system block without
// a user query), a chat request's system prompt and tools are known to the
// scheduler from the first conversation on: a second conversation with the
// same system prompt and tools, through each API, resumes exactly at the
// system block's last full 64-token block (without the hint it would resume
// at the interval snapshot, block 16). The control sends the
// same two rendered prompts as raw completions, which carry no such hint:
// after one conversation nothing marks the boundary, and the second reads
// less than the system block from the cache. (The Qwen3.5 template puts the
// tools block first: its opening block, the same in every case, is a branch
// point the scheduler infers once two cases have diverged after it.)
func TestSharedPrefixSnapshot(t *testing.T) {
	dir := hybridModelDir(t)
	root, err := testmodel.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := os.ReadFile(filepath.Join(root, "tests", "testdata", "chat-templates", "Qwen3.5-4B.jinja"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "chat_template.jinja"), tmpl, 0o644); err != nil {
		t.Fatal(err)
	}
	// Byte-level tokens: the Qwen3.5 tools block alone is ~1000 tokens.
	var cfg map[string]any
	raw, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err == nil {
		err = json.Unmarshal(raw, &cfg)
	}
	if err != nil {
		t.Fatal(err)
	}
	cfg["max_position_embeddings"] = 4096
	raw, _ = json.Marshal(cfg)
	if err := os.WriteFile(filepath.Join(dir, "config.json"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	eo := engine.Options{Device: testDevice(), ContextLength: 4096, MaxBatchTokens: 96}
	eo.Sched.MaxLanes = 1
	e, err := engine.Load(dir, eo)
	if err != nil {
		t.Fatal(err)
	}
	ts := serveEngine(t, e, server.Config{})
	defer ts.close()
	url := ts.URL
	if !e.Sched.KeepsSnapshots() {
		t.Fatal("the hybrid model keeps no snapshots")
	}

	params := json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","description":"the file to read"}},"required":["path"]}`)
	openaiTools := []any{map[string]any{"type": "function", "function": map[string]any{"name": "read_file", "description": "Read a file of the workspace.", "parameters": params}}}
	// boundary renders the chat-completions form of the conversation and
	// returns the full blocks before the user's question: the tools and
	// system block and the user turn's header. (The Anthropic and Responses
	// tools become the same fields, perhaps in another order: with one token
	// a byte, the same length.)
	boundary := func(system, question string) int {
		t.Helper()
		msgs, _ := json.Marshal([]any{map[string]any{"role": "system", "content": system}, map[string]any{"role": "user", "content": question}})
		tj, _ := json.Marshal(openaiTools)
		out, err := e.Template.Render(chat.Request{Messages: msgs, Tools: tj, AddGenerationPrompt: true, BOSToken: e.BOS(), EOSToken: e.EOS()})
		if err != nil {
			t.Fatal(err)
		}
		i := strings.Index(out, question)
		if i < 0 {
			t.Fatalf("question not in the rendered prompt %q", out)
		}
		return len(e.Tokenizer.Encode(out[:i])) / 64 * 64
	}
	system := func(salt string) string {
		return salt + ": you are a careful assistant for the infernix workspace. " + strings.Repeat("Answer briefly and cite the files you read. ", 8)
	}
	questions := [2]string{"What does the scheduler do?", "Where are snapshots released?"}
	cases := []struct {
		api    string
		path   string
		body   func(system, question string) map[string]any
		cached string // where the response reports cached tokens
	}{
		{"openai", "/v1/chat/completions", func(sys, q string) map[string]any {
			return map[string]any{"messages": []any{map[string]any{"role": "system", "content": sys}, map[string]any{"role": "user", "content": q}},
				"tools": openaiTools, "max_tokens": 4, "temperature": 0}
		}, "usage.prompt_tokens_details.cached_tokens"},
		{"anthropic", "/v1/messages", func(sys, q string) map[string]any {
			return map[string]any{"model": "m", "system": sys, "messages": []any{map[string]any{"role": "user", "content": q}}, "max_tokens": 4, "temperature": 0,
				"tools": []any{map[string]any{"name": "read_file", "description": "Read a file of the workspace.", "input_schema": params}}}
		}, "usage.cache_read_input_tokens"},
		{"responses", "/v1/responses", func(sys, q string) map[string]any {
			return map[string]any{"model": "m", "instructions": sys, "input": q, "max_output_tokens": 4, "temperature": 0,
				"tools": []any{map[string]any{"type": "function", "name": "read_file", "description": "Read a file of the workspace.", "parameters": params}}}
		}, "usage.input_tokens_details.cached_tokens"},
	}
	for _, c := range cases {
		t.Run(c.api, func(t *testing.T) {
			sys := system(c.api) // each API its own system prompt: no hits across cases
			want := boundary(sys, questions[1])
			if want < 128 {
				t.Fatalf("boundary %d: the system block should span several blocks", want)
			}
			for i, q := range questions {
				code, _, r := post(t, url+c.path, c.body(sys, q))
				if code != 200 {
					t.Fatalf("conversation %d: %d %s", i+1, code, r.Raw)
				}
				got := int(r.Get(c.cached).Int())
				switch {
				case i == 0 && got >= want: // the tools header's first block may be cached (another case's)
					t.Fatalf("first conversation: %d cached tokens, want < %d", got, want)
				case i == 1 && got != want:
					t.Fatalf("second conversation: %d cached tokens, want %d (the system block's last full block)", got, want)
				}
			}
		})
	}
	t.Run("completions control", func(t *testing.T) {
		sys := system("control")
		want := boundary(sys, questions[1])
		for i, q := range questions {
			msgs, _ := json.Marshal([]any{map[string]any{"role": "system", "content": sys}, map[string]any{"role": "user", "content": q}})
			tj, _ := json.Marshal(openaiTools)
			text, err := e.Template.Render(chat.Request{Messages: msgs, Tools: tj, AddGenerationPrompt: true, BOSToken: e.BOS(), EOSToken: e.EOS()})
			if err != nil {
				t.Fatal(err)
			}
			code, _, r := post(t, url+"/v1/completions", map[string]any{"prompt": text, "max_tokens": 4, "temperature": 0})
			if code != 200 {
				t.Fatalf("conversation %d: %d %s", i+1, code, r.Raw)
			}
			if got := int(r.Get("usage.prompt_tokens_details.cached_tokens").Int()); got >= want {
				t.Fatalf("conversation %d without the hint: %d cached tokens, want < %d", i+1, got, want)
			}
		}
	})
}
