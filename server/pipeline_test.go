package server

import (
	"fmt"
	"strings"
	"testing"

	"github.com/infernix/infernix/engine/toolcall"
)

// merged is a pipeline's output with consecutive pieces of the same kind
// (and call) joined, so that results of different chunkings compare equal.
type merged struct {
	kind  outKind
	index int
	name  string
	text  string
}

func (m merged) String() string {
	names := []string{"content", "reasoning", "call", "args"}
	return fmt.Sprintf("%s[%d %s %q]", names[m.kind], m.index, m.name, m.text)
}

func runPipeline(t *testing.T, j *job, chunks []string) ([]merged, *pipeline) {
	t.Helper()
	s := &Server{thinkOpenText: "<think>", thinkCloseText: "</think>"}
	var out []merged
	p := newPipeline(s, j, func(o *output) error {
		if o.text == "" && o.kind != outCallStart {
			t.Errorf("empty %v output", o.kind)
		}
		if n := len(out); n > 0 && o.kind != outCallStart && out[n-1].kind == o.kind && out[n-1].index == o.index {
			out[n-1].text += o.text
			return nil
		}
		out = append(out, merged{o.kind, o.index, o.name, o.text})
		return nil
	})
	p.newID = func() string { return "call_x" }
	for _, c := range chunks {
		p.push(c)
	}
	if !p.stopped {
		p.finish()
	}
	return out, p
}

func bytesOf(s string) []string {
	out := make([]string, len(s))
	for i := range s {
		out[i] = s[i : i+1]
	}
	return out
}

