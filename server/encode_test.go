package server

import (
	"bufio"
	"encoding/json"
	"io"
	"strings"
	"testing"
)

func testChatEncoder(w io.Writer) *chatEncoder {
	s := &Server{modelName: "m"}
	e := &chatEncoder{s: s, id: "chatcmpl-1", created: 7, w: bufio.NewWriter(w)}
	e.writeRole()
	return e
}

// TestChatChunks: every chunk is one SSE event holding valid JSON of the
// OpenAI chunk shape.
func TestChatChunks(t *testing.T) {
	var out strings.Builder
	e := testChatEncoder(&out)
	for _, o := range []output{
		{kind: outReasoning, text: "hmm \"quoted\"\n"},
		{kind: outContent, text: "Hello <b>"},
		{kind: outCallStart, index: 0, id: "call_1", name: "get_weather"},
		{kind: outCallArgs, index: 0, text: `{"city":`},
		{kind: outCallArgs, index: 0, text: `"Paris"}`},
	} {
		if err := e.stream(&o); err != nil {
			t.Fatal(err)
		}
	}
	e.writeEnd(&result{finish: "stop", calls: 1, promptTokens: 3, completionTokens: 4}, true)
	events := strings.Split(strings.TrimSuffix(out.String(), "\n\n"), "\n\n")
	want := []string{
		`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":7,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`,
		`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":7,"model":"m","choices":[{"index":0,"delta":{"reasoning_content":"hmm \"quoted\"\n","reasoning":"hmm \"quoted\"\n"},"logprobs":null,"finish_reason":null}]}`,
		`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":7,"model":"m","choices":[{"index":0,"delta":{"content":"Hello <b>"},"logprobs":null,"finish_reason":null}]}`,
		`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":7,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":""}}]},"logprobs":null,"finish_reason":null}]}`,
		`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":7,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]},"logprobs":null,"finish_reason":null}]}`,
		`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":7,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"Paris\"}"}}]},"logprobs":null,"finish_reason":null}]}`,
		`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":7,"model":"m","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}]}`,
		`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":7,"model":"m","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}}`,
		`[DONE]`,
	}
	if len(events) != len(want) {
		t.Fatalf("%d events, want %d:\n%s", len(events), len(want), out.String())
	}
	for i, ev := range events {
		data, ok := strings.CutPrefix(ev, "data: ")
		if !ok || data != want[i] {
			t.Errorf("event %d:\n got %s\nwant data: %s", i, ev, want[i])
		}
		if i < len(events)-1 && !json.Valid([]byte(data)) {
			t.Errorf("event %d is not JSON", i)
		}
	}
}

// TestChatResponse: the non-streaming body, with a call and reasoning.
func TestChatResponse(t *testing.T) {
	e := &chatEncoder{s: &Server{modelName: "m"}, id: "chatcmpl-1", created: 7}
	for _, o := range []output{
		{kind: outReasoning, text: "think"},
		{kind: outCallStart, index: 0, id: "call_1", name: "f"},
		{kind: outCallArgs, index: 0, text: `{"a":1}`},
		{kind: outCallStart, index: 1, id: "call_2", name: "g"},
	} {
		e.collect(&o)
	}
	got := string(e.appendResponse(nil, &result{finish: "tool_calls", promptTokens: 5, completionTokens: 6, cached: 2}))
	want := `{"id":"chatcmpl-1","object":"chat.completion","created":7,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"reasoning_content":"think","reasoning":"think","tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}},{"id":"call_2","type":"function","function":{"name":"g","arguments":"{}"}}]},"logprobs":null,"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":5,"completion_tokens":6,"total_tokens":11,"prompt_tokens_details":{"cached_tokens":2},"completion_tokens_details":{"reasoning_tokens":0}}}`
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// TestStreamChunkAllocs: writing a content chunk allocates nothing (one
// chunk per token is the streaming hot path).
func TestStreamChunkAllocs(t *testing.T) {
	e := testChatEncoder(io.Discard)
	o := &output{kind: outContent, text: "token"}
	if n := testing.AllocsPerRun(200, func() { e.stream(o) }); n != 0 {
		t.Errorf("stream allocates %v times per chunk", n)
	}
}

func BenchmarkStreamChunk(b *testing.B) {
	e := testChatEncoder(io.Discard)
	o := &output{kind: outContent, text: " token"}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		e.stream(o)
	}
}

// TestPipelineContentAllocs: plain content through the pipeline into the
// chunk encoder allocates nothing per token.
func TestPipelineContentAllocs(t *testing.T) {
	e := testChatEncoder(io.Discard)
	p := newPipeline(&Server{}, &job{}, e.stream)
	if n := testing.AllocsPerRun(200, func() { p.push(" token") }); n != 0 {
		t.Errorf("pipeline+stream allocate %v times per token", n)
	}
}
