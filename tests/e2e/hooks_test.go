package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/infernix/infernix/plugins"
	"github.com/infernix/infernix/script"
	"github.com/infernix/infernix/server"
	"github.com/infernix/infernix/server/testmodel"
)

// shippedDir is scripts/SUB in the repository.
func shippedDir(t *testing.T, sub string) string {
	t.Helper()
	root, err := testmodel.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, "scripts", sub)
}

// copyDir copies the shipped files of src into a temporary directory,
// applying edits (old → new) to each file's text.
func copyDir(t *testing.T, src string, edits ...string) string {
	t.Helper()
	dst := t.TempDir()
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		for i := 0; i+1 < len(edits); i += 2 {
			s = strings.ReplaceAll(s, edits[i], edits[i+1])
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// hooksFor loads a scripts and a plugins directory ("" = none) into the
// server's hooks, as cmd/infernix does.
func hooksFor(t *testing.T, scripts, plugs string) *server.Hooks {
	t.Helper()
	h := &server.Hooks{}
	if scripts != "" {
		e, err := script.Load(scripts, script.Options{})
		if err != nil {
			t.Fatal(err)
		}
		h.Router, h.Thinking, h.Sampling, h.Grammar, h.Tools, h.Editor = e, e, e, e, e, e
	}
	if plugs != "" {
		p, err := plugins.Load(plugs, plugins.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		h.Filters, h.Observers, h.HTTP = []server.RequestFilter{p}, []server.CompletionObserver{p}, p
	}
	return h
}

// TestHooksRouting: with the shipped routes (made strict), claude-* and
// gpt-* names are served by the model, unknown names get the route's 404,
// and a hook that raises fails only its request with a 500 naming the hook
// and file:line.
func TestHooksRouting(t *testing.T) {
	dir := copyDir(t, shippedDir(t, "hooks"), "STRICT = False", "STRICT = True")
	os.WriteFile(filepath.Join(dir, "boom.star"), []byte("def sampling(request):\n    if request.user == \"boom\":\n        fail(\"kaboom\")\n    return None\n"), 0o644)
	ts := start(t, opts{server: server.Config{ModelName: "qwen-tiny", Hooks: hooksFor(t, dir, "")}})
	defer ts.close()
	url := ts.URL + "/v1/chat/completions"
	for _, model := range []string{"claude-sonnet-4-5", "gpt-4o", "qwen-tiny"} {
		st, _, r := post(t, url, hello(map[string]any{"model": model, "max_tokens": 3}))
		if st != 200 || r.Get("choices.0.message").Raw == "" {
			t.Errorf("model %s: %d %s", model, st, r.Raw)
		}
	}
	st, _, r := post(t, url, hello(map[string]any{"model": "llama-3", "max_tokens": 3}))
	if st != 404 || !strings.Contains(r.Get("error.message").Str, "not served here") {
		t.Errorf("unrouted model: %d %s", st, r.Raw)
	}
	st, _, r = post(t, url, hello(map[string]any{"model": "qwen-tiny", "max_tokens": 3, "user": "boom"}))
	if msg := r.Get("error.message").Str; st != 500 || r.Get("error.type").Str != "server_error" ||
		!strings.Contains(msg, "sampling") || !strings.Contains(msg, "boom.star:3") || !strings.Contains(msg, "kaboom") {
		t.Errorf("raising hook: %d %s", st, r.Raw)
	}
	if st, _, _ := post(t, url, hello(map[string]any{"model": "qwen-tiny", "max_tokens": 3})); st != 200 {
		t.Errorf("after a failed hook the server answers %d", st)
	}
}

// TestHooksToolParserMatchesBuiltin: on the trained XML demo model, the
// shipped Starlark parser yields the same calls and content as the
// built-in one, whole and streamed.
func TestHooksToolParserMatchesBuiltin(t *testing.T) {
	dir := demoModel(t, "demo-xml", true)
	builtin := start(t, opts{model: dir})
	defer builtin.close()
	scripted := start(t, opts{model: dir, server: server.Config{Hooks: hooksFor(t, shippedDir(t, "hooks"), "")}})
	defer scripted.close()
	if f := scripted.S.ToolFormat().String(); f != "xml" {
		t.Fatalf("demo-xml serves tool format %s, want xml (the format the shipped parser handles)", f)
	}
	for _, q := range []string{"What's the weather in Paris?", "What's the weather in Tokyo in fahrenheit?", "What is 12 * (3 + 4)?", "What is the capital of France?"} {
		body := map[string]any{"messages": userMsg(q), "tools": demoTools, "max_tokens": 200, "temperature": 0}
		_, _, a := post(t, builtin.URL+"/v1/chat/completions", body)
		_, _, b := post(t, scripted.URL+"/v1/chat/completions", body)
		ma, mb := a.Get("choices.0.message"), b.Get("choices.0.message")
		if ma.Get("content").Raw != mb.Get("content").Raw || a.Get("choices.0.finish_reason").Str != b.Get("choices.0.finish_reason").Str {
			t.Errorf("%s: content/finish differ:\n builtin %s\nscripted %s", q, a.Get("choices.0").Raw, b.Get("choices.0").Raw)
		}
		ca, cb := ma.Get("tool_calls").Array(), mb.Get("tool_calls").Array()
		if len(ca) != len(cb) {
			t.Fatalf("%s: %d calls vs %d", q, len(ca), len(cb))
		}
		if strings.Contains(q, "weather") && len(ca) == 0 {
			t.Fatalf("%s: the demo model made no call: %s", q, a.Get("choices.0").Raw)
		}
		for i := range ca {
			if ca[i].Get("function").Raw != cb[i].Get("function").Raw {
				t.Errorf("%s: call %d: %s vs %s", q, i, ca[i].Get("function").Raw, cb[i].Get("function").Raw)
			}
		}
		body["stream"] = true
		d := assembleChat(t, streamEvents(t, scripted.URL+"/v1/chat/completions", body))
		if len(d.calls) != len(ca) || d.content != ma.Get("content").Str {
			t.Errorf("%s: streamed %+v %q", q, d.calls, d.content)
		}
		for i := range d.calls {
			if d.calls[i].name != ca[i].Get("function.name").Str || d.calls[i].args != ca[i].Get("function.arguments").Str {
				t.Errorf("%s: streamed call %d %+v", q, i, d.calls[i])
			}
		}
	}
}

// TestHooksQuotaAndResponse: the shipped quota plugin answers 429 once a
// key's tokens are spent, shows usage under /plugins/quota/usage, and an
// on_response hook edits the reply.
func TestHooksQuotaAndResponse(t *testing.T) {
	plugs := copyDir(t, shippedDir(t, "plugins"), `["demo-key"] = 2000`, `["demo-key"] = 5`)
	scripts := t.TempDir()
	os.WriteFile(filepath.Join(scripts, "edit.star"), []byte(
		"def on_response(request, response):\n    return {\"content\": \"edited:\" + response.finish_reason, \"tags\": {\"k\": \"v\"}}\n"), 0o644)
	ts := start(t, opts{server: server.Config{Hooks: hooksFor(t, scripts, plugs)}})
	defer ts.close()
	url := ts.URL + "/v1/chat/completions"
	st, _, r := post(t, url, hello(map[string]any{"max_tokens": 3}), "x-api-key", "demo-key")
	if st != 200 || r.Get("choices.0.message.content").Str != "edited:length" {
		t.Fatalf("first request: %d %s", st, r.Raw)
	}
	st, hdr, r := post(t, url, hello(map[string]any{"max_tokens": 3}), "x-api-key", "demo-key")
	if st != 429 || r.Get("error.type").Str != "rate_limit_error" || !strings.Contains(r.Get("error.message").Str, "daily token quota of 5") || hdr.Get("Retry-After") == "" {
		t.Fatalf("over quota: %d %s", st, r.Raw)
	}
	if st, _, _ := post(t, url, hello(map[string]any{"max_tokens": 3}), "x-api-key", "other-key"); st != 200 {
		t.Errorf("another key: %d", st)
	}
	st, body := get(t, ts.URL+"/plugins/quota/usage", "x-api-key", "demo-key")
	if st != 200 || !strings.Contains(string(body), `"limit":5`) {
		t.Errorf("usage endpoint: %d %s", st, body)
	}
	if st, _ := get(t, ts.URL+"/plugins/quota/nothing"); st != 404 {
		t.Errorf("unknown plugin path: %d", st)
	}
}

// TestHooksConcurrent: 100 concurrent requests, streamed and not, through
// every shipped hook and plugin (run with -race).
func TestHooksConcurrent(t *testing.T) {
	ts := start(t, opts{lanes: 8, queue: 200, server: server.Config{
		Hooks: hooksFor(t, shippedDir(t, "hooks"), shippedDir(t, "plugins"))}})
	defer ts.close()
	var wg sync.WaitGroup
	for i := 0; i < 100; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			body := hello(map[string]any{"model": []string{"claude-x", "gpt-4o", "qwen"}[i%3], "max_tokens": 2,
				"reasoning_effort": []string{"low", "high"}[i%2]})
			if i%4 == 0 {
				body["stream"] = true
				d := assembleChat(t, streamEvents(t, ts.URL+"/v1/chat/completions", body))
				if d.finish == "" {
					t.Errorf("request %d: no finish", i)
				}
				return
			}
			if st, _, r := post(t, ts.URL+"/v1/chat/completions", body, "x-api-key", "k"); st != 200 {
				t.Errorf("request %d: %d %s", i, st, r.Raw)
			}
		}(i)
	}
	wg.Wait()
	if st, body := get(t, ts.URL+"/plugins/audit/count"); st != 200 || string(body) != "100" {
		t.Errorf("audit count: %d %s", st, body)
	}
}

// BenchmarkChatHooks compares request throughput with every shipped hook
// and plugin on against none (the target: within 5%). Each
// iteration is one short non-streamed chat request on the tiny model.
func BenchmarkChatHooks(b *testing.B) {
	for _, on := range []bool{false, true} {
		name := "off"
		if on {
			name = "on"
		}
		b.Run(name, func(b *testing.B) {
			var cfg server.Config
			if on {
				h := &server.Hooks{}
				e, err := script.Load(filepath.Join("..", "..", "scripts", "hooks"), script.Options{})
				if err != nil {
					b.Fatal(err)
				}
				p, err := plugins.Load(filepath.Join("..", "..", "scripts", "plugins"), plugins.Options{})
				if err != nil {
					b.Fatal(err)
				}
				defer p.Close()
				h.Router, h.Thinking, h.Sampling, h.Grammar, h.Tools, h.Editor = e, e, e, e, e, e
				h.Filters, h.Observers, h.HTTP = []server.RequestFilter{p}, []server.CompletionObserver{p}, p
				cfg.Hooks = h
			}
			ts := start(b, opts{lanes: 4, server: cfg})
			defer ts.close()
			body := hello(map[string]any{"model": "claude-x", "max_tokens": 4, "temperature": 0})
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if st, _, r := post(b, ts.URL+"/v1/chat/completions", body); st != 200 {
						b.Errorf("%d %s", st, r.Raw)
					}
				}
			})
		})
	}
}

