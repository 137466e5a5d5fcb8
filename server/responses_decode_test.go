package server

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDecodeResponses(t *testing.T) {
	cases := []struct {
		name, body string
		msgs       string // the input as chat messages
		check      func(t *testing.T, r *responsesRequest)
	}{
		{name: "string input", body: `{"model":"m","input":"hi","instructions":"be brief","max_output_tokens":5,"temperature":0.2,"store":false,"stream":true}`,
			msgs: `[{"role":"user","content":"hi"}]`,
			check: func(t *testing.T, r *responsesRequest) {
				if r.model != "m" || !r.hasInstr || r.instructions != "be brief" || r.maxOutput != 5 || r.chat.gen.maxTokens != 5 ||
					*r.chat.gen.temperature != 0.2 || r.store || !r.stream {
					t.Errorf("%+v", r)
				}
			}},
		{name: "items", body: `{"input":[{"role":"developer","content":"rules"},{"type":"message","role":"user","content":[{"type":"input_text","text":"a"},{"type":"input_text","text":"b"}]},
				{"type":"reasoning","summary":[{"type":"summary_text","text":"S"}],"content":[{"type":"reasoning_text","text":"R"}]},
				{"type":"message","role":"assistant","content":[{"type":"output_text","text":"checking"}]},
				{"type":"function_call","call_id":"c1","name":"f","arguments":"{\"x\":1}"},
				{"type":"function_call","call_id":"c2","name":"g","arguments":""},
				{"type":"web_search_call","id":"ws"},
				{"type":"function_call_output","call_id":"c1","output":"one"},
				{"type":"function_call_output","call_id":"c2","output":[{"type":"input_text","text":"two"}]},
				{"type":"reasoning","summary":[{"type":"summary_text","text":"S2"}]},
				{"type":"function_call","call_id":"c3","name":"f","arguments":"{}"}]}`,
			msgs: `[{"role":"system","content":"rules"},{"role":"user","content":"a\nb"},` +
				`{"role":"assistant","content":"checking","reasoning_content":"R","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"x\":1}"}},{"id":"c2","type":"function","function":{"name":"g","arguments":"{}"}}]},` +
				`{"role":"tool","content":"one","tool_call_id":"c1"},{"role":"tool","content":"two","tool_call_id":"c2"},` +
				`{"role":"assistant","content":"","reasoning_content":"S2","tool_calls":[{"id":"c3","type":"function","function":{"name":"f","arguments":"{}"}}]}]`},
		{name: "tools", body: `{"input":"x","tools":[{"type":"function","name":"f","description":"F","parameters":{"type":"object"},"strict":false},{"type":"web_search"},{"type":"custom","name":"apply_patch"}],
				"tool_choice":{"type":"function","name":"f"},"parallel_tool_calls":false,"reasoning":{"effort":"low","summary":"auto"},"metadata":{"k":"v"}}`,
			msgs: `[{"role":"user","content":"x"}]`,
			check: func(t *testing.T, r *responsesRequest) {
				c := r.chat
				if len(c.toolList) != 1 || c.toolChoice != "function" || c.toolName != "f" || c.parallelToolCalls || r.effort != "low" ||
					c.reasoningEffort != "low" || r.metadataRaw != `{"k":"v"}` ||
					string(c.tools) != `[{"type":"function","function":{"name":"f","description":"F","parameters":{"type":"object"}}}]` {
					t.Errorf("%+v %s", r, c.tools)
				}
			}},
		{name: "hosted tool choice", body: `{"input":"x","tools":[{"type":"web_search_preview"}],"tool_choice":{"type":"web_search_preview"}}`,
			msgs: `[{"role":"user","content":"x"}]`,
			check: func(t *testing.T, r *responsesRequest) {
				want(t, r.chat.toolChoice, "auto")
				want(t, len(r.chat.toolList), 0)
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := decodeResponses(c.body)
			if err != nil {
				t.Fatal(err)
			}
			b := appendConvMsgs([]byte{'['}, 0, r.input)
			if got := string(append(b, ']')); got != c.msgs {
				t.Errorf("messages\n got %s\nwant %s", got, c.msgs)
			}
			if c.check != nil {
				c.check(t, r)
			}
		})
	}
}

func TestDecodeResponsesErrors(t *testing.T) {
	cases := []struct{ body, param, msg string }{
		{`{}`, "input", "input is required"},
		{`{"input":5}`, "input", "string or an array"},
		{`{"input":[]}`, "input", "holds no message"},
		{`{"input":[3]}`, "input[0]", "input item object"},
		{`{"input":[{"type":"message","role":"tool","content":"x"}]}`, "input[0].role", `"tool"`},
		{`{"input":[{"type":"function_call","arguments":"{}"}]}`, "input[0].name", "non-empty"},
		{`{"input":[{"type":"function_call","name":"f","arguments":{}}]}`, "input[0].arguments", "JSON string"},
		{`{"input":[{"type":"function_call_output","call_id":"c","output":5}]}`, "input[0].output", "string or an array"},
		{`{"input":[{"type":"warp"}]}`, "input[0].type", "warp"},
		{`{"input":"x","max_output_tokens":-1}`, "max_output_tokens", ">= 1"},
		{`{"input":"x","reasoning":"high"}`, "reasoning", "object"},
		{`{"input":"x","reasoning":{"effort":"max"}}`, "reasoning.effort", "max"},
		{`{"input":"x","tools":{}}`, "tools", "array"},
		{`{"input":"x","tools":[{"type":"function"}]}`, "tools[0].name", "non-empty"},
		{`{"input":"x","tools":[{"type":"function","name":"f","parameters":[]}]}`, "tools[0].parameters", "schema"},
		{`{"input":"x","tool_choice":"sometimes"}`, "tool_choice", "sometimes"},
		{`{"input":"x","tool_choice":"required"}`, "tool_choice", "no function tools"},
		{`{"input":"x","text":{"format":{"type":"json_schema"}}}`, "text.format.schema", "required"},
		{`{"input":"x","text":{"format":{"type":"yaml"}}}`, "text.format.type", "must be"},
		{`{"input":"x","store":"yes"}`, "store", "boolean"},
		{`{"input":"x","metadata":1}`, "metadata", "object"},
	}
	for _, c := range cases {
		_, err := decodeResponses(c.body)
		if err == nil || err.Status != 400 || err.Param != c.param || !strings.Contains(err.Message, c.msg) {
			t.Errorf("%s: got %+v, want param %s with %q", c.body, err, c.param, c.msg)
		}
	}
}

// FuzzDecodeResponses: any body decodes or fails with a 400, and what
// decodes renders to valid chat messages JSON.
func FuzzDecodeResponses(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("..", "tests", "e2e", "testdata", "responses", "*.json"))
	for _, p := range files {
		if data, err := os.ReadFile(p); err == nil {
			f.Add(string(data))
		}
	}
	f.Add(`{"input":[{"type":"reasoning","content":[{"text":"r"}]},{"type":"function_call","name":"f","arguments":"{"}]}`)
	f.Fuzz(func(t *testing.T, body string) {
		r, err := decodeResponses(body)
		if err != nil {
			if err.Status != 400 {
				t.Fatalf("status %d", err.Status)
			}
			return
		}
		b := append(appendConvMsgs([]byte{'['}, 0, r.input), ']')
		if !json.Valid(b) || (r.chat.tools != nil && !json.Valid(r.chat.tools)) {
			t.Fatalf("invalid JSON: %s %s", b, r.chat.tools)
		}
	})
}
