// Package e2e holds end-to-end tests: they start the real server (in
// process, on loopback, and once as the real binary) over the real engine
// with a tiny random-weight Qwen3 model built at test time, and drive it
// with plain HTTP and with the official openai npm client (node_test.go).
// Tool-call and reasoning behaviour tests use the trained demo models in
// tests/testdata/models when they exist.
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/infernix/infernix/engine"
	"github.com/infernix/infernix/server"
	"github.com/infernix/infernix/server/testmodel"
)

func TestMain(m *testing.M) {
	code := m.Run()
	closeShared()
	testmodel.Cleanup()
	os.Exit(code)
}

// testDevice is the engine's device for these tests: the CPU, unless
// INFERNIX_TEST_DEVICE names another (cuda on the GPU machine:
// tests/device/run.sh, group e2e).
func testDevice() string {
	if d := os.Getenv("INFERNIX_TEST_DEVICE"); d != "" {
		return d
	}
	return "cpu"
}

// opts configure a test server.
type opts struct {
	model    string // model directory ("" = the tiny random model)
	modelOpt testmodel.Options
	lanes    int
	queue    int
	spec     int // sched.Config.SpecTokens
	context  int
	server   server.Config
}

// testServer is a running in-process server.
type testServer struct {
	URL string
	S   *server.Server
	E   *engine.Engine
}

func start(tb testing.TB, o opts) *testServer {
	tb.Helper()
	dir := o.model
	if dir == "" {
		dir = testmodel.Dir(tb, o.modelOpt)
	}
	eo := engine.Options{Device: testDevice(), ContextLength: o.context, MaxBatchTokens: 64}
	if eo.ContextLength == 0 {
		eo.ContextLength = 2048
	}
	eo.Sched.MaxLanes, eo.Sched.MaxQueue, eo.Sched.PrefillChunk, eo.Sched.SpecTokens = o.lanes, o.queue, 48, o.spec
	if eo.Sched.MaxLanes == 0 {
		eo.Sched.MaxLanes = 4
	}
	e, err := engine.Load(dir, eo)
	if err != nil {
		tb.Fatalf("loading %s: %v", dir, err)
	}
	return serveEngine(tb, e, o.server)
}

// serveEngine serves a loaded engine on a free local port (closing the
// engine if that fails); close shuts both down.
func serveEngine(tb testing.TB, e *engine.Engine, cfg server.Config) *testServer {
	tb.Helper()
	s, err := server.New(e, cfg)
	if err != nil {
		e.Close()
		tb.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		e.Close()
		tb.Fatal(err)
	}
	go s.Serve(ln)
	return &testServer{URL: "http://" + ln.Addr().String(), S: s, E: e}
}

func (ts *testServer) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ts.S.Shutdown(ctx)
	ts.E.Close()
}

var (
	sharedOnce sync.Once
	sharedSrv  *testServer
	sharedMu   sync.Mutex
	closers    []func()
)

// shared returns the default server (4 lanes, random tiny model), started
// once for the whole package.
func shared(tb testing.TB) *testServer {
	tb.Helper()
	sharedOnce.Do(func() {
		sharedSrv = start(tb, opts{})
		onClose(sharedSrv.close)
	})
	if sharedSrv == nil {
		tb.Fatal("the shared server failed to start")
	}
	return sharedSrv
}

// onClose registers cleanup to run after every test.
func onClose(f func()) {
	sharedMu.Lock()
	closers = append(closers, f)
	sharedMu.Unlock()
}

func closeShared() {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	for _, f := range closers {
		f()
	}
}

var client = &http.Client{Timeout: 60 * time.Second}

// post sends body (a JSON string or a value to marshal) and returns the
// status, headers and parsed JSON response.
func post(tb testing.TB, url string, body any, headers ...string) (int, http.Header, gjson.Result) {
	tb.Helper()
	req, err := http.NewRequest("POST", url, bytes.NewReader(jsonBody(tb, body)))
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatal(err)
	}
	if !gjson.ValidBytes(data) {
		tb.Fatalf("POST %s: status %d, body is not JSON: %q", url, resp.StatusCode, data)
	}
	return resp.StatusCode, resp.Header, gjson.ParseBytes(data)
}

func get(tb testing.TB, url string, headers ...string) (int, []byte) {
	tb.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, data
}

func jsonBody(tb testing.TB, body any) []byte {
	tb.Helper()
	switch b := body.(type) {
	case string:
		return []byte(b)
	case []byte:
		return b
	}
	data, err := json.Marshal(body)
	if err != nil {
		tb.Fatal(err)
	}
	return data
}

// streamEvents posts a streaming request and returns the SSE data payloads
// (the final "[DONE]" included as the raw string).
func streamEvents(tb testing.TB, url string, body any) []string {
	tb.Helper()
	req, _ := http.NewRequest("POST", url, bytes.NewReader(jsonBody(tb, body)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		data, _ := io.ReadAll(resp.Body)
		tb.Fatalf("stream: status %d: %s", resp.StatusCode, data)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		tb.Fatalf("stream: Content-Type %q", ct)
	}
	var out []string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			tb.Fatalf("stream: unexpected line %q", line)
		}
		if data != "[DONE]" && !gjson.Valid(data) {
			tb.Fatalf("stream: chunk is not JSON: %q", data)
		}
		out = append(out, data)
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	if len(out) == 0 || out[len(out)-1] != "[DONE]" {
		tb.Fatalf("stream did not end with [DONE]: %q", out)
	}
	return out
}

// chatDelta accumulates a streamed chat completion.
type chatDelta struct {
	role, content, reasoning string
	finish                   string
	calls                    []streamedCall
	usage                    gjson.Result
	logprobs                 []gjson.Result
	chunks                   int
}

type streamedCall struct{ id, name, args string }

func assembleChat(tb testing.TB, events []string) chatDelta {
	tb.Helper()
	var d chatDelta
	for _, ev := range events[:len(events)-1] {
		r := gjson.Parse(ev)
		if r.Get("error").Exists() {
			tb.Fatalf("stream error: %s", ev)
		}
		if r.Get("object").Str != "chat.completion.chunk" {
			tb.Fatalf("chunk object %q", r.Get("object").Str)
		}
		if u := r.Get("usage"); u.Exists() && u.Type != gjson.Null {
			d.usage = u
		}
		for _, ch := range r.Get("choices").Array() {
			d.chunks++
			delta := ch.Get("delta")
			if v := delta.Get("role"); v.Exists() {
				d.role = v.Str
			}
			d.content += delta.Get("content").Str
			d.reasoning += delta.Get("reasoning_content").Str
			for _, tc := range delta.Get("tool_calls").Array() {
				i := int(tc.Get("index").Int())
				for len(d.calls) <= i {
					d.calls = append(d.calls, streamedCall{})
				}
				if id := tc.Get("id").Str; id != "" {
					d.calls[i].id = id
				}
				if n := tc.Get("function.name").Str; n != "" {
					d.calls[i].name = n
				}
				d.calls[i].args += tc.Get("function.arguments").Str
			}
			d.logprobs = append(d.logprobs, ch.Get("logprobs.content").Array()...)
			if f := ch.Get("finish_reason"); f.Type == gjson.String {
				d.finish = f.Str
			}
		}
	}
	return d
}

type serverConfig = server.Config

// serverCfg returns a server.Config edited by f.
func serverCfg(f func(*serverConfig)) server.Config {
	var c server.Config
	f(&c)
	return c
}