// TestHooksSampling: a sampling hook's logit bias (by token text) and stop
// strings reach the sampler: a +100 bias makes every token "hello", and a
// hook stop string cuts the reply.
func TestHooksSampling(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "s.star"), []byte(`
def sampling(request):
    out = {"logit_bias": {"hello": 100}, "temperature": 1.0}
    if request.user == "stop":
        out["stop"] = ["lohel"]
    return out
`), 0o644)
	ts := start(t, opts{server: server.Config{Hooks: hooksFor(t, dir, "")}})
	defer ts.close()
	_, _, tok := post(t, ts.URL+"/tokenize", map[string]any{"prompt": "hello"})
	if n := len(tok.Get("tokens").Array()); n != 1 {
		t.Skipf("\"hello\" is %d tokens in this vocabulary", n)
	}
	_, _, r := post(t, ts.URL+"/v1/chat/completions", hello(map[string]any{"max_tokens": 3, "ignore_eos": true}))
	if c := r.Get("choices.0.message.content").Str; c != "hellohellohello" {
		t.Errorf("biased reply %q: %s", c, r.Raw)
	}
	_, _, r = post(t, ts.URL+"/v1/chat/completions", hello(map[string]any{"max_tokens": 3, "ignore_eos": true, "user": "stop"}))
	if c := r.Get("choices.0.message.content").Str; c != "hel" || r.Get("choices.0.finish_reason").Str != "stop" {
		t.Errorf("reply with a hook stop string %q: %s", c, r.Raw)
	}
}

