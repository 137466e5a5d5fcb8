package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/infernix/infernix/server/testmodel"
)

var (
	thinkOnce sync.Once
	thinkSrv  *testServer
)

// thinkingServer serves the tiny random model with the Qwen3.5 chat template,
// whose generation prompt opens <think> (with thinking on). The random model
// never emits </think> (its lm_head rows of added tokens are zero), so
// everything it writes is reasoning unless the engine closes the block at a
// thinking budget; and since its XML tool-call format is detected from the
// template, forced tool calls can be checked too.
func thinkingServer(t *testing.T) *testServer {
	t.Helper()
	thinkOnce.Do(func() {
		root, err := testmodel.RepoRoot()
		if err != nil {
			t.Fatal(err)
		}
		src, err := os.ReadFile(filepath.Join(root, "tests", "testdata", "chat-templates", "Qwen3.5-4B.jinja"))
		if err != nil {
			t.Fatal(err)
		}
		thinkSrv = start(t, opts{modelOpt: testmodel.Options{ChatTemplate: string(src)}})
		onClose(thinkSrv.close)
	})
	if thinkSrv == nil {
		t.Fatal("the thinking server failed to start")
	}
	return thinkSrv
}

func tokens(t *testing.T, ts *testServer, text string) int {
	t.Helper()
	_, _, r := post(t, ts.URL+"/tokenize", map[string]any{"prompt": text})
	return int(r.Get("count").Int())
}

func TestReasoningOpenInPrompt(t *testing.T) {
	ts := thinkingServer(t)
	st, _, r := post(t, ts.URL+"/v1/chat/completions", hello(map[string]any{"max_tokens": 12, "ignore_eos": true, "temperature": 0}))
	if st != 200 {
		t.Fatalf("%d %s", st, r.Raw)
	}
	msg := r.Get("choices.0.message")
	reasoning := msg.Get("reasoning_content").Str
	if reasoning == "" || msg.Get("content").Str != "" || msg.Get("reasoning").Str != reasoning {
		t.Errorf("the template opened <think>: all output must be reasoning: %s", msg.Raw)
	}
	// Streaming splits the same way.
	req := hello(map[string]any{"max_tokens": 12, "ignore_eos": true, "temperature": 0, "stream": true})
	d := assembleChat(t, streamEvents(t, ts.URL+"/v1/chat/completions", req))
	if d.reasoning != reasoning || d.content != "" {
		t.Errorf("streamed reasoning %q content %q, want reasoning %q", d.reasoning, d.content, reasoning)
	}
	// A stop string matches only the answer, never the thinking.
	stop := string([]rune(reasoning)[2:5])
	req = hello(map[string]any{"max_tokens": 12, "ignore_eos": true, "temperature": 0, "stop": stop})
	_, _, r = post(t, ts.URL+"/v1/chat/completions", req)
	if got := r.Get("choices.0.message.reasoning_content").Str; got != reasoning || r.Get("choices.0.finish_reason").Str != "length" {
		t.Errorf("stop %q cut the thinking: %s", stop, r.Get("choices.0").Raw)
	}
}

func TestThinkingDisabled(t *testing.T) {
	ts := thinkingServer(t)
	for _, extra := range []map[string]any{
		{"chat_template_kwargs": map[string]any{"enable_thinking": false}},
		{"reasoning_effort": "none"},
	} {
		body := hello(map[string]any{"max_tokens": 8, "ignore_eos": true})
		for k, v := range extra {
			body[k] = v
		}
		_, _, r := post(t, ts.URL+"/v1/chat/completions", body)
		msg := r.Get("choices.0.message")
		if msg.Get("content").Str == "" || msg.Get("reasoning_content").Exists() {
			t.Errorf("%v: thinking off must give content only: %s", extra, msg.Raw)
		}
	}
}

