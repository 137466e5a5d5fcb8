package plugins

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/infernix/infernix/engine/toolcall"
	"github.com/infernix/infernix/server"
)

func load(t testing.TB, dir string, opts Options) *Host {
	t.Helper()
	h, err := Load(dir, opts)
	if err != nil {
		t.Fatalf("Load(%s): %v", dir, err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

func req(model, key string) *server.HookRequest {
	return &server.HookRequest{Model: model, APIKey: key, MaxTokens: -1, ThinkingBudget: -1,
		Messages: []server.HookMessage{{Role: "user", Content: "hi"}}}
}

func TestMisbehaving(t *testing.T) {
	h := load(t, "testdata/bad", Options{Timeout: 100 * time.Millisecond})
	for _, c := range []struct{ model, want string }{
		{"loop", "context deadline exceeded"},
		{"raise", "bad.lua:6: boom"},
		{"wrong", "on_request returned a number"},
		{"deep", "stack overflow"},
		{"big", ""}, // registry limit or timeout: either way an error
	} {
		start := time.Now()
		rej, err := h.FilterRequest(req(c.model, ""))
		if err == nil || rej != nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "plugin bad: on_request") {
			t.Errorf("%s: rej=%v err=%v, want an error holding %q", c.model, rej, err, c.want)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%s took %s", c.model, d)
		}
	}
	// The host still works after every failure.
	if rej, err := h.FilterRequest(req("fine", "")); err != nil || rej != nil {
		t.Fatalf("after failures: %v %v", rej, err)
	}
}

func TestNoFileAccess(t *testing.T) {
	h := load(t, "testdata/readfile", Options{})
	for _, m := range []string{"io", "dofile", "os"} {
		rej, err := h.FilterRequest(req(m, ""))
		if err == nil || rej != nil || !(strings.Contains(err.Error(), "nil") || strings.Contains(err.Error(), "non-function")) {
			t.Errorf("%s: rej=%+v err=%v, want an error about a missing global", m, rej, err)
		}
	}
}

func TestLoadError(t *testing.T) {
	if _, err := Load("testdata/syntax", Options{}); err == nil || !strings.Contains(err.Error(), "broken.lua") {
		t.Fatalf("err = %v", err)
	}
	if _, err := Load("testdata/none", Options{}); err == nil {
		t.Fatal("a missing directory loaded")
	}
}

// TestQuota drives the shipped quota plugin: usage counted from
// on_complete, a 429 once the key's limit is reached, other keys unaffected,
// and the usage endpoint.
func TestQuota(t *testing.T) {
	h := load(t, "../scripts/plugins", Options{LineFile: filepath.Join(t.TempDir(), "audit.log")})
	r := req("m", "demo-key")
	for i := 0; i < 3; i++ {
		if rej, err := h.FilterRequest(r); err != nil || rej != nil {
			t.Fatalf("request %d: %+v %v", i, rej, err)
		}
		if err := h.ObserveCompletion(r, &server.HookResponse{PromptTokens: 500, CompletionTokens: 300, Finish: "stop"}); err != nil {
			t.Fatal(err)
		}
	}
	rej, err := h.FilterRequest(r)
	if err != nil || rej == nil || rej.Status != 429 || !strings.Contains(rej.Message, "quota of 2000 exceeded (2400 used)") {
		t.Fatalf("over quota: %+v %v", rej, err)
	}
	if rej, err := h.FilterRequest(req("m", "other")); err != nil || rej != nil {
		t.Fatalf("other key: %+v %v", rej, err)
	}
	resp, found, err := h.ServePlugin(&server.PluginRequest{Plugin: "quota", Path: "/usage", Method: "GET", APIKey: "demo-key"})
	if err != nil || !found || resp.Status != 200 || resp.ContentType != "application/json" ||
		!strings.Contains(string(resp.Body), `"key_used":2400`) || !strings.Contains(string(resp.Body), `"limit":2000`) {
		t.Fatalf("usage: %+v %s %v %v", resp, resp.Body, found, err)
	}
	if _, found, _ := h.ServePlugin(&server.PluginRequest{Plugin: "quota", Path: "/usage", Method: "POST"}); found {
		t.Fatal("POST /usage found")
	}
	if _, found, _ := h.ServePlugin(&server.PluginRequest{Plugin: "nope", Path: "/", Method: "GET"}); found {
		t.Fatal("unknown plugin found")
	}
}

func TestAuditLines(t *testing.T) {
	file := filepath.Join(t.TempDir(), "audit.log")
	h := load(t, "../scripts/plugins", Options{LineFile: file})
	for i := 0; i < 5; i++ {
		err := h.ObserveCompletion(req("claude-x", "secret-key"), &server.HookResponse{PromptTokens: 3, CompletionTokens: 4,
			Finish: "tool_calls", ToolCalls: []toolcall.Call{{Name: "f", Arguments: "{}"}}})
		if err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 5 || !strings.Contains(lines[0], `"calls":1`) || !strings.Contains(lines[0], `"key":"secr..."`) ||
		strings.Contains(lines[0], "secret-key") || !strings.Contains(lines[0], `"completion_tokens":4`) {
		t.Fatalf("audit file:\n%s", b)
	}
	resp, _, err := h.ServePlugin(&server.PluginRequest{Plugin: "audit", Path: "/count", Method: "GET"})
	if err != nil || string(resp.Body) != "5" {
		t.Fatalf("count: %s %v", resp.Body, err)
	}
}

// TestConcurrent: 100 concurrent requests share the counters through kv
// (run with -race).
func TestConcurrent(t *testing.T) {
	h := load(t, "../scripts/plugins", Options{})
	var wg sync.WaitGroup
	for i := 0; i < 100; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := req("m", "k")
			if _, err := h.FilterRequest(r); err != nil {
				t.Error(err)
			}
			if err := h.ObserveCompletion(r, &server.HookResponse{PromptTokens: 1, CompletionTokens: 1}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	resp, _, err := h.ServePlugin(&server.PluginRequest{Plugin: "audit", Path: "/count", Method: "GET"})
	if err != nil || string(resp.Body) != "100" {
		t.Fatalf("count after 100 requests: %s %v", resp.Body, err)
	}
}

func TestTick(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "t.lua"), []byte(`
function on_tick(s) kv.incr("ticks", 1) end
handlers = { ["/ticks"] = function(r) return tostring(kv.get("ticks") or 0) end }
`), 0o644)
	h := load(t, dir, Options{})
	h.Tick(1)
	h.Tick(1)
	resp, found, err := h.ServePlugin(&server.PluginRequest{Plugin: "t", Path: "/ticks", Method: "PUT"})
	if err != nil || !found || string(resp.Body) != "2" {
		t.Fatalf("%s %v %v", resp.Body, found, err)
	}
}

// BenchmarkOnComplete: the target is ≤ 50 µs per on_complete.
func BenchmarkOnComplete(b *testing.B) {
	dir := b.TempDir()
	os.WriteFile(filepath.Join(dir, "q.lua"), []byte(`
function on_complete(request, response, usage) kv.incr("used/" .. request.api_key, usage.total_tokens) end
`), 0o644)
	h := load(b, dir, Options{})
	r := req("m", "k")
	resp := &server.HookResponse{Content: "hello", PromptTokens: 10, CompletionTokens: 20}
	b.ReportAllocs()
	for b.Loop() {
		if err := h.ObserveCompletion(r, resp); err != nil {
			b.Fatal(err)
		}
	}
}

// TestReload: a broken file keeps the previous plugins; a fixed one
// replaces them; Watch notices a change; kv state survives.
func TestReload(t *testing.T) {
	dir := t.TempDir()
	n := 0
	write := func(src string) {
		t.Helper()
		p := filepath.Join(dir, "v.lua")
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		n++
		now := time.Now().Add(time.Duration(n) * time.Second) // coarse mtimes
		os.Chtimes(p, now, now)
	}
	version := func(h *Host) string {
		resp, _, err := h.ServePlugin(&server.PluginRequest{Plugin: "v", Path: "/v", Method: "GET"})
		if err != nil {
			t.Fatal(err)
		}
		return string(resp.Body)
	}
	write(`kv.incr("loads", 1); handlers = { ["/v"] = function(r) return "one " .. kv.get("loads") end }`)
	h := load(t, dir, Options{})
	write(`handlers = { ["/v"] = function(r) return "two" end`)
	if err := h.Reload(); err == nil {
		t.Fatal("a broken plugin reloaded")
	}
	if v := version(h); v != "one 1" {
		t.Fatalf("after a failed reload: %q", v)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { h.Watch(ctx, 5*time.Millisecond); close(done) }()
	write(`kv.incr("loads", 1); handlers = { ["/v"] = function(r) return "three " .. kv.get("loads") end }`)
	deadline := time.Now().Add(5 * time.Second)
	for version(h) != "three 2" {
		if time.Now().After(deadline) {
			t.Fatalf("watch did not reload: %q", version(h))
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done
}
