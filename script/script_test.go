package script

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/infernix/infernix/engine/toolcall"
	"github.com/infernix/infernix/server"
)

func load(t testing.TB, dir string, opts Options) *Engine {
	t.Helper()
	e, err := Load(dir, opts)
	if err != nil {
		t.Fatalf("Load(%s): %v", dir, err)
	}
	return e
}

func req(model string) *server.HookRequest {
	return &server.HookRequest{Endpoint: "/v1/chat/completions", Model: model, ServedModel: "qwen", APIKey: "k1",
		MaxTokens: -1, ThinkingBudget: -1, Messages: []server.HookMessage{{Role: "user", Content: "hi"}}}
}

func TestRoute(t *testing.T) {
	e := load(t, "testdata/basic", Options{MaxSteps: 100_000})
	seven, three, low := 7, 3, "low"
	cases := []struct {
		model   string
		want    server.RouteResult
		errLike string // a HookError whose text holds this
	}{
		{model: "qwen"},
		{model: "claude-sonnet-4", want: server.RouteResult{Model: "qwen"}},
		{model: "reject", want: server.RouteResult{Reject: &server.Rejection{Status: 429, Message: "quota exceeded"}}},
		{model: "over", want: server.RouteResult{MaxTokens: &seven, ThinkingBudget: &three, ReasoningEffort: &low}},
		{model: "loop", errLike: "too many steps"},
		{model: "raise", errLike: "hooks.star:8: fail: boom for k1"},
		{model: "wrong", errLike: "hooks.star:3: returned int, want None"},
		{model: "badkey", errLike: "unknown key \"modle\""},
	}
	for _, c := range cases {
		t.Run(c.model, func(t *testing.T) {
			got, err := e.Route(req(c.model))
			if c.errLike != "" {
				var he *HookError
				if !errors.As(err, &he) || !strings.Contains(err.Error(), c.errLike) || he.Hook != "route" {
					t.Fatalf("err = %v, want a route HookError holding %q", err, c.errLike)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Model != c.want.Model || !sameRej(got.Reject, c.want.Reject) || !sameInt(got.MaxTokens, c.want.MaxTokens) ||
				!sameInt(got.ThinkingBudget, c.want.ThinkingBudget) || (got.ReasoningEffort == nil) != (c.want.ReasoningEffort == nil) {
				t.Fatalf("got %+v, want %+v", got, c.want)
			}
		})
	}
}

func sameRej(a, b *server.Rejection) bool {
	return (a == nil && b == nil) || (a != nil && b != nil && *a == *b)
}

func sameInt(a, b *int) bool { return (a == nil && b == nil) || (a != nil && b != nil && *a == *b) }

func TestTimeout(t *testing.T) {
	e := load(t, "testdata/basic", Options{MaxSteps: 1 << 62, Timeout: 30 * time.Millisecond})
	start := time.Now()
	_, err := e.Route(req("loop"))
	if err == nil || !strings.Contains(err.Error(), "timeout") {
		t.Fatalf("err = %v, want a timeout", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("the runaway call took %s", d)
	}
}

func TestSamplingBudgetGrammar(t *testing.T) {
	e := load(t, "testdata/basic", Options{})
	r := req("qwen")
	r.User = "cold"
	ov, err := e.Sampling(r)
	if err != nil {
		t.Fatal(err)
	}
	if ov.Temperature == nil || *ov.Temperature != 0 || ov.TopK == nil || *ov.TopK != 20 || ov.LogitBias["hello"] != -5 ||
		len(ov.Stop) != 1 || ov.Stop[0] != "END" || ov.TopP != nil {
		t.Fatalf("sampling = %+v", ov)
	}
	if _, err := e.Sampling(req("wrong")); err == nil || !strings.Contains(err.Error(), "temperature is a string, want a number") {
		t.Fatalf("wrong sampling: %v", err)
	}
	r.ReasoningEffort = "low"
	if b, ok, err := e.ThinkingBudget(r); err != nil || !ok || b != 64 {
		t.Fatalf("budget = %d %v %v", b, ok, err)
	}
	if _, ok, err := e.ThinkingBudget(req("qwen")); err != nil || ok {
		t.Fatalf("None budget: ok=%v err=%v", ok, err)
	}
	g, err := e.Grammar(req("schema"))
	if err != nil || g != `{"type":"object","properties":{"a":{"type":"integer"}}}` {
		t.Fatalf("grammar = %s, %v", g, err)
	}
}

func TestOnResponse(t *testing.T) {
	e := load(t, "testdata/basic", Options{})
	ed, err := e.EditResponse(req("qwen"), &server.HookResponse{Content: "SECRET stuff", Finish: "stop"})
	if err != nil || ed.Content == nil || *ed.Content != "[redacted]" || ed.Tags["finish"] != "stop" || ed.Tags["at"] == "" {
		t.Fatalf("edit = %+v, %v", ed, err)
	}
	ed, err = e.EditResponse(req("drop-calls"), &server.HookResponse{ToolCalls: []toolcall.Call{{Name: "f", Arguments: "{}"}}})
	if err != nil || !ed.ReplaceCalls || len(ed.ToolCalls) != 0 || ed.Content != nil {
		t.Fatalf("edit = %+v, %v", ed, err)
	}
}

func TestLoadErrors(t *testing.T) {
	for _, c := range []struct{ dir, want string }{
		{"testdata/readfile", "read.star:2:12: undefined: open"},
		{"testdata/escape", "only .star files inside the scripts directory"},
		{"testdata/dup", "route is defined twice"},
		{"testdata/missing", "no such file"},
	} {
		_, err := Load(c.dir, Options{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want %q", c.dir, err, c.want)
		}
	}
}

// TestReload: a broken file keeps the previous version; a fixed one
// replaces it; Watch notices a changed file.
func TestReload(t *testing.T) {
	dir := t.TempDir()
	write := func(src string) {
		t.Helper()
		p := filepath.Join(dir, "r.star")
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		// Mtime resolution can be coarse: make every write visible.
		now := time.Now().Add(time.Duration(len(src)) * time.Second)
		os.Chtimes(p, now, now)
	}
	write("def route(r):\n    return 'one'\n")
	e := load(t, dir, Options{})
	write("def route(r):\n    return (\n")
	if err := e.Reload(); err == nil {
		t.Fatal("reload of a broken file succeeded")
	}
	if rt, err := e.Route(req("x")); err != nil || rt.Model != "one" {
		t.Fatalf("after a failed reload: %+v %v", rt, err)
	}
	done := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	go func() { e.Watch(ctx, 5*time.Millisecond); close(done) }()
	write("def route(r):\n    return 'two-two'\n")
	deadline := time.Now().Add(5 * time.Second)
	for {
		rt, err := e.Route(req("x"))
		if err == nil && rt.Model == "two-two" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("watch did not reload: %+v %v", rt, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done
}

// TestConcurrent calls hooks from 100 goroutines (run with -race).
func TestConcurrent(t *testing.T) {
	e := load(t, "testdata/basic", Options{})
	var wg sync.WaitGroup
	for i := 0; i < 100; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			model := []string{"claude-x", "qwen", "raise"}[i%3]
			_, err := e.Route(req(model))
			if (err != nil) != (model == "raise") {
				t.Errorf("%s: %v", model, err)
			}
			if _, err := e.Sampling(req("qwen")); err != nil {
				t.Error(err)
			}
			if i%10 == 0 {
				e.Reload()
			}
		}(i)
	}
	wg.Wait()
}

func TestAppendJSON(t *testing.T) {
	e := load(t, "../scripts/hooks", Options{})
	calls, rest, err := e.ParseToolCalls("<tool_call>\n<function=f>\n<parameter=s>\nq\"\\\x01é\n</parameter>\n<parameter=o>\n{\"b\": 1, \"a\": [1, 2]}\n</parameter>\n</function>\n</tool_call>",
		[]toolcall.Tool{{Name: "f", Parameters: []byte(`{"properties":{"s":{"type":"string"},"o":{"type":"object"}}}`)}})
	if err != nil || rest != "" || len(calls) != 1 {
		t.Fatalf("%+v %q %v", calls, rest, err)
	}
	if want := `{"s":"q\"\\\u0001é","o":{"b":1,"a":[1,2]}}`; calls[0].Arguments != want {
		t.Fatalf("arguments %s, want %s", calls[0].Arguments, want)
	}
}
