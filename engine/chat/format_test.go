package chat

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestDetect(t *testing.T) {
	for _, c := range []struct {
		rel       string
		tools     ToolCallStyle
		think     bool
		opens     map[string]bool // kwargs JSON -> OpensThink
		genPrompt map[string]string
	}{
		{"qwen3-tokenizer/tokenizer_config.json", ToolCallsJSON, true,
			map[string]bool{`{}`: false, `{"enable_thinking": false}`: false, `{"enable_thinking": true}`: false},
			map[string]string{`{}`: "<|im_start|>assistant\n", `{"enable_thinking": false}`: "<|im_start|>assistant\n<think>\n\n</think>\n\n"}},
		{"chat-templates/Qwen3-Coder.jinja", ToolCallsXML, false,
			map[string]bool{`{}`: false},
			map[string]string{`{}`: "<|im_start|>assistant\n"}},
		{"chat-templates/Qwen3.5-4B.jinja", ToolCallsXML, true,
			map[string]bool{`{}`: true, `{"enable_thinking": true}`: true, `{"enable_thinking": false}`: false},
			map[string]string{`{}`: "<|im_start|>assistant\n<think>\n", `{"enable_thinking": false}`: "<|im_start|>assistant\n<think>\n\n</think>\n\n"}},
	} {
		t.Run(c.rel, func(t *testing.T) {
			tm := loadTemplate(t, c.rel)
			f := tm.Format()
			if f.ToolCalls != c.tools || f.ToolCallOpen != "<tool_call>" || f.ToolCallClose != "</tool_call>" {
				t.Fatalf("format %+v, want tool calls %v", f, c.tools)
			}
			if (f.ThinkOpen == "<think>" && f.ThinkClose == "</think>") != c.think {
				t.Fatalf("format %+v, want think markers %v", f, c.think)
			}
			for kw, want := range c.opens {
				got, err := tm.OpensThink(kwargs(t, kw))
				if err != nil || got != want {
					t.Errorf("OpensThink(%s) = %v, %v; want %v", kw, got, err, want)
				}
			}
			for kw, want := range c.genPrompt {
				got, err := tm.GenerationPrompt(kwargs(t, kw))
				if err != nil || got != want {
					t.Errorf("GenerationPrompt(%s) = %q, %v; want %q", kw, got, err, want)
				}
			}
		})
	}
	if f := Detect("{{ messages }}"); f != (Format{}) {
		t.Fatalf("plain template: %+v", f)
	}
}

func kwargs(t *testing.T, s string) map[string]json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestSourceFromTokenizerConfig(t *testing.T) {
	for _, c := range []struct {
		cfg, name, want string
		fails           bool
	}{
		{`{"chat_template": "A"}`, "", "A", false},
		{`{"chat_template": [{"name": "default", "template": "D"}, {"name": "tool_use", "template": "T"}]}`, "", "D", false},
		{`{"chat_template": [{"name": "default", "template": "D"}, {"name": "tool_use", "template": "T"}]}`, "tool_use", "T", false},
		{`{"chat_template": [{"name": "default", "template": "D"}]}`, "rag", "", true},
		{`{"eos_token": "x"}`, "", "", true},
		{`{"chat_template": null}`, "", "", true},
		{`not json`, "", "", true},
	} {
		got, err := SourceFromTokenizerConfig([]byte(c.cfg), c.name)
		if (err != nil) != c.fails || got != c.want {
			t.Errorf("SourceFromTokenizerConfig(%s, %q) = %q, %v", c.cfg, c.name, got, err)
		}
	}
}

