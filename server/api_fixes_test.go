package server

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/infernix/infernix/engine"
	"github.com/infernix/infernix/server/testmodel"
)

// newTinyServer serves the random-weight test model (plain-text output,
// no think blocks or tool calls).
func newTinyServer(t *testing.T, cfg Config) *Server {
	t.Helper()
	dir := t.TempDir()
	if err := testmodel.Build(dir, testmodel.Options{}); err != nil {
		t.Fatal(err)
	}
	e, err := engine.Load(dir, engine.Options{Device: "cpu", ContextLength: 512, MaxBatchTokens: 64})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	if cfg.ModelName == "" {
		cfg.ModelName = "tiny"
	}
	s, err := New(e, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// post sends body to path and returns the status and the response body.
func post(t *testing.T, s *Server, path, body string) (int, string) {
	t.Helper()
	req := httptest.NewRequest("POST", path, strings.NewReader(body))
	req.Header.Set("content-type", "application/json")
	resp, err := s.App().Test(req, -1)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestCompletionEchoScoresShortPrompt: echo + logprobs reports one entry
// per prompt token and per generated token, and max_tokens 0 generates
// nothing, also for a prompt of one token (whose scores are empty).
func TestCompletionEchoScoresShortPrompt(t *testing.T) {
	s := newTinyServer(t, Config{})
	cases := []struct {
		name, prompt string
		maxTokens    int
	}{
		{"one token, scoring", `"hi"`, 0},
		{"one token id, scoring", `[100]`, 0},
		{"two tokens, scoring", `"hello world"`, 0},
		{"one token, generating", `"hi"`, 2},
		{"two tokens, generating", `"hello world"`, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body := `{"prompt":` + tc.prompt + `,"max_tokens":` + strconv.Itoa(tc.maxTokens) + `,"echo":true,"logprobs":1,"temperature":0}`
			status, out := post(t, s, "/v1/completions", body)
			if status != 200 {
				t.Fatalf("status %d: %s", status, out)
			}
			r := gjson.Parse(out)
			pt, ct := int(r.Get("usage.prompt_tokens").Int()), int(r.Get("usage.completion_tokens").Int())
			if ct != tc.maxTokens {
				t.Errorf("completion_tokens %d, want %d", ct, tc.maxTokens)
			}
			toks := r.Get("choices.0.logprobs.tokens").Array()
			if len(toks) != pt+ct {
				t.Errorf("%d log-prob entries for %d prompt + %d generated tokens: %s", len(toks), pt, ct, out)
			}
			if n := len(r.Get("choices.0.logprobs.token_logprobs").Array()); n != len(toks) {
				t.Errorf("%d token_logprobs for %d tokens", n, len(toks))
			}
			if tc.maxTokens == 0 {
				want := gjson.Parse(tc.prompt).Str
				if want == "" { // token ids: the echo is their text
					want = s.eng.Tokenizer.Decode([]int32{100}, true)
				}
				if got := r.Get("choices.0.text").Str; got != want {
					t.Errorf("text %q, want the prompt %q alone", got, want)
				}
			}
		})
	}
}

// sseData returns the data payloads of an SSE body, in order.
func sseData(body string) []string {
	var out []string
	for _, ev := range strings.Split(body, "\n\n") {
		for _, line := range strings.Split(ev, "\n") {
			if d, ok := strings.CutPrefix(line, "data: "); ok {
				out = append(out, d)
			}
		}
	}
	return out
}

// TestStreamUsageNull: with stream_options.include_usage every chunk
// before the usage chunk carries "usage": null (OpenAI's documented
// stream), and the last chunk before [DONE] holds the usage with empty
// choices; without it no chunk has a usage field.
func TestStreamUsageNull(t *testing.T) {
	s := newTinyServer(t, Config{})
	cases := []struct {
		name, path, body string
		includeUsage     bool
	}{
		{"chat with usage", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":3,"temperature":0,"stream":true,"stream_options":{"include_usage":true}}`, true},
		{"chat with usage and logprobs", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":3,"temperature":0,"stream":true,"logprobs":true,"stream_options":{"include_usage":true}}`, true},
		{"chat without usage", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":3,"temperature":0,"stream":true}`, false},
		{"chat include_usage false", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":3,"temperature":0,"stream":true,"stream_options":{"include_usage":false}}`, false},
		{"completions with usage", "/v1/completions", `{"prompt":"hi","max_tokens":3,"temperature":0,"stream":true,"stream_options":{"include_usage":true}}`, true},
		{"completions with usage and echo", "/v1/completions", `{"prompt":"hi","max_tokens":3,"temperature":0,"stream":true,"echo":true,"stream_options":{"include_usage":true}}`, true},
		{"completions without usage", "/v1/completions", `{"prompt":"hi","max_tokens":3,"temperature":0,"stream":true}`, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, body := post(t, s, tc.path, tc.body)
			if status != 200 {
				t.Fatalf("status %d: %s", status, body)
			}
			data := sseData(body)
			if len(data) < 3 || data[len(data)-1] != "[DONE]" {
				t.Fatalf("stream does not end with [DONE]: %s", body)
			}
			chunks := data[:len(data)-1]
			for i, d := range chunks {
				if !gjson.Valid(d) {
					t.Fatalf("chunk %d is not JSON: %s", i, d)
				}
				u := gjson.Get(d, "usage")
				last := i == len(chunks)-1
				switch {
				case !tc.includeUsage && u.Exists():
					t.Errorf("chunk %d has usage without include_usage: %s", i, d)
				case tc.includeUsage && last && (!u.IsObject() || len(gjson.Get(d, "choices").Array()) != 0):
					t.Errorf("last chunk is not the usage chunk: %s", d)
				case tc.includeUsage && !last && (!u.Exists() || u.Type != gjson.Null):
					t.Errorf("chunk %d lacks \"usage\": null: %s", i, d)
				}
			}
		})
	}
}

// slowStore is a ResponseStore whose Put takes a while (a disk store).
type slowStore struct {
	ResponseStore
	delay time.Duration
}

func (s slowStore) Put(r *StoredResponse) error {
	time.Sleep(s.delay)
	return s.ResponseStore.Put(r)
}

// TestStreamedResponseStoredBeforeLastEvent: a streamed response is stored
// before its final event, so that a client that continues it (or fetches
// it) as soon as it reads response.completed / response.incomplete finds
// it, even when the store is slow.
func TestStreamedResponseStoredBeforeLastEvent(t *testing.T) {
	s := newTinyServer(t, Config{ResponseStore: slowStore{NewMemoryResponseStore(0), 200 * time.Millisecond}})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(ln)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Shutdown(ctx)
	})
	base := "http://" + ln.Addr().String()
	cases := []struct {
		name string
		next func(id string) (*http.Request, error)
	}{
		{"get", func(id string) (*http.Request, error) { return http.NewRequest("GET", base+"/v1/responses/"+id, nil) }},
		{"continue", func(id string) (*http.Request, error) {
			return http.NewRequest("POST", base+"/v1/responses", strings.NewReader(
				`{"model":"tiny","input":"more","max_output_tokens":2,"temperature":0,"previous_response_id":"`+id+`"}`))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := http.Post(base+"/v1/responses", "application/json",
				strings.NewReader(`{"model":"tiny","input":"hi","max_output_tokens":3,"temperature":0,"stream":true}`))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(nil, 1<<20)
			id := ""
			for id == "" && sc.Scan() {
				d, ok := strings.CutPrefix(sc.Text(), "data: ")
				if typ := gjson.Get(d, "type").Str; ok && (typ == "response.completed" || typ == "response.incomplete") {
					id = gjson.Get(d, "response.id").Str
				}
			}
			if id == "" {
				t.Fatal("no final event in the stream")
			}
			req, err := tc.next(id)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("content-type", "application/json")
			next, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(next.Body)
			next.Body.Close()
			if next.StatusCode != 200 {
				t.Errorf("right after the final event: status %d: %s", next.StatusCode, b)
			}
		})
	}
}

// TestChatUsageReasoningTokens: chat usage reports
// completion_tokens_details.reasoning_tokens, whole and streamed, as the
// Responses API's usage does (output_tokens_details): the demo model
// thinks before it answers unless thinking is off.
func TestChatUsageReasoningTokens(t *testing.T) {
	e, err := engine.Load(filepath.Join("..", "tests", "testdata", "models", "demo"), engine.Options{Device: "cpu", ContextLength: 1024, MaxBatchTokens: 256})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	s, err := New(e, Config{ModelName: "demo"})
	if err != nil {
		t.Fatal(err)
	}
	const msgs = `"messages":[{"role":"user","content":"What is the capital of France?"}],"temperature":0,"max_tokens":120`
	cases := []struct {
		name, body string
		stream     bool
		thinks     bool
	}{
		{"whole", `{` + msgs + `}`, false, true},
		{"streamed", `{` + msgs + `,"stream":true,"stream_options":{"include_usage":true}}`, true, true},
		{"thinking off", `{` + msgs + `,"reasoning_effort":"none"}`, false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, body := post(t, s, "/v1/chat/completions", tc.body)
			if status != 200 {
				t.Fatalf("status %d: %s", status, body)
			}
			var usage gjson.Result
			var reasoning string
			if tc.stream {
				data := sseData(body)
				if len(data) < 2 {
					t.Fatalf("short stream: %s", body)
				}
				for _, d := range data[:len(data)-1] {
					reasoning += gjson.Get(d, "choices.0.delta.reasoning_content").Str
				}
				usage = gjson.Get(data[len(data)-2], "usage")
			} else {
				reasoning = gjson.Get(body, "choices.0.message.reasoning_content").Str
				usage = gjson.Get(body, "usage")
			}
			rt := usage.Get("completion_tokens_details.reasoning_tokens")
			if !rt.Exists() {
				t.Fatalf("usage has no completion_tokens_details.reasoning_tokens: %s", usage.Raw)
			}
			want := 0
			if reasoning != "" {
				want = len(e.Tokenizer.Encode(reasoning))
			}
			if tc.thinks != (reasoning != "") {
				t.Fatalf("reasoning %q: the demo model's thinking changed", reasoning)
			}
			if int(rt.Int()) != want || rt.Int() > usage.Get("completion_tokens").Int() {
				t.Errorf("reasoning_tokens %d, want %d (of %d completion tokens)", rt.Int(), want, usage.Get("completion_tokens").Int())
			}
		})
	}
}

// panicObserver is an on_complete hook that fails badly.
type panicObserver struct{}

func (panicObserver) ObserveCompletion(*HookRequest, *HookResponse) error { panic("observer bug") }

// TestStreamPanicErrorShape: a server fault in the middle of a stream ends
// it with an error event in the API's own shape: Anthropic's event: error
// on /v1/messages (no OpenAI [DONE]), OpenAI's error object on chat.
func TestStreamPanicErrorShape(t *testing.T) {
	s := newTinyServer(t, Config{Hooks: &Hooks{Observers: []CompletionObserver{panicObserver{}}}})
	cases := []struct {
		name, path, body string
		anthropic        bool
	}{
		{"anthropic", "/v1/messages", `{"model":"tiny","messages":[{"role":"user","content":"hi"}],"max_tokens":2,"stream":true}`, true},
		{"chat", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":2,"stream":true}`, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, body := post(t, s, tc.path, tc.body)
			if status != 200 {
				t.Fatalf("status %d: %s", status, body)
			}
			events := strings.Split(strings.TrimSuffix(body, "\n\n"), "\n\n")
			last := events[len(events)-1]
			if tc.anthropic {
				name, data, ok := strings.Cut(last, "\ndata: ")
				if !ok || name != "event: error" || gjson.Get(data, "type").Str != "error" ||
					gjson.Get(data, "error.type").Str != "api_error" || !strings.Contains(gjson.Get(data, "error.message").Str, "observer bug") {
					t.Errorf("last event is not Anthropic's error event: %q", last)
				}
				if strings.Contains(body, "[DONE]") {
					t.Errorf("an Anthropic stream has no [DONE]: %s", body)
				}
				return
			}
			if last != "data: [DONE]" || len(events) < 2 {
				t.Fatalf("stream does not end with [DONE]: %s", body)
			}
			d := strings.TrimPrefix(events[len(events)-2], "data: ")
			if gjson.Get(d, "error.type").Str != "server_error" || !strings.Contains(gjson.Get(d, "error.message").Str, "observer bug") {
				t.Errorf("no OpenAI error before [DONE]: %s", body)
			}
		})
	}
}

// TestContextErrorNamesField: a request whose output limit does not fit
// the context is a 400 naming the field the client used for that limit.
func TestContextErrorNamesField(t *testing.T) {
	s := newTinyServer(t, Config{}) // 512-token context
	const msgs = `"messages":[{"role":"user","content":"hi"}]`
	cases := []struct{ name, path, body, param string }{
		{"chat max_tokens", "/v1/chat/completions", `{` + msgs + `,"max_tokens":3000}`, "max_tokens"},
		{"chat max_completion_tokens", "/v1/chat/completions", `{` + msgs + `,"max_completion_tokens":3000}`, "max_completion_tokens"},
		{"completions max_tokens", "/v1/completions", `{"prompt":"hi","max_tokens":3000}`, "max_tokens"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, body := post(t, s, tc.path, tc.body)
			e := gjson.Get(body, "error")
			if status != 400 || e.Get("code").Str != "context_length_exceeded" {
				t.Fatalf("status %d: %s", status, body)
			}
			if got := e.Get("param").Str; got != tc.param || !strings.HasSuffix(e.Get("message").Str, "lower "+tc.param) {
				t.Errorf("param %q, message %q; want both to name %s", got, e.Get("message").Str, tc.param)
			}
		})
	}
}

// TestUsageBadDayNamesParam: a malformed day is a 400 naming the query
// parameter that holds it.
func TestUsageBadDayNamesParam(t *testing.T) {
	s := newTinyServer(t, Config{Usage: &memUsage{rows: map[[2]string]UsageCounts{}}})
	cases := []struct{ query, param string }{
		{"?from=yesterday", "from"},
		{"?to=tomorrow", "to"},
		{"?from=2026-01-01&to=2026-1-2", "to"},
	}
	for _, tc := range cases {
		t.Run(tc.query, func(t *testing.T) {
			resp, err := s.App().Test(httptest.NewRequest("GET", "/v1/usage"+tc.query, nil), -1)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != 400 {
				t.Fatalf("status %d: %s", resp.StatusCode, b)
			}
			if got := gjson.GetBytes(b, "error.param").Str; got != tc.param || !strings.HasPrefix(gjson.GetBytes(b, "error.message").Str, tc.param+" ") {
				t.Errorf("param %q, message %q; want %s", got, gjson.GetBytes(b, "error.message").Str, tc.param)
			}
		})
	}
}
