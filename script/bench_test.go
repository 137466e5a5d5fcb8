package script

import (
	"strings"
	"testing"

	"github.com/infernix/infernix/engine/toolcall"
)

// The targets: route and sampling ≤ 50 µs per call; parsing a 2 KB
// reply ≤ 2 ms.

func BenchmarkRoute(b *testing.B) {
	e := load(b, "../scripts/hooks", Options{})
	r := req("claude-sonnet-4")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.Route(r); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSampling(b *testing.B) {
	e := load(b, "testdata/basic", Options{})
	r := req("qwen")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.Sampling(r); err != nil {
			b.Fatal(err)
		}
	}
}

// reply2KB is about 2 KB of prose and two XML calls.
func reply2KB() string {
	var sb strings.Builder
	for sb.Len() < 1500 {
		sb.WriteString("Let me look at the weather in a few cities before answering. ")
	}
	sb.WriteString("\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>\n")
	sb.WriteString("<tool_call>\n<function=write_file>\n<parameter=path>\na.txt\n</parameter>\n<parameter=content>\n" + strings.Repeat("line of text\n", 20) + "</parameter>\n</function>\n</tool_call>")
	return sb.String()
}

var benchTools = []toolcall.Tool{
	{Name: "get_weather", Parameters: []byte(`{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}}}`)},
	{Name: "write_file", Parameters: []byte(`{"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"}}}`)},
}

func BenchmarkParseToolCalls2KB(b *testing.B) {
	e := load(b, "../scripts/hooks", Options{})
	text := reply2KB()
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		calls, _, err := e.ParseToolCalls(text, benchTools)
		if err != nil || len(calls) != 2 {
			b.Fatal(calls, err)
		}
	}
}

// BenchmarkStreamToolCalls2KB streams the 2 KB reply in 4-byte chunks (about
// one token each) through stream_tool_calls; ns/op is per whole reply.
func BenchmarkStreamToolCalls2KB(b *testing.B) {
	e := load(b, "../scripts/hooks", Options{})
	text := reply2KB()
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		_, calls, err := streamParse(e, text, benchTools, 4)
		if err != nil || len(calls) != 2 {
			b.Fatal(calls, err)
		}
	}
}
