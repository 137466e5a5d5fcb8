package e2e

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// TestBadRequests: every client mistake is a 4xx in OpenAI's error shape
// naming the field.
func TestBadRequests(t *testing.T) {
	ts := shared(t)
	msgs := `"messages":[{"role":"user","content":"hi"}]`
	cases := []struct {
		name, path, body string
		status           int
		param            string // error.param; "" = null
		inMessage        string
	}{
		{"not json", "/v1/chat/completions", `{"messages":`, 400, "", "not valid JSON"},
		{"not an object", "/v1/chat/completions", `[1,2]`, 400, "", "JSON object"},
		{"empty body", "/v1/chat/completions", ``, 400, "", "empty"},
		{"no messages", "/v1/chat/completions", `{"model":"x"}`, 400, "messages", "messages is required"},
		{"empty messages", "/v1/chat/completions", `{"messages":[]}`, 400, "messages", "must not be empty"},
		{"bad role", "/v1/chat/completions", `{"messages":[{"role":"wizard","content":"hi"}]}`, 400, "messages[0].role", "wizard"},
		{"content type", "/v1/chat/completions", `{"messages":[{"role":"user","content":5}]}`, 400, "messages[0].content", "string"},
		{"image part", "/v1/chat/completions", `{"messages":[{"role":"user","content":[{"type":"text","text":"what is this"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}]}]}`, 400, "messages[0].content[1]", "no vision"},
		{"max_tokens type", "/v1/chat/completions", `{` + msgs + `,"max_tokens":"ten"}`, 400, "max_tokens", "integer"},
		{"max_tokens fraction", "/v1/chat/completions", `{` + msgs + `,"max_tokens":1.5}`, 400, "max_tokens", "integer"},
		{"max_tokens zero", "/v1/chat/completions", `{` + msgs + `,"max_tokens":0}`, 400, "max_tokens", ">= 1"},
		{"temperature", "/v1/chat/completions", `{` + msgs + `,"temperature":-1}`, 400, "temperature", "temperature"},
		{"top_p", "/v1/chat/completions", `{` + msgs + `,"top_p":0}`, 400, "top_p", "top_p"},
		{"presence_penalty", "/v1/chat/completions", `{` + msgs + `,"presence_penalty":3}`, 400, "presence_penalty", "presence_penalty"},
		{"n", "/v1/chat/completions", `{` + msgs + `,"n":2}`, 400, "n", "not supported"},
		{"json_schema", "/v1/chat/completions", `{` + msgs + `,"response_format":{"type":"json_schema","json_schema":{"name":"x","strict":true,"schema":{"type":"number","multipleOf":3}}}}`, 400, "response_format.json_schema.schema", "/multipleOf: not supported"},
		{"stop type", "/v1/chat/completions", `{` + msgs + `,"stop":[1]}`, 400, "stop[0]", "string"},
		{"logit_bias key", "/v1/chat/completions", `{` + msgs + `,"logit_bias":{"abc":1}}`, 400, "logit_bias", "token ids"},
		{"logit_bias range", "/v1/chat/completions", `{` + msgs + `,"logit_bias":{"5":500}}`, 400, "logit_bias", "[-100, 100]"},
		{"top_logprobs without logprobs", "/v1/chat/completions", `{` + msgs + `,"top_logprobs":3}`, 400, "top_logprobs", "logprobs"},
		{"top_logprobs range", "/v1/chat/completions", `{` + msgs + `,"logprobs":true,"top_logprobs":50}`, 400, "top_logprobs", "[0, 20]"},
		{"tools shape", "/v1/chat/completions", `{` + msgs + `,"tools":[{"type":"function"}]}`, 400, "tools[0].function", "function"},
		{"tool_choice unknown fn", "/v1/chat/completions", `{` + msgs + `,"tools":[{"type":"function","function":{"name":"a"}}],"tool_choice":{"type":"function","function":{"name":"b"}}}`, 400, "tool_choice.function.name", "not in tools"},
		{"tool_choice without tools", "/v1/chat/completions", `{` + msgs + `,"tool_choice":"required"}`, 400, "tool_choice", "tools"},
		{"reasoning_effort", "/v1/chat/completions", `{` + msgs + `,"reasoning_effort":"extreme"}`, 400, "reasoning_effort", "extreme"},
		{"stream type", "/v1/chat/completions", `{` + msgs + `,"stream":"yes"}`, 400, "stream", "boolean"},
		{"context overflow", "/v1/chat/completions", `{` + msgs + `,"max_tokens":5000}`, 400, "max_tokens", "5000"},
		{"prompt missing", "/v1/completions", `{"max_tokens":3}`, 400, "prompt", "prompt"},
		{"prompt empty", "/v1/completions", `{"prompt":""}`, 400, "prompt", "empty"},
		{"several prompts", "/v1/completions", `{"prompt":["a","b"]}`, 400, "prompt", "one prompt"},
		{"prompt id range", "/v1/completions", `{"prompt":[1,2,999999999]}`, 400, "prompt[2]", "vocabulary"},
		{"suffix", "/v1/completions", `{"prompt":"a","suffix":"b"}`, 400, "suffix", "not supported"},
		{"best_of", "/v1/completions", `{"prompt":"a","best_of":3}`, 400, "best_of", "not supported"},
		{"logprobs range", "/v1/completions", `{"prompt":"a","logprobs":99}`, 400, "logprobs", "[0, 20]"},
		{"detokenize missing", "/detokenize", `{}`, 400, "tokens", "required"},
		{"tokenize nothing", "/tokenize", `{}`, 400, "prompt", "messages"},
		{"apply-template bad message", "/apply-template", `{"messages":[1]}`, 400, "messages[0]", "object"},
		{"unknown endpoint", "/v1/embeddings", `{}`, 404, "", "no such endpoint"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st, _, r := post(t, ts.URL+c.path, c.body)
			checkError(t, st, r, c.status, c.param, c.inMessage)
		})
	}
}