// thinkSplit runs a greedy request with log-probs as token ids and returns
// where the engine put </think>: the number of reasoning tokens before it
// (the forced close starts with "\n"), and the answer tokens after the
// forced close.
func thinkSplit(t *testing.T, ts *testServer, body map[string]any) (reasoning, answer int, msg gjson.Result) {
	t.Helper()
	body["ignore_eos"], body["temperature"], body["logprobs"], body["return_tokens_as_token_ids"] = true, 0, true, true
	_, _, r := post(t, ts.URL+"/v1/chat/completions", body)
	msg = r.Get("choices.0.message")
	lps := r.Get("choices.0.logprobs.content").Array()
	if int64(len(lps)) != r.Get("usage.completion_tokens").Int() {
		t.Fatalf("%d log-probs for %d tokens", len(lps), r.Get("usage.completion_tokens").Int())
	}
	closeTok := "token_id:" + strconv.Itoa(thinkCloseID)
	for i, lp := range lps {
		if lp.Get("token").Str == closeTok {
			if i == 0 || lps[i-1].Get("token").Str != "token_id:198" {
				t.Fatalf("</think> at %d not preceded by the forced newline", i)
			}
			return i - 1, len(lps) - i - 2, msg // "\n</think>\n\n": one token before, one after
		}
	}
	return len(lps), 0, msg
}

const thinkCloseID = 151668 // </think> in the Qwen3 vocabulary

// TestThinkingBudget: at the budget the engine closes the think block and
// the answer follows; a budget never takes the answer's room (thinking
// leaves at least a quarter of max_tokens to the answer).
func TestThinkingBudget(t *testing.T) {
	ts := thinkingServer(t)
	const forceClose = 3 // "\n", "</think>", "\n\n"
	cases := []struct {
		name          string
		body          map[string]any
		wantReasoning int
	}{
		{"thinking_budget", map[string]any{"max_tokens": 30, "thinking_budget": 5}, 5},
		{"max_thinking_tokens", map[string]any{"max_tokens": 30, "max_thinking_tokens": 3}, 3},
		// 100 does not fit 20 tokens: 20 - 20/4 - 3 = 12 for thinking.
		{"budget beyond max_tokens", map[string]any{"max_tokens": 20, "thinking_budget": 100}, 20 - 5 - forceClose},
		// reasoning_effort low is a budget of 512, cut to 16 - 4 - 3.
		{"reasoning_effort low", map[string]any{"max_tokens": 16, "reasoning_effort": "low"}, 16 - 4 - forceClose},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			body := hello(c.body)
			reasoning, answer, msg := thinkSplit(t, ts, body)
			maxTokens := c.body["max_tokens"].(int)
			if reasoning != c.wantReasoning || answer != maxTokens-reasoning-forceClose || answer < maxTokens/4 {
				t.Errorf("reasoning %d tokens (want %d), answer %d tokens of %d", reasoning, c.wantReasoning, answer, maxTokens)
			}
			if msg.Get("content").Str == "" || strings.Contains(msg.Get("content").Str, "</think>") || strings.Contains(msg.Get("reasoning_content").Str, "</think>") {
				t.Errorf("message %s", msg.Raw)
			}
			if (c.wantReasoning == 0) != (msg.Get("reasoning_content").Str == "") {
				t.Errorf("reasoning_content %q for %d reasoning tokens", msg.Get("reasoning_content").Str, c.wantReasoning)
			}
			whole := gjson.Parse(msg.Raw)
			body["stream"] = true
			d := assembleChat(t, streamEvents(t, ts.URL+"/v1/chat/completions", body))
			if d.reasoning != whole.Get("reasoning_content").Str || d.content != whole.Get("content").Str {
				t.Errorf("streamed (%q, %q) differs from whole %s", d.reasoning, d.content, whole.Raw)
			}
		})
	}
}

