package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// anthBlock is a content block assembled from an Anthropic stream.
type anthBlock struct {
	Type, Text, Thinking, Signature, ID, Name, Input string
}

type anthMessage struct {
	blocks       []anthBlock
	stopReason   string
	stopSequence string
	usage        gjson.Result
	inputTokens  int64 // from message_start
}

// assembleAnthropic checks the event grammar of a Messages stream
// (message_start, ping, then per block start / deltas / stop in index
// order, message_delta, message_stop) and assembles the message.
func assembleAnthropic(t *testing.T, evs []sseEvent) anthMessage {
	t.Helper()
	var m anthMessage
	if len(evs) < 4 || evs[0].name != "message_start" || evs[1].name != "ping" ||
		evs[len(evs)-2].name != "message_delta" || evs[len(evs)-1].name != "message_stop" {
		t.Fatalf("event order: %s", eventNames(evs))
	}
	start := evs[0].data.Get("message")
	if !strings.HasPrefix(start.Get("id").Str, "msg_") || start.Get("role").Str != "assistant" || start.Get("content").Raw != "[]" {
		t.Fatalf("message_start: %s", evs[0].data.Raw)
	}
	m.inputTokens = start.Get("usage.input_tokens").Int()
	open := -1
	for _, ev := range evs[2 : len(evs)-2] {
		idx := int(ev.data.Get("index").Int())
		switch ev.name {
		case "content_block_start":
			if open != -1 || idx != len(m.blocks) {
				t.Fatalf("content_block_start %d with block %d open: %s", idx, open, eventNames(evs))
			}
			open = idx
			cb := ev.data.Get("content_block")
			m.blocks = append(m.blocks, anthBlock{Type: cb.Get("type").Str, ID: cb.Get("id").Str, Name: cb.Get("name").Str})
		case "content_block_delta":
			if idx != open {
				t.Fatalf("delta for block %d, open %d", idx, open)
			}
			b := &m.blocks[idx]
			d := ev.data.Get("delta")
			switch want := map[string]string{"text_delta": "text", "thinking_delta": "thinking", "signature_delta": "thinking",
				"input_json_delta": "tool_use"}[d.Get("type").Str]; {
			case want != b.Type:
				t.Fatalf("%s in a %s block", d.Get("type").Str, b.Type)
			}
			b.Text += d.Get("text").Str
			b.Thinking += d.Get("thinking").Str
			b.Signature += d.Get("signature").Str
			b.Input += d.Get("partial_json").Str
		case "content_block_stop":
			if idx != open {
				t.Fatalf("stop for block %d, open %d", idx, open)
			}
			open = -1
		default:
			t.Fatalf("unexpected event %s inside the message", ev.name)
		}
	}
	if open != -1 {
		t.Fatalf("block %d not stopped", open)
	}
	md := evs[len(evs)-2].data
	m.stopReason = md.Get("delta.stop_reason").Str
	m.stopSequence = md.Get("delta.stop_sequence").Str
	m.usage = md.Get("usage")
	return m
}

// blocksOf reads a non-streamed message's content in the same form.
func blocksOf(r gjson.Result) []anthBlock {
	var out []anthBlock
	for _, b := range r.Get("content").Array() {
		out = append(out, anthBlock{Type: b.Get("type").Str, Text: b.Get("text").Str, Thinking: b.Get("thinking").Str,
			Signature: b.Get("signature").Str, ID: b.Get("id").Str, Name: b.Get("name").Str, Input: b.Get("input").Raw})
	}
	return out
}

var anthHeaders = []string{"anthropic-version", "2023-06-01"}