// editScript is an on_response hook that marks the reply with its API and
// whether it was streamed, replaces the calls when the last message is
// "calls", and tags
// the request log line.
const editScript = `
def on_response(request, response):
    mode = "stream" if request.stream else "whole"
    out = {"content": "edited:%s:%s" % (request.endpoint, mode), "tags": {"edited": mode, "api": request.endpoint}}
    if request.messages[-1].content == "calls":
        out["content"] = ""
        out["tool_calls"] = [{"name": "get_weather", "arguments": {"city": "Paris"}}]
    return out
`

// requestLogLines reads the request log once it has n lines (a stream's
// line is written after its last event).
func requestLogLines(t *testing.T, path string, n int) []gjson.Result {
	t.Helper()
	var lines []gjson.Result
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		data, _ := os.ReadFile(path)
		lines = lines[:0]
		for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			if l != "" {
				lines = append(lines, gjson.Parse(l))
			}
		}
		if len(lines) >= n {
			break
		}
	}
	if len(lines) != n {
		t.Fatalf("request log has %d lines, want %d", len(lines), n)
	}
	return lines
}

// TestHooksResponseEditAllAPIs: an on_response edit (text, replaced tool
// calls) reaches chat, Anthropic Messages and Responses replies, whole and
// streamed (a streamed reply is held back until the hook ran), and its tags
// reach the request log line.
func TestHooksResponseEditAllAPIs(t *testing.T) {
	scripts := t.TempDir()
	os.WriteFile(filepath.Join(scripts, "edit.star"), []byte(editScript), 0o644)
	logPath := filepath.Join(t.TempDir(), "requests.jsonl")
	ts := start(t, opts{server: server.Config{Hooks: hooksFor(t, scripts, ""), RequestLog: logPath}})
	defer ts.close()

	// OpenAI chat.
	chatURL := ts.URL + "/v1/chat/completions"
	if st, _, r := post(t, chatURL, hello(map[string]any{"max_tokens": 3})); st != 200 ||
		r.Get("choices.0.message.content").Str != "edited:/v1/chat/completions:whole" {
		t.Errorf("chat: %d %s", st, r.Raw)
	}
	d := assembleChat(t, streamEvents(t, chatURL, hello(map[string]any{"max_tokens": 3, "stream": true})))
	if d.content != "edited:/v1/chat/completions:stream" || d.finish != "length" {
		t.Errorf("chat stream: %+v", d)
	}
	d = assembleChat(t, streamEvents(t, chatURL, map[string]any{"max_tokens": 3, "stream": true, "messages": userMsg("calls")}))
	if d.content != "" || len(d.calls) != 1 || d.calls[0].name != "get_weather" || d.calls[0].args != `{"city":"Paris"}` ||
		!strings.HasPrefix(d.calls[0].id, "call_") || d.finish != "tool_calls" {
		t.Errorf("chat stream, replaced calls: %+v", d)
	}

	// Anthropic Messages.
	anth := map[string]any{"model": "claude-sonnet-4-5", "max_tokens": 3,
		"messages": []map[string]any{{"role": "user", "content": "Hello"}}}
	st, _, r := post(t, ts.URL+"/v1/messages", anth, anthHeaders...)
	if b := blocksOf(r); st != 200 || len(b) != 1 || b[0].Text != "edited:/v1/messages:whole" || r.Get("stop_reason").Str != "max_tokens" {
		t.Errorf("anthropic: %d %s", st, r.Raw)
	}
	anth["stream"] = true
	m := assembleAnthropic(t, namedEvents(t, ts.URL+"/v1/messages", anth, anthHeaders...))
	if len(m.blocks) != 1 || m.blocks[0].Text != "edited:/v1/messages:stream" || m.stopReason != "max_tokens" {
		t.Errorf("anthropic stream: %+v %s", m.blocks, m.stopReason)
	}
	anth["stream"], anth["messages"] = false, userMsg("calls")
	st, _, r = post(t, ts.URL+"/v1/messages", anth, anthHeaders...)
	if b := blocksOf(r); st != 200 || len(b) != 1 || b[0].Type != "tool_use" || b[0].Name != "get_weather" ||
		b[0].Input != `{"city":"Paris"}` || r.Get("stop_reason").Str != "tool_use" {
		t.Errorf("anthropic, replaced calls: %d %s", st, r.Raw)
	}

	// OpenAI Responses.
	resp := map[string]any{"model": "gpt-5", "input": "Hello", "max_output_tokens": 3}
	st, _, r = post(t, ts.URL+"/v1/responses", resp)
	if it := itemsOf(r); st != 200 || len(it) != 1 || it[0].Text != "edited:/v1/responses:whole" {
		t.Errorf("responses: %d %s", st, r.Raw)
	}
	resp["stream"] = true
	items, final := assembleResponses(t, namedEvents(t, ts.URL+"/v1/responses", resp))
	if len(items) != 1 || items[0].Text != "edited:/v1/responses:stream" || itemsOf(final)[0].Text != items[0].Text {
		t.Errorf("responses stream: %+v %s", items, final.Raw)
	}
	resp["input"] = "calls"
	items, final = assembleResponses(t, namedEvents(t, ts.URL+"/v1/responses", resp))
	if len(items) != 1 || items[0].Type != "function_call" || items[0].Name != "get_weather" || items[0].Args != `{"city":"Paris"}` ||
		final.Get("status").Str != "completed" {
		t.Errorf("responses stream, replaced calls: %+v %s", items, final.Raw)
	}

	// Every line carries the hook's tags.
	lines := requestLogLines(t, logPath, 9)
	for i, l := range lines {
		mode := "whole"
		if l.Get("stream").Bool() {
			mode = "stream"
		}
		if l.Get("tags.edited").Str != mode || l.Get("tags.api").Str != l.Get("endpoint").Str {
			t.Errorf("log line %d: %s", i, l.Raw)
		}
	}
}

