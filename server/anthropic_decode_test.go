package server

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDecodeAnthropic(t *testing.T) {
	cases := []struct {
		name, body string
		msgs       string // the chat messages it becomes
		check      func(t *testing.T, r *anthropicRequest)
	}{
		{name: "string content, system blocks",
			body: `{"model":"claude-x","max_tokens":10,"system":[{"type":"text","text":"A","cache_control":{"type":"ephemeral"}},{"type":"text","text":"B"}],
				"messages":[{"role":"user","content":"hi"}],"stop_sequences":["END"],"temperature":0.5,"top_k":3,"metadata":{"user_id":"u"},"stream":true}`,
			msgs: `[{"role":"system","content":"A\nB"},{"role":"user","content":"hi"}]`,
			check: func(t *testing.T, r *anthropicRequest) {
				c := r.chat
				if r.model != "claude-x" || !r.stream || c.gen.maxTokens != 10 || *c.gen.temperature != 0.5 || *c.gen.topK != 3 ||
					len(c.gen.stop) != 1 || c.gen.stop[0] != "END" || c.thinkBudget != 0 {
					t.Errorf("%+v %+v", r, c.gen)
				}
			}},
		{name: "tool round trip",
			body: `{"max_tokens":10,"tools":[{"name":"get_weather","description":"W","input_schema":{"type":"object"}},{"type":"web_search_20250305","name":"web_search"}],
				"tool_choice":{"type":"any","disable_parallel_tool_use":true},"messages":[{"role":"user","content":[{"type":"text","text":"q"}]},
				{"role":"assistant","content":[{"type":"thinking","thinking":"hm","signature":"s"},{"type":"text","text":"Let me check."},{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Paris"}}]},
				{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"18C"},{"type":"tool_result","tool_use_id":"toolu_2","content":[{"type":"text","text":"boom"}],"is_error":true},{"type":"text","text":"thanks"}]}]}`,
			msgs: `[{"role":"user","content":"q"},{"role":"assistant","content":"Let me check.","reasoning_content":"hm","tool_calls":[{"id":"toolu_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},` +
				`{"role":"tool","content":"18C","tool_call_id":"toolu_1"},{"role":"tool","content":"Error: boom","tool_call_id":"toolu_2"},{"role":"user","content":"thanks"}]`,
			check: func(t *testing.T, r *anthropicRequest) {
				c := r.chat
				if len(c.toolList) != 1 || c.toolList[0].Name != "get_weather" || c.toolChoice != "required" || c.parallelToolCalls ||
					string(c.tools) != `[{"type":"function","function":{"name":"get_weather","description":"W","parameters":{"type":"object"}}}]` {
					t.Errorf("tools %s %+v choice %s parallel %v", c.tools, c.toolList, c.toolChoice, c.parallelToolCalls)
				}
			}},
		{name: "only tool results", body: `{"max_tokens":1,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"a"}]}]}`,
			msgs: `[{"role":"tool","content":"","tool_call_id":"a"}]`},
		{name: "image in a tool result", body: `{"max_tokens":1,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":[{"type":"text","text":"shot:"},{"type":"image","source":{}}]}]}]}`,
			msgs: `[{"role":"tool","content":"shot:\n[image omitted: this model reads text only]","tool_call_id":"a"}]`},
		{name: "thinking enabled with budget", body: `{"max_tokens":1,"thinking":{"type":"enabled","budget_tokens":1024},"messages":[{"role":"user","content":"x"}]}`,
			msgs:  `[{"role":"user","content":"x"}]`,
			check: func(t *testing.T, r *anthropicRequest) { want(t, r.chat.thinkBudget, 1024) }},
		{name: "thinking enabled without budget", body: `{"max_tokens":1,"thinking":{"type":"enabled"},"messages":[{"role":"user","content":"x"}]}`,
			msgs:  `[{"role":"user","content":"x"}]`,
			check: func(t *testing.T, r *anthropicRequest) { want(t, r.chat.thinkBudget, -1) }},
		{name: "thinking disabled, tool choice tool", body: `{"max_tokens":1,"thinking":{"type":"disabled"},"tools":[{"name":"f","input_schema":{}}],"tool_choice":{"type":"tool","name":"f"},"messages":[{"role":"user","content":"x"}]}`,
			msgs: `[{"role":"user","content":"x"}]`,
			check: func(t *testing.T, r *anthropicRequest) {
				want(t, r.chat.thinkBudget, 0)
				want(t, r.chat.toolChoice+" "+r.chat.toolName, "function f")
			}},
		{name: "assistant prefill", body: `{"max_tokens":1,"messages":[{"role":"user","content":"x"},{"role":"assistant","content":[{"type":"text","text":"{"}]}]}`,
			msgs: `[{"role":"user","content":"x"},{"role":"assistant","content":"{"}]`,
			check: func(t *testing.T, r *anthropicRequest) {
				want(t, r.prefill, "{")
				want(t, string(r.prefillMsgs), `[{"role":"user","content":"x"}]`)
			}},
		{name: "no prefill after a tool call", body: `{"max_tokens":1,"messages":[{"role":"user","content":"x"},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{}}]}]}`,
			msgs:  `[{"role":"user","content":"x"},{"role":"assistant","content":"","tool_calls":[{"id":"t","type":"function","function":{"name":"f","arguments":"{}"}}]}]`,
			check: func(t *testing.T, r *anthropicRequest) { want(t, r.prefill, "") }},
		{name: "tool choice none", body: `{"max_tokens":1,"tools":[{"name":"f","input_schema":{}}],"tool_choice":{"type":"none"},"messages":[{"role":"user","content":"x"}]}`,
			msgs:  `[{"role":"user","content":"x"}]`,
			check: func(t *testing.T, r *anthropicRequest) { want(t, r.chat.toolChoice, "none") }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := decodeAnthropic(c.body, false)
			if err != nil {
				t.Fatal(err)
			}
			if got := string(r.chat.messages); got != c.msgs {
				t.Errorf("messages\n got %s\nwant %s", got, c.msgs)
			}
			if c.check != nil {
				c.check(t, r)
			}
		})
	}
}