func TestAnthropicMessages(t *testing.T) {
	ts := shared(t)
	body := map[string]any{"model": "claude-sonnet-4-5", "max_tokens": 8, "temperature": 0,
		"system":   []map[string]any{{"type": "text", "text": "Be brief.", "cache_control": map[string]any{"type": "ephemeral"}}},
		"messages": []map[string]any{{"role": "user", "content": "Hello, who are you?"}}}
	st, _, r := post(t, ts.URL+"/v1/messages", body, anthHeaders...)
	if st != 200 {
		t.Fatalf("%d %s", st, r.Raw)
	}
	if r.Get("type").Str != "message" || r.Get("role").Str != "assistant" || !strings.HasPrefix(r.Get("id").Str, "msg_") ||
		r.Get("model").Str != "claude-sonnet-4-5" {
		t.Errorf("message head: %s", r.Raw)
	}
	blocks := blocksOf(r)
	if len(blocks) != 1 || blocks[0].Type != "text" || blocks[0].Text == "" {
		t.Fatalf("content: %s", r.Get("content").Raw)
	}
	// The random model never ends on its own: 8 tokens, cut.
	u := r.Get("usage")
	if r.Get("stop_reason").Str != "max_tokens" || u.Get("output_tokens").Int() != 8 || u.Get("input_tokens").Int() < 5 ||
		!u.Get("cache_read_input_tokens").Exists() {
		t.Errorf("stop/usage: %s", r.Raw)
	}

	// Streaming assembles to the same message.
	body["stream"] = true
	m := assembleAnthropic(t, namedEvents(t, ts.URL+"/v1/messages", body, anthHeaders...))
	if len(m.blocks) != 1 || m.blocks[0] != blocks[0] || m.stopReason != "max_tokens" || m.usage.Get("output_tokens").Int() != 8 {
		t.Errorf("stream: %+v %s %s, want %+v", m.blocks, m.stopReason, m.usage.Raw, blocks)
	}
	// count_tokens counts the prompt the message was generated from.
	delete(body, "stream")
	st, _, c := post(t, ts.URL+"/v1/messages/count_tokens", body, anthHeaders...)
	if st != 200 || c.Get("input_tokens").Int() != m.inputTokens ||
		c.Get("input_tokens").Int() != u.Get("input_tokens").Int()+u.Get("cache_read_input_tokens").Int() {
		t.Errorf("count_tokens %d %s; message_start %d, usage %s", st, c.Raw, m.inputTokens, u.Raw)
	}
}

// TestAnthropicLongMaxTokens: a max_tokens beyond the context (Claude
// Code asks for 32000) is a cap, not an error.
func TestAnthropicLongMaxTokens(t *testing.T) {
	ts := shared(t)
	body := map[string]any{"max_tokens": 32000, "messages": userMsg("hi"), "stop_sequences": []string{" "}}
	if st, _, r := post(t, ts.URL+"/v1/messages", body); st != 200 || r.Get("stop_reason").Str != "stop_sequence" {
		t.Errorf("%d %s", st, r.Raw)
	}
}

func TestAnthropicStopSequence(t *testing.T) {
	ts := shared(t)
	body := map[string]any{"max_tokens": 12, "temperature": 0, "messages": userMsg("Hello, who are you?")}
	_, _, r := post(t, ts.URL+"/v1/messages", body)
	text := r.Get("content.0.text").Str
	// Stop at a piece of the greedy answer.
	words := strings.Fields(text)
	if len(words) < 3 {
		t.Skipf("answer %q too short to cut", text)
	}
	stop := words[2]
	body["stop_sequences"] = []string{stop}
	for _, stream := range []bool{false, true} {
		var got anthMessage
		if stream {
			body["stream"] = true
			got = assembleAnthropic(t, namedEvents(t, ts.URL+"/v1/messages", body))
		} else {
			_, _, r := post(t, ts.URL+"/v1/messages", body)
			got = anthMessage{blocks: blocksOf(r), stopReason: r.Get("stop_reason").Str, stopSequence: r.Get("stop_sequence").Str}
		}
		if got.stopReason != "stop_sequence" || got.stopSequence != stop || len(got.blocks) != 1 ||
			strings.Contains(got.blocks[0].Text, stop) || !strings.HasPrefix(text, got.blocks[0].Text) {
			t.Errorf("stream %v: stop %q: %+v %s %q", stream, stop, got.blocks, got.stopReason, got.stopSequence)
		}
	}
}

func TestAnthropicErrors(t *testing.T) {
	ts := shared(t)
	cases := []struct {
		name, body string
		status     int
		typ, msg   string
	}{
		{"no max_tokens", `{"messages":[{"role":"user","content":"hi"}]}`, 400, "invalid_request_error", "max_tokens is required"},
		{"bad role", `{"max_tokens":5,"messages":[{"role":"system","content":"hi"}]}`, 400, "invalid_request_error", "messages.0.role"},
		{"no messages", `{"max_tokens":5,"messages":[]}`, 400, "invalid_request_error", "messages must not be empty"},
		{"bad json", `{"max_tokens":`, 400, "invalid_request_error", "not valid JSON"},
		{"image", `{"max_tokens":5,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AA"}}]}]}`,
			400, "invalid_request_error", "text only"},
		{"forced unknown tool", `{"max_tokens":5,"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"a","input_schema":{"type":"object"}}],"tool_choice":{"type":"tool","name":"b"}}`,
			400, "invalid_request_error", "not in tools"},
		{"bad thinking", `{"max_tokens":5,"messages":[{"role":"user","content":"hi"}],"thinking":{"type":"sometimes"}}`, 400, "invalid_request_error", "thinking.type"},
	}
	for _, c := range cases {
		st, _, r := post(t, ts.URL+"/v1/messages", c.body, anthHeaders...)
		if st != c.status || r.Get("type").Str != "error" || r.Get("error.type").Str != c.typ || !strings.Contains(r.Get("error.message").Str, c.msg) {
			t.Errorf("%s: %d %s", c.name, st, r.Raw)
		}
	}
	// Unknown routes under /v1/messages answer in Anthropic's shape too.
	st, _, r := post(t, ts.URL+"/v1/messages/nope", `{}`)
	if st != 404 || r.Get("error.type").Str != "not_found_error" {
		t.Errorf("unknown route: %d %s", st, r.Raw)
	}
}