// TestHooksCompletions: /v1/completions runs the request-level hooks: a
// filter (the quota plugin) rejects, a route rejects by prompt and caps
// max_tokens by key, a sampling hook's logit bias applies, on_response
// edits the text, and on_complete counts the tokens.
func TestHooksCompletions(t *testing.T) {
	plugs := copyDir(t, shippedDir(t, "plugins"), `["demo-key"] = 2000`, `["demo-key"] = 5`)
	scripts := t.TempDir()
	os.WriteFile(filepath.Join(scripts, "c.star"), []byte(`
def route(request):
    if request.endpoint != "/v1/completions":
        return None
    if request.messages[0].content == "forbidden":
        return {"error": "no", "status": 403}
    if request.api_key == "cap":
        return {"max_tokens": 2}
    return None

def sampling(request):
    if request.user == "bias":
        return {"logit_bias": {"hello": 100}, "temperature": 1.0}
    return None

def on_response(request, response):
    if request.user == "edit":
        return {"content": "edited:" + response.content, "tool_calls": [{"name": "x", "arguments": "{}"}], "tags": {"t": "c"}}
    return None
`), 0o644)
	logPath := filepath.Join(t.TempDir(), "requests.jsonl")
	ts := start(t, opts{server: server.Config{Hooks: hooksFor(t, scripts, plugs), RequestLog: logPath}})
	defer ts.close()
	url := ts.URL + "/v1/completions"

	st, _, r := post(t, url, map[string]any{"prompt": "forbidden", "max_tokens": 3})
	if st != 403 || r.Get("error.code").Str != "rejected" {
		t.Errorf("route rejection: %d %s", st, r.Raw)
	}
	st, _, r = post(t, url, map[string]any{"prompt": "Hello", "max_tokens": 8, "ignore_eos": true}, "Authorization", "Bearer cap")
	if st != 200 || r.Get("usage.completion_tokens").Int() != 2 || r.Get("choices.0.finish_reason").Str != "length" {
		t.Errorf("route max_tokens: %d %s", st, r.Raw)
	}
	d := assembleCompletionText(t, streamEvents(t, url, map[string]any{"prompt": "Hello", "max_tokens": 8, "ignore_eos": true,
		"stream": true, "stream_options": map[string]any{"include_usage": true}}))
	if d == "" {
		t.Errorf("stream without a cap: no text")
	}
	st, _, r = post(t, url, map[string]any{"prompt": "Hello", "max_tokens": 2, "ignore_eos": true, "user": "edit"})
	text := r.Get("choices.0.text").Str
	if st != 200 || !strings.HasPrefix(text, "edited:") || len(text) <= len("edited:") || r.Get("choices.0.finish_reason").Str != "length" {
		t.Errorf("on_response: %d %s", st, r.Raw)
	}
	_, _, tok := post(t, ts.URL+"/tokenize", map[string]any{"prompt": "hello"})
	if len(tok.Get("tokens").Array()) == 1 {
		_, _, r = post(t, url, map[string]any{"prompt": "Hi", "max_tokens": 3, "ignore_eos": true, "user": "bias"})
		if c := r.Get("choices.0.text").Str; c != "hellohellohello" {
			t.Errorf("biased completion %q: %s", c, r.Raw)
		}
	}

	// The quota plugin: on_request rejects once on_complete counted 5 tokens.
	if st, _, r := post(t, url, map[string]any{"prompt": "Hello", "max_tokens": 4, "ignore_eos": true}, "x-api-key", "demo-key"); st != 200 {
		t.Fatalf("first quota request: %d %s", st, r.Raw)
	}
	st, hdr, r := post(t, url, map[string]any{"prompt": "Hello", "max_tokens": 4}, "x-api-key", "demo-key")
	if st != 429 || r.Get("error.type").Str != "rate_limit_error" || hdr.Get("Retry-After") == "" {
		t.Errorf("over quota: %d %s", st, r.Raw)
	}

	found := false
	for _, l := range requestLogLines(t, logPath, 8) {
		if l.Get("tags.t").Str == "c" {
			found = true
		} else if l.Get("tags").Exists() {
			t.Errorf("tags on an unedited line: %s", l.Raw)
		}
	}
	if !found {
		t.Errorf("no request log line has the on_response tags")
	}
}

// assembleCompletionText joins a streamed completion's text.
func assembleCompletionText(t *testing.T, events []string) string {
	t.Helper()
	var s strings.Builder
	for _, ev := range events[:len(events)-1] {
		r := gjson.Parse(ev)
		if r.Get("error").Exists() {
			t.Fatalf("stream error: %s", ev)
		}
		s.WriteString(r.Get("choices.0.text").Str)
	}
	return s.String()
}
