package e2e

import (
	"bufio"
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

func TestAuth(t *testing.T) {
	keysFile := filepath.Join(t.TempDir(), "keys")
	os.WriteFile(keysFile, []byte("# team keys\nkey-from-file\n\n"), 0o644)
	ts := start(t, opts{server: serverCfg(func(c *serverConfig) {
		c.APIKeys = []string{"sk-test-1", "sk-test-2"}
	})})
	defer ts.close()
	body := hello(map[string]any{"max_tokens": 2})
	st, _, r := post(t, ts.URL+"/v1/chat/completions", body)
	checkError(t, st, r, 401, "", "API key")
	if r.Get("error.code").Str != "invalid_api_key" || r.Get("error.type").Str != "authentication_error" {
		t.Errorf("401 body %s", r.Raw)
	}
	st, _, r = post(t, ts.URL+"/v1/chat/completions", body, "Authorization", "Bearer wrong")
	checkError(t, st, r, 401, "", "API key")
	if st, _, r = post(t, ts.URL+"/v1/chat/completions", body, "Authorization", "Bearer sk-test-2"); st != 200 {
		t.Errorf("Bearer key: %d %s", st, r.Raw)
	}
	if st, _, r = post(t, ts.URL+"/v1/chat/completions", body, "x-api-key", "sk-test-1"); st != 200 {
		t.Errorf("x-api-key: %d %s", st, r.Raw)
	}
	if st, _ := get(t, ts.URL+"/v1/models"); st != 401 {
		t.Errorf("/v1/models without a key: %d", st)
	}
	if st, _ := get(t, ts.URL+"/metrics"); st != 401 {
		t.Errorf("/metrics without a key: %d", st)
	}
	if st, _ := get(t, ts.URL+"/health"); st != 200 {
		t.Errorf("/health must stay open, got %d", st)
	}
}

func TestRequestLogAndMetrics(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "requests.jsonl")
	ts := start(t, opts{server: serverCfg(func(c *serverConfig) { c.RequestLog = logPath })})
	defer ts.close()
	_, _, r := post(t, ts.URL+"/v1/chat/completions", hello(map[string]any{"max_tokens": 5, "ignore_eos": true}))
	id := r.Get("id").Str
	req := hello(map[string]any{"max_tokens": 3, "ignore_eos": true, "stream": true})
	streamEvents(t, ts.URL+"/v1/chat/completions", req)
	post(t, ts.URL+"/v1/chat/completions", `{"messages":[]}`)

	// The stream's line is written when the stream ends, just after [DONE].
	var lines []gjson.Result
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		data, _ := os.ReadFile(logPath)
		lines = lines[:0]
		for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			if l != "" {
				lines = append(lines, gjson.Parse(l))
			}
		}
		if len(lines) >= 3 {
			break
		}
	}
	if len(lines) != 3 {
		t.Fatalf("request log has %d lines, want 3", len(lines))
	}
	byID := map[string]gjson.Result{}
	for _, l := range lines {
		if l.Get("v").Int() != 1 || l.Get("endpoint").Str != "/v1/chat/completions" || !l.Get("timings_ms").IsObject() || !l.Get("time").Exists() {
			t.Errorf("log line %s", l.Raw)
		}
		byID[l.Get("id").Str] = l
	}
	first := byID[id]
	tm := first.Get("timings_ms")
	if first.Get("status").Int() != 200 || first.Get("completion_tokens").Int() != 5 || first.Get("prompt_tokens").Int() == 0 ||
		first.Get("finish_reason").Str != "length" || first.Get("error").Type != gjson.Null || first.Get("stream").Bool() ||
		tm.Get("total").Float() <= 0 || tm.Get("ttft").Float() <= 0 || tm.Get("ttft").Float() > tm.Get("total").Float() {
		t.Errorf("non-streaming log line %s", first.Raw)
	}
	var sawStream, sawError bool
	for _, l := range lines {
		switch {
		case l.Get("stream").Bool():
			sawStream = l.Get("completion_tokens").Int() == 3 && l.Get("status").Int() == 200
		case l.Get("status").Int() == 400:
			sawError = strings.Contains(l.Get("error").Str, "messages")
		}
	}
	if !sawStream || !sawError {
		t.Errorf("missing stream or error line: %v %v\n%v", sawStream, sawError, lines)
	}

	st, text := get(t, ts.URL+"/metrics")
	if st != 200 {
		t.Fatalf("/metrics: %d", st)
	}
	for _, want := range []string{
		`infernix_requests_total{endpoint="/v1/chat/completions",status="200"} 2`,
		`infernix_requests_total{endpoint="/v1/chat/completions",status="400"} 1`,
		"infernix_generated_tokens_total 8",
		"# TYPE infernix_time_to_first_token_seconds histogram",
		`infernix_inter_token_latency_seconds_bucket{le="+Inf"} 6`,
		"infernix_time_to_first_token_seconds_count 2",
		"infernix_queue_depth 0", "infernix_lanes_busy 0", "infernix_kv_blocks_total ",
		"infernix_prefix_cache_queries_total ", "infernix_prefix_cache_hits_total 0",
		"infernix_prompt_tokens_total ",
	} {
		if !strings.Contains(string(text), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	st, js := get(t, ts.URL+"/metrics?format=json")
	m := gjson.ParseBytes(js)
	if st != 200 || m.Get("infernix_generated_tokens_total").Int() != 8 || m.Get("infernix_time_to_first_token_seconds.count").Int() != 2 ||
		!m.Get("infernix_lanes_max").Exists() || m.Get("requests.#").Int() < 2 {
		t.Errorf("/metrics?format=json: %s", js)
	}
}

// metric reads one value of /metrics?format=json.
func metric(t *testing.T, ts *testServer, name string) float64 {
	t.Helper()
	_, js := get(t, ts.URL+"/metrics?format=json")
	return gjson.GetBytes(js, name).Float()
}

// waitMetric polls until the metric equals want.
func waitMetric(t *testing.T, ts *testServer, name string, want float64, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		v := metric(t, ts, name)
		if v == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s = %v after %v, want %v", name, v, within, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// openStream starts a streaming request and returns once its first content
// chunk arrived (the request holds a lane) or, with waitFirst false, once
// the response headers arrived.
func openStream(t *testing.T, ctx context.Context, url string, body any, waitFirst bool) *http.Response {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "POST", url, bytes.NewReader(jsonBody(t, body)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("stream: status %d", resp.StatusCode)
	}
	if waitFirst {
		br := bufio.NewReader(resp.Body)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(line, `"content":"`) && !strings.Contains(line, `"role"`) {
				break
			}
		}
	}
	return resp
}

// TestQueueFullAndCancellation: with one lane and a queue of one, a third
// request gets 429 with Retry-After; disconnecting clients frees the lane
// and the queue slot at once.
func TestQueueFullAndCancellation(t *testing.T) {
	ts := start(t, opts{lanes: 1, queue: 1})
	defer ts.close()
	long := hello(map[string]any{"max_tokens": 1500, "ignore_eos": true, "stream": true})
	ctxA, cancelA := context.WithCancel(context.Background())
	defer cancelA()
	a := openStream(t, ctxA, ts.URL+"/v1/chat/completions", long, true)
	defer a.Body.Close()
	ctxB, cancelB := context.WithCancel(context.Background())
	defer cancelB()
	b := openStream(t, ctxB, ts.URL+"/v1/chat/completions", long, false)
	defer b.Body.Close()
	waitMetric(t, ts, "infernix_queue_depth", 1, 5*time.Second)
	if busy := metric(t, ts, "infernix_lanes_busy"); busy != 1 {
		t.Fatalf("lanes busy %v, want 1", busy)
	}

	st, h, r := post(t, ts.URL+"/v1/chat/completions", hello(map[string]any{"max_tokens": 2}))
	checkError(t, st, r, 429, "", "queue is full")
	if h.Get("Retry-After") == "" || r.Get("error.code").Str != "queue_full" {
		t.Errorf("429 without Retry-After or code: %v %s", h, r.Raw)
	}

	// B disconnects while queued: it leaves the queue.
	cancelB()
	waitMetric(t, ts, "infernix_queue_depth", 0, 2*time.Second)
	// A disconnects mid-stream: its lane is freed within a step.
	cancelA()
	waitMetric(t, ts, "infernix_lanes_busy", 0, 2*time.Second)
	// Generation stops: the token count settles (the handler may still be
	// draining events the engine produced before the cancellation).
	generated := metric(t, ts, "infernix_generated_tokens_total")
	for settled := time.Now().Add(2 * time.Second); ; {
		time.Sleep(150 * time.Millisecond)
		g := metric(t, ts, "infernix_generated_tokens_total")
		if g == generated {
			break
		}
		if time.Now().After(settled) {
			t.Fatalf("tokens still being generated after cancellation: %v → %v", generated, g)
		}
		generated = g
	}
	if generated >= 1500 {
		t.Errorf("the cancelled stream ran to the end (%v tokens)", generated)
	}

	// A non-streaming request whose client gives up is cancelled too (the
	// server notices the closed connection while generating).
	ctxC, cancelC := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancelC()
	reqC, _ := http.NewRequestWithContext(ctxC, "POST", ts.URL+"/v1/chat/completions",
		bytes.NewReader(jsonBody(t, hello(map[string]any{"max_tokens": 1500, "ignore_eos": true}))))
	if _, err := http.DefaultClient.Do(reqC); err == nil {
		t.Fatal("the 1500-token request finished within 300 ms")
	}
	waitMetric(t, ts, "infernix_lanes_busy", 0, 2*time.Second)

	// The server still serves.
	if st, _, r := post(t, ts.URL+"/v1/chat/completions", hello(map[string]any{"max_tokens": 2})); st != 200 {
		t.Errorf("after cancellations: %d %s", st, r.Raw)
	}
}