func TestAnthropicAuthAndModelNames(t *testing.T) {
	ts := start(t, opts{server: serverCfg(func(c *serverConfig) {
		c.APIKeys = []string{"k"}
		c.ModelName = "qwen-tiny"
		c.ModelAliases = []string{"claude-sonnet-4-5"}
	})})
	defer ts.close()
	body := map[string]any{"model": "claude-sonnet-4-5", "max_tokens": 2, "messages": userMsg("hi")}
	if st, _, r := post(t, ts.URL+"/v1/messages", body, "x-api-key", "wrong"); st != 401 || r.Get("error.type").Str != "authentication_error" {
		t.Errorf("wrong key: %d %s", st, r.Raw)
	}
	if st, _, r := post(t, ts.URL+"/v1/messages", body, "x-api-key", "k"); st != 200 || r.Get("model").Str != "claude-sonnet-4-5" {
		t.Errorf("alias: %d %s", st, r.Raw)
	}
	body["model"] = "gpt-4o"
	if st, _, r := post(t, ts.URL+"/v1/messages", body, "x-api-key", "k"); st != 404 || r.Get("error.type").Str != "not_found_error" {
		t.Errorf("unknown model: %d %s", st, r.Raw)
	}
	if st, _, r := post(t, ts.URL+"/v1/responses", map[string]any{"model": "gpt-4o", "input": "hi"}, "Authorization", "Bearer k"); st != 404 ||
		r.Get("error.code").Str != "model_not_found" {
		t.Errorf("unknown model (responses): %d %s", st, r.Raw)
	}
	any := start(t, opts{server: serverCfg(func(c *serverConfig) { c.ModelName = "qwen-tiny"; c.AnyModelName = true })})
	defer any.close()
	if st, _, r := post(t, any.URL+"/v1/messages", body); st != 200 || r.Get("model").Str != "gpt-4o" {
		t.Errorf("any model name: %d %s", st, r.Raw)
	}
}

// TestAnthropicFixtures sends requests in the shapes Claude Code sends
// (testdata/anthropic/*.json: system blocks with cache_control, many
// tools, server tools, tool results with is_error, thinking, metadata) and
// requires each to be answered, whole and streamed.
func TestAnthropicFixtures(t *testing.T) {
	ts := shared(t)
	files, _ := filepath.Glob(filepath.Join("testdata", "anthropic", "*.json"))
	if len(files) == 0 {
		t.Fatal("no fixtures in testdata/anthropic")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var body map[string]any
			if err := json.Unmarshal(data, &body); err != nil {
				t.Fatal(err)
			}
			body["max_tokens"] = 6 // keep the random model short
			delete(body, "stream")
			st, _, r := post(t, ts.URL+"/v1/messages", body, anthHeaders...)
			if st != 200 || r.Get("type").Str != "message" {
				t.Fatalf("%d %s", st, r.Raw)
			}
			body["stream"] = true
			m := assembleAnthropic(t, namedEvents(t, ts.URL+"/v1/messages", body, anthHeaders...))
			if m.stopReason == "" {
				t.Errorf("no stop reason")
			}
			if st, _, r := post(t, ts.URL+"/v1/messages/count_tokens", body, anthHeaders...); st != 200 || r.Get("input_tokens").Int() < 50 {
				t.Errorf("count_tokens: %d %s", st, r.Raw)
			}
		})
	}
}

// anthropicTools are the demo tools in Anthropic's form.
func anthropicTools() []map[string]any {
	var out []map[string]any
	for _, t := range demoTools {
		fn := t["function"].(map[string]any)
		out = append(out, map[string]any{"name": fn["name"], "description": fn["description"], "input_schema": fn["parameters"]})
	}
	return out
}