func checkError(t *testing.T, st int, r gjson.Result, status int, param, inMessage string) {
	t.Helper()
	e := r.Get("error")
	if st != status || !e.IsObject() {
		t.Fatalf("status %d (want %d): %s", st, status, r.Raw)
	}
	for _, k := range []string{"message", "type", "param", "code"} {
		if !e.Get(k).Exists() {
			t.Errorf("error has no %q: %s", k, e.Raw)
		}
	}
	if got := e.Get("param"); (param == "" && got.Type != gjson.Null) || (param != "" && got.Str != param) {
		t.Errorf("param = %s, want %q (%s)", got.Raw, param, e.Get("message").Str)
	}
	if !strings.Contains(e.Get("message").Str, inMessage) {
		t.Errorf("message %q does not mention %q", e.Get("message").Str, inMessage)
	}
}

func TestContextOverflowNamesBothNumbers(t *testing.T) {
	ts := shared(t)
	long := strings.Repeat("word ", 2100)
	st, _, r := post(t, ts.URL+"/v1/completions", map[string]any{"prompt": long, "max_tokens": 10})
	_, _, tok := post(t, ts.URL+"/tokenize", map[string]any{"prompt": long})
	n := tok.Get("count").String()
	msg := r.Get("error.message").Str
	if st != 400 || r.Get("error.code").Str != "context_length_exceeded" || !strings.Contains(msg, "2048") || !strings.Contains(msg, n+" prompt tokens") {
		t.Errorf("%d %s (prompt: %s tokens)", st, r.Raw, n)
	}
	// A prompt that fits but leaves too little room for max_tokens names both.
	st, _, r = post(t, ts.URL+"/v1/completions", map[string]any{"prompt": "hello", "max_tokens": 2048})
	if msg := r.Get("error.message").Str; st != 400 || r.Get("error.param").Str != "max_tokens" || !strings.Contains(msg, "2048 max tokens") || !strings.Contains(msg, "2048") {
		t.Errorf("%d %s", st, r.Raw)
	}
}

func TestBodyTooLarge(t *testing.T) {
	ts := start(t, opts{server: serverCfg(func(c *serverConfig) { c.MaxBodyBytes = 4096 })})
	defer ts.close()
	body := `{"prompt":"` + strings.Repeat("a", 10000) + `"}`
	resp, err := http.Post(ts.URL+"/v1/completions", "application/json", bytes.NewReader([]byte(body)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	buf.ReadFrom(resp.Body)
	r := gjson.ParseBytes(buf.Bytes())
	if resp.StatusCode != 413 || r.Get("error.code").Str != "request_too_large" {
		t.Errorf("%d %s", resp.StatusCode, buf.String())
	}
}

func TestWrongMethod(t *testing.T) {
	ts := shared(t)
	st, body := get(t, ts.URL+"/v1/chat/completions")
	if st < 400 || st >= 500 || !gjson.GetBytes(body, "error.message").Exists() {
		t.Errorf("GET /v1/chat/completions: %d %s", st, body)
	}
}
