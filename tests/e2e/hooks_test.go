package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

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