func TestRenderVariables(t *testing.T) {
	tm, err := Compile("vars", `{{ bos_token is defined }}|{{ bos_token }}|{{ eos_token }}|{{ tools is none }}|{{ documents is none }}|{{ add_generation_prompt }}|{{ flag }}|{{ messages|length }}`)
	if err != nil {
		t.Fatal(err)
	}
	msgs := json.RawMessage(`[{"role":"user","content":"x"}]`)
	for _, c := range []struct {
		r    Request
		want string
	}{
		{Request{Messages: msgs}, "False|||True|True|False||1"},
		{Request{Messages: msgs, BOSToken: "<s>", EOSToken: "</s>", AddGenerationPrompt: true, Tools: json.RawMessage(`null`)}, "True|<s>|</s>|True|True|True||1"},
		{Request{Messages: msgs, EOSToken: "</s>", Kwargs: map[string]json.RawMessage{"eos_token": json.RawMessage(`"E"`), "flag": json.RawMessage(`2.0`)}}, "False||E|True|True|False|2.0|1"},
		{Request{Messages: msgs, Tools: json.RawMessage(`[]`)}, "False|||False|True|False||1"},
	} {
		got, err := tm.Render(c.r)
		if err != nil || got != c.want {
			t.Errorf("Render(%+v) = %q, %v; want %q", c.r, got, err, c.want)
		}
	}
	for _, r := range []Request{
		{Messages: json.RawMessage(`{"role": "user"}`)},
		{Messages: json.RawMessage(`[`)},
		{Messages: msgs, Tools: json.RawMessage(`[`)},
		{Messages: msgs, Kwargs: map[string]json.RawMessage{"messages": json.RawMessage(`[]`)}},
		{Messages: msgs, Kwargs: map[string]json.RawMessage{"x": json.RawMessage(`{`)}},
	} {
		if _, err := tm.Render(r); err == nil {
			t.Errorf("Render(%s, %s, %v) succeeded", r.Messages, r.Tools, r.Kwargs)
		}
	}
}

func TestRenderDecodesArguments(t *testing.T) {
	tm, err := Compile("args", `{% for m in messages %}{% for c in m.tool_calls %}{{ (c.function or c).arguments is mapping }}:{{ (c.function or c).arguments|tojson }};{% endfor %}{% endfor %}`)
	if err != nil {
		t.Fatal(err)
	}
	msgs := `[{"role":"assistant","tool_calls":[
		{"function":{"name":"a","arguments":"{\"z\": 1, \"a\": 2.0, \"n\": {\"x\": [true, null]}}"}},
		{"function":{"name":"b","arguments":"not json"}},
		{"function":{"name":"c","arguments":"[1, 2]"}},
		{"function":{"name":"d","arguments":{"k": "already"}}},
		{"name":"e","arguments":" {\"top\": \"level\"} "}]}]`
	got, err := tm.Render(Request{Messages: json.RawMessage(msgs)})
	if err != nil {
		t.Fatal(err)
	}
	want := `True:{"z": 1, "a": 2.0, "n": {"x": [true, null]}};False:"not json";False:"[1, 2]";True:{"k": "already"};True:{"top": "level"};`
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

func TestRenderErrors(t *testing.T) {
	tm := loadTemplate(t, "chat-templates/Qwen3.5-4B.jinja")
	// transformers refuses an empty conversation before the template runs.
	_, err := tm.Render(Request{Messages: json.RawMessage(`[]`)})
	var re *RuntimeError
	if !errors.As(err, &re) || re.Type != "ValueError" || !strings.Contains(re.Msg, "empty conversation") {
		t.Fatalf("got %v", err)
	}
	// The template's own raise_exception: a system message after the first.
	_, err = tm.Render(Request{Messages: json.RawMessage(`[{"role":"user","content":"a"},{"role":"system","content":"b"}]`)})
	var te *TemplateError
	if !errors.As(err, &te) || te.Message != "System message must be at the beginning." {
		t.Fatalf("got %v", err)
	}
	_, err = Compile("bad", "line\n{% for %}")
	var se *SyntaxError
	if !errors.As(err, &se) || se.Line != 2 || !strings.Contains(err.Error(), `"bad"`) {
		t.Fatalf("got %v", err)
	}
}

func TestExecuteWithJSONValue(t *testing.T) {
	tm, err := Compile("exec", `{{ x.a }}|{{ x.b }}|{{ x|tojson }}`)
	if err != nil {
		t.Fatal(err)
	}
	x, err := JSONValue([]byte(`{"b": 2.0, "a": [1, "é"]}`))
	if err != nil {
		t.Fatal(err)
	}
	got, err := tm.Execute(map[string]Value{"x": x})
	if want := `[1, 'é']|2.0|{"b": 2.0, "a": [1, "é"]}`; err != nil || got != want {
		t.Fatalf("got %q, %v; want %q", got, err, want)
	}
}