func TestPipeline(t *testing.T) {
	weather := []toolcall.Tool{{Name: "get_weather", Parameters: []byte(`{"type":"object","properties":{"city":{"type":"string"}}}`)}}
	cases := []struct {
		name        string
		job         job
		text        string
		want        []merged
		stopMatched bool
		singleDone  bool
	}{
		{
			name: "plain content",
			job:  job{},
			text: "Hello there, friend.",
			want: []merged{{outContent, 0, "", "Hello there, friend."}},
		},
		{
			name:        "stop string cuts the answer",
			job:         job{stop: []string{"STOP", "friend"}},
			text:        "Hello there, friend. More text",
			want:        []merged{{outContent, 0, "", "Hello there, "}},
			stopMatched: true,
		},
		{
			name: "partial stop string at the end is released",
			job:  job{stop: []string{"STOP"}},
			text: "Hello ST",
			want: []merged{{outContent, 0, "", "Hello ST"}},
		},
		{
			name: "reasoning split, stop string only matches the answer",
			job:  job{reasoning: true, stop: []string{"alpha"}},
			text: "<think>\nthinking about alpha\n</think>\n\nanswer with alpha inside",
			want: []merged{
				{outReasoning, 0, "", "thinking about alpha"},
				{outContent, 0, "", "answer with "},
			},
			stopMatched: true,
		},
		{
			name: "reasoning open in the prompt",
			job:  job{reasoning: true, openInPrompt: true},
			text: "still thinking</think>the answer",
			want: []merged{{outReasoning, 0, "", "still thinking"}, {outContent, 0, "", "the answer"}},
		},
		{
			name: "tool call; a stop string inside the call does not match",
			job:  job{parseTools: true, toolFormat: toolcall.FormatJSON, tools: weather, stop: []string{"Paris"}},
			text: "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
			want: []merged{
				{outContent, 0, "", "Let me check."},
				{outCallStart, 0, "get_weather", ""},
				{outCallArgs, 0, "", `{"city":"Paris"}`},
			},
		},
		{
			name: "held-back text is released before a call",
			job:  job{parseTools: true, toolFormat: toolcall.FormatJSON, tools: weather, stop: []string{"Checking now"}},
			text: "Checking<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>",
			want: []merged{
				{outContent, 0, "", "Checking"},
				{outCallStart, 0, "get_weather", ""},
				{outCallArgs, 0, "", `{"city":"Oslo"}`},
			},
		},
		{
			name: "a call inside the thinking stays thinking",
			job:  job{reasoning: true, parseTools: true, toolFormat: toolcall.FormatJSON, tools: weather},
			text: "<think>maybe <tool_call>{\"name\": \"get_weather\", \"arguments\": {}}</tool_call></think>No call.",
			want: []merged{
				{outReasoning, 0, "", "maybe <tool_call>{\"name\": \"get_weather\", \"arguments\": {}}</tool_call>"},
				{outContent, 0, "", "No call."},
			},
		},
		{
			name: "parallel calls",
			job:  job{parseTools: true, toolFormat: toolcall.FormatJSON, tools: weather},
			text: "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"A\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"B\"}}\n</tool_call>",
			want: []merged{
				{outCallStart, 0, "get_weather", ""}, {outCallArgs, 0, "", `{"city":"A"}`},
				{outCallStart, 1, "get_weather", ""}, {outCallArgs, 1, "", `{"city":"B"}`},
			},
		},
		{
			name: "parallel_tool_calls false keeps the first call",
			job:  job{parseTools: true, toolFormat: toolcall.FormatJSON, tools: weather, singleCall: true},
			text: "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"A\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"B\"}}\n</tool_call>",
			want: []merged{
				{outCallStart, 0, "get_weather", ""}, {outCallArgs, 0, "", `{"city":"A"}`},
			},
			singleDone: true,
		},
		{
			name: "xml call with typed parameter",
			job: job{parseTools: true, toolFormat: toolcall.FormatXML, tools: []toolcall.Tool{{Name: "add",
				Parameters: []byte(`{"type":"object","properties":{"a":{"type":"integer"}}}`)}}},
			text: "<tool_call>\n<function=add>\n<parameter=a>\n42\n</parameter>\n</function>\n</tool_call>",
			want: []merged{{outCallStart, 0, "add", ""}, {outCallArgs, 0, "", `{"a":42}`}},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, chunking := range []struct {
				name   string
				chunks []string
			}{{"whole", []string{c.text}}, {"bytes", bytesOf(c.text)}} {
				j := c.job
				got, p := runPipeline(t, &j, chunking.chunks)
				if fmt.Sprint(got) != fmt.Sprint(c.want) {
					t.Errorf("%s:\n got %v\nwant %v", chunking.name, got, c.want)
				}
				if p.stopMatched != c.stopMatched || p.singleDone != c.singleDone {
					t.Errorf("%s: stopMatched %v singleDone %v", chunking.name, p.stopMatched, p.singleDone)
				}
			}
		})
	}
}

// TestPipelineLogprobsAttach: pending log-probs ride on the next output and
// are not lost while text is held back.
func TestPipelineLogprobsAttach(t *testing.T) {
	s := &Server{thinkOpenText: "<think>", thinkCloseText: "</think>"}
	var got []int
	p := newPipeline(s, &job{stop: []string{"XYZ"}}, func(o *output) error {
		got = append(got, len(o.logprobs))
		return nil
	})
	p.pending = append(p.pending, tokenLogprob{id: 1})
	p.push("ab")
	p.pending = append(p.pending, tokenLogprob{id: 2})
	p.push("X") // held back: could start XYZ
	p.pending = append(p.pending, tokenLogprob{id: 3})
	p.push("a")
	if strings.Join(strings.Fields(fmt.Sprint(got)), ",") != "[1,2]" || len(p.pending) != 0 {
		t.Errorf("log-prob counts per output %v, pending %d", got, len(p.pending))
	}
}

// TestPipelineEmitError: a failing client write stops the pipeline.
func TestPipelineEmitError(t *testing.T) {
	s := &Server{}
	calls := 0
	p := newPipeline(s, &job{}, func(o *output) error {
		calls++
		return errClientGone
	})
	p.push("a")
	p.push("b")
	if calls != 1 || !p.stopped || p.err != errClientGone {
		t.Errorf("calls %d stopped %v err %v", calls, p.stopped, p.err)
	}
}