// TestZeroThinkingBudget: a budget of 0 means no thinking at all (the
// server renders with enable_thinking false, or closes the block itself).
func TestZeroThinkingBudget(t *testing.T) {
	ts := thinkingServer(t)
	n, _, msg := thinkSplit(t, ts, hello(map[string]any{"max_tokens": 10, "thinking_budget": 0}))
	if n != 10 || msg.Get("reasoning_content").Exists() || msg.Get("content").Str == "" {
		t.Errorf("budget 0: %d tokens before any </think>; message %s", n, msg.Raw)
	}
	_, _, p := post(t, ts.URL+"/apply-template", hello(map[string]any{"thinking_budget": 0}))
	if !strings.HasSuffix(p.Get("prompt").Str, "<think>\n\n</think>\n\n") {
		t.Errorf("budget 0 prompt ends %q", p.Get("prompt").Str)
	}
}

func TestDefaultThinkingBudget(t *testing.T) {
	root, _ := testmodel.RepoRoot()
	src, err := os.ReadFile(filepath.Join(root, "tests", "testdata", "chat-templates", "Qwen3.5-4B.jinja"))
	if err != nil {
		t.Fatal(err)
	}
	ts := start(t, opts{modelOpt: testmodel.Options{ChatTemplate: string(src)},
		server: serverCfg(func(c *serverConfig) { c.DefaultThinkingBudget = 4 })})
	defer ts.close()
	if n, _, msg := thinkSplit(t, ts, hello(map[string]any{"max_tokens": 24})); n != 4 {
		t.Errorf("server default budget 4: %d reasoning tokens: %s", n, msg.Raw)
	}
	// A request's own budget wins over the default.
	if n, _, msg := thinkSplit(t, ts, hello(map[string]any{"max_tokens": 24, "thinking_budget": 10})); n != 10 {
		t.Errorf("request budget 10: %d reasoning tokens: %s", n, msg.Raw)
	}
}

// TestForcedToolCall: tool_choice naming a function makes the reply a call
// to it even from a random model (the server opens the call in the prompt);
// parallel_tool_calls false ends the reply after that call.
func TestForcedToolCall(t *testing.T) {
	ts := thinkingServer(t)
	tools := []map[string]any{{"type": "function", "function": map[string]any{"name": "get_weather",
		"parameters": map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}}}}
	body := hello(map[string]any{"max_tokens": 20, "ignore_eos": true, "temperature": 0, "tools": tools,
		"tool_choice":         map[string]any{"type": "function", "function": map[string]any{"name": "get_weather"}},
		"parallel_tool_calls": false})
	_, _, r := post(t, ts.URL+"/v1/chat/completions", body)
	ch := r.Get("choices.0")
	call := ch.Get("message.tool_calls.0")
	if call.Get("function.name").Str != "get_weather" || !strings.HasPrefix(call.Get("id").Str, "call_") ||
		call.Get("type").Str != "function" || ch.Get("finish_reason").Str != "tool_calls" || ch.Get("message.tool_calls.#").Int() != 1 {
		t.Fatalf("forced call: %s", ch.Raw)
	}
	body["stream"] = true
	d := assembleChat(t, streamEvents(t, ts.URL+"/v1/chat/completions", body))
	if len(d.calls) != 1 || d.calls[0].name != "get_weather" || d.calls[0].args != call.Get("function.arguments").Str || d.finish != "tool_calls" {
		t.Errorf("streamed forced call %+v (finish %s), whole %s", d.calls, d.finish, call.Raw)
	}
	// tool_choice none: no call, tools are not even offered to the model.
	body = hello(map[string]any{"tools": tools, "tool_choice": "none", "max_tokens": 4})
	_, _, r = post(t, ts.URL+"/v1/chat/completions", body)
	if r.Get("choices.0.message.tool_calls").Exists() {
		t.Errorf("tool_choice none produced a call: %s", r.Raw)
	}
	_, _, p := post(t, ts.URL+"/apply-template", map[string]any{"messages": body["messages"], "tools": tools, "tool_choice": "none"})
	if strings.Contains(p.Get("prompt").Str, "get_weather") {
		t.Errorf("tool_choice none still rendered the tools")
	}
}