func want[T comparable](t *testing.T, got, want T) {
	t.Helper()
	if got != want {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestDecodeAnthropicErrors(t *testing.T) {
	cases := []struct{ body, param, msg string }{
		{`{"messages":[{"role":"user","content":"x"}]}`, "max_tokens", "max_tokens is required"},
		{`{"max_tokens":0,"messages":[{"role":"user","content":"x"}]}`, "max_tokens", ">= 1"},
		{`{"max_tokens":1}`, "messages", "messages is required"},
		{`{"max_tokens":1,"messages":{}}`, "messages", "must be an array"},
		{`{"max_tokens":1,"messages":[]}`, "messages", "must not be empty"},
		{`{"max_tokens":1,"messages":[{"role":"tool","content":"x"}]}`, "messages.0.role", `"tool"`},
		{`{"max_tokens":1,"messages":[{"role":"user","content":7}]}`, "messages.0.content", "string or an array"},
		{`{"max_tokens":1,"messages":[{"role":"user","content":[{"type":"video"}]}]}`, "messages.0.content.0.type", "video"},
		{`{"max_tokens":1,"messages":[{"role":"user","content":[{"type":"tool_use","name":"f"}]}]}`, "messages.0.content.0.type", "assistant"},
		{`{"max_tokens":1,"messages":[{"role":"assistant","content":[{"type":"tool_use","name":"f","input":[]}]}]}`, "messages.0.content.0.input", "object"},
		{`{"max_tokens":1,"messages":[{"role":"assistant","content":[{"type":"tool_result","tool_use_id":"a"}]}]}`, "messages.0.content.0.type", "user"},
		{`{"max_tokens":1,"messages":[{"role":"user","content":[{"type":"tool_result"}]}]}`, "messages.0.content.0.tool_use_id", "string"},
		{`{"max_tokens":1,"system":5,"messages":[{"role":"user","content":"x"}]}`, "system", "string or an array"},
		{`{"max_tokens":1,"system":[{"type":"image"}],"messages":[{"role":"user","content":"x"}]}`, "system.0", "text only"},
		{`{"max_tokens":1,"tools":[{"name":"f"}],"messages":[{"role":"user","content":"x"}]}`, "tools.0.input_schema", "required"},
		{`{"max_tokens":1,"tools":[{"input_schema":{}}],"messages":[{"role":"user","content":"x"}]}`, "tools.0.name", "non-empty"},
		{`{"max_tokens":1,"tool_choice":{"type":"any"},"messages":[{"role":"user","content":"x"}]}`, "tool_choice", "no function tools"},
		{`{"max_tokens":1,"tool_choice":"auto","messages":[{"role":"user","content":"x"}]}`, "tool_choice", "must be an object"},
		{`{"max_tokens":1,"tool_choice":{"type":"maybe"},"messages":[{"role":"user","content":"x"}]}`, "tool_choice.type", "maybe"},
		{`{"max_tokens":1,"thinking":{"type":"enabled","budget_tokens":-1},"messages":[{"role":"user","content":"x"}]}`, "thinking.budget_tokens", ">= 0"},
		{`{"max_tokens":1,"stop_sequences":"x","messages":[{"role":"user","content":"x"}]}`, "stop_sequences", "array of strings"},
		{`{"max_tokens":1,"temperature":"hot","messages":[{"role":"user","content":"x"}]}`, "temperature", "number"},
		{`{"max_tokens":1,"metadata":[],"messages":[{"role":"user","content":"x"}]}`, "metadata", "object"},
	}
	for _, c := range cases {
		_, err := decodeAnthropic(c.body, false)
		if err == nil || err.Status != 400 || err.Param != c.param || !strings.Contains(err.Message, c.msg) {
			t.Errorf("%s: got %+v, want param %s with %q", c.body, err, c.param, c.msg)
		}
	}
	// count_tokens needs no max_tokens.
	if _, err := decodeAnthropic(`{"messages":[{"role":"user","content":"x"}]}`, true); err != nil {
		t.Errorf("count_tokens: %v", err)
	}
}

// FuzzDecodeAnthropic: any body decodes or fails with a 400, and what
// decodes is valid chat messages JSON.
func FuzzDecodeAnthropic(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("..", "tests", "e2e", "testdata", "anthropic", "*.json"))
	for _, p := range files {
		if data, err := os.ReadFile(p); err == nil {
			f.Add(string(data))
		}
	}
	f.Add(`{"max_tokens":1,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"f","input":{}}]}]}`)
	f.Fuzz(func(t *testing.T, body string) {
		r, err := decodeAnthropic(body, false)
		if err != nil {
			if err.Status != 400 {
				t.Fatalf("status %d", err.Status)
			}
			return
		}
		if !json.Valid(r.chat.messages) || (r.chat.tools != nil && !json.Valid(r.chat.tools)) {
			t.Fatalf("invalid JSON: %s %s", r.chat.messages, r.chat.tools)
		}
	})
}