// TestDemoAnthropic: with the trained demo models, a weather question is
// answered with a tool_use block (whole and streamed), the tool result
// with an answer that uses it, and thinking enabled gives a signed
// thinking block first.
func TestDemoAnthropic(t *testing.T) {
	forEachDemo(t, func(t *testing.T, ts *testServer) {
		q := []map[string]any{{"role": "user", "content": "What's the weather in Paris?"}}
		body := map[string]any{"model": "m", "max_tokens": 200, "temperature": 0, "tools": anthropicTools(), "messages": q}
		_, _, r := post(t, ts.URL+"/v1/messages", body, anthHeaders...)
		blocks := blocksOf(r)
		last := blocks[len(blocks)-1]
		if r.Get("stop_reason").Str != "tool_use" || last.Type != "tool_use" || last.Name != "get_weather" ||
			!strings.HasPrefix(last.ID, "toolu_") || gjson.Get(last.Input, "city").Str != "Paris" {
			t.Fatalf("want a get_weather tool_use: %s", r.Raw)
		}
		body["stream"] = true
		m := assembleAnthropic(t, namedEvents(t, ts.URL+"/v1/messages", body, anthHeaders...))
		sl := m.blocks[len(m.blocks)-1]
		if m.stopReason != "tool_use" || sl.Type != "tool_use" || sl.Name != "get_weather" || gjson.Get(sl.Input, "city").Str != "Paris" {
			t.Errorf("streamed: %+v %s", m.blocks, m.stopReason)
		}
		delete(body, "stream")

		// The round trip: the call and its result go back as blocks.
		body["messages"] = []map[string]any{q[0],
			{"role": "assistant", "content": []map[string]any{{"type": "tool_use", "id": last.ID, "name": "get_weather",
				"input": json.RawMessage(last.Input)}}},
			{"role": "user", "content": []map[string]any{{"type": "tool_result", "tool_use_id": last.ID,
				"content": []map[string]any{{"type": "text", "text": `{"city": "Paris", "temperature": 18, "unit": "celsius", "condition": "sunny"}`}}}}},
		}
		_, _, r = post(t, ts.URL+"/v1/messages", body, anthHeaders...)
		if text := r.Get("content.0.text").Str; r.Get("stop_reason").Str != "end_turn" || !strings.Contains(text, "18") {
			t.Errorf("answer after the tool result: %s", r.Raw)
		}

		// Thinking on: a signed thinking block, then the answer; off: none.
		sum := map[string]any{"max_tokens": 300, "temperature": 0, "messages": userMsg("What is 23 + 45?"),
			"thinking": map[string]any{"type": "enabled", "budget_tokens": 200}}
		_, _, r = post(t, ts.URL+"/v1/messages", sum)
		blocks = blocksOf(r)
		if len(blocks) != 2 || blocks[0].Type != "thinking" || blocks[0].Thinking == "" || blocks[0].Signature == "" ||
			blocks[1].Type != "text" || !strings.Contains(blocks[1].Text, "68") || strings.Contains(blocks[1].Text, "think>") {
			t.Errorf("thinking enabled: %s", r.Raw)
		}
		sum["stream"] = true
		m = assembleAnthropic(t, namedEvents(t, ts.URL+"/v1/messages", sum))
		if len(m.blocks) != 2 || m.blocks[0] != blocks[0] || m.blocks[1] != blocks[1] {
			t.Errorf("thinking streamed: %+v, want %+v", m.blocks, blocks)
		}
		delete(sum, "stream")
		sum["thinking"] = map[string]any{"type": "disabled"}
		_, _, r = post(t, ts.URL+"/v1/messages", sum)
		if blocks = blocksOf(r); len(blocks) != 1 || blocks[0].Type != "text" || !strings.Contains(blocks[0].Text, "68") {
			t.Errorf("thinking disabled: %s", r.Raw)
		}

		// A final assistant message is a prefill the answer continues.
		_, _, r = post(t, ts.URL+"/v1/messages", map[string]any{"max_tokens": 100, "temperature": 0, "messages": []map[string]any{
			{"role": "user", "content": "What is 23 + 45?"}, {"role": "assistant", "content": "23 + 45 ="}}})
		if text := r.Get("content.0.text").Str; !strings.HasPrefix(text, " 68") || r.Get("stop_reason").Str != "end_turn" {
			t.Errorf("prefill: %s", r.Raw)
		}
	})
}
