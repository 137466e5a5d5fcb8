package server

import (
	"encoding/json"
	"strings"
	"testing"
)

const vocab = 1000

func TestDecodeChatErrors(t *testing.T) {
	m := `"messages":[{"role":"user","content":"hi"}]`
	cases := []struct{ body, param, inMsg string }{
		{`{`, "", "not valid JSON"},
		{`"x"`, "", "JSON object"},
		{`{}`, "messages", "required"},
		{`{"messages":{}}`, "messages", "array"},
		{`{"messages":[]}`, "messages", "empty"},
		{`{"messages":["hi"]}`, "messages[0]", "object"},
		{`{"messages":[{"content":"hi"}]}`, "messages[0].role", "required"},
		{`{"messages":[{"role":"user"}]}`, "messages[0].content", "required"},
		{`{"messages":[{"role":"user","content":"a"},{"role":"robot","content":"b"}]}`, "messages[1].role", "robot"},
		{`{"messages":[{"role":"user","content":[{"type":"text"}]}]}`, "messages[0].content[0].text", "string"},
		{`{"messages":[{"role":"user","content":[{"type":"input_audio"}]}]}`, "messages[0].content[0]", "not supported"},
		{`{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}`, "messages[0].content[0]", "no vision"},
		{`{"messages":[{"role":"user","content":[{"type":"weird"}]}]}`, "messages[0].content[0].type", "weird"},
		{`{"messages":[{"role":"user","content":"x","tool_calls":[]}]}`, "messages[0].tool_calls", "assistant"},
		{`{"messages":[{"role":"assistant","tool_calls":[{"function":{"arguments":"{}"}}]}]}`, "messages[0].tool_calls[0].function.name", "name"},
		{`{"messages":[{"role":"assistant","content":"","reasoning_content":5}]}`, "messages[0].reasoning_content", "string"},
		{`{` + m + `,"max_tokens":-1}`, "max_tokens", ">= 1"},
		{`{` + m + `,"max_completion_tokens":"5"}`, "max_completion_tokens", "integer"},
		{`{` + m + `,"temperature":"hot"}`, "temperature", "number"},
		{`{` + m + `,"top_k":-2}`, "top_k", ">= -1"},
		{`{` + m + `,"seed":1.5}`, "seed", "integer"},
		{`{` + m + `,"stop":5}`, "stop", "string"},
		{`{` + m + `,"stop":["` + strings.Repeat("x", 2000) + `"]}`, "stop", "1024"},
		{`{` + m + `,"stop_token_ids":[5000]}`, "stop_token_ids[0]", "vocabulary"},
		{`{` + m + `,"logit_bias":{"5000":1}}`, "logit_bias", "vocabulary"},
		{`{` + m + `,"logit_bias":{"5":"x"}}`, `logit_bias["5"]`, "number"},
		{`{` + m + `,"n":3}`, "n", "not supported"},
		{`{` + m + `,"stream_options":true}`, "stream_options", "object"},
		{`{` + m + `,"stream_options":{"include_usage":1}}`, "stream_options.include_usage", "boolean"},
		{`{` + m + `,"response_format":{"type":"json_schema"}}`, "response_format.json_schema", "must be an object"},
		{`{` + m + `,"response_format":{"type":"xml"}}`, "response_format.type", "must be"},
		{`{` + m + `,"response_format":{"type":"yaml"}}`, "response_format.type", "yaml"},
		{`{` + m + `,"tools":{}}`, "tools", "array"},
		{`{` + m + `,"tools":[{"type":"retrieval"}]}`, "tools[0].type", "function"},
		{`{` + m + `,"tools":[{"type":"function","function":{"name":""}}]}`, "tools[0].function.name", "non-empty"},
		{`{` + m + `,"tools":[{"type":"function","function":{"name":"f","parameters":[]}}]}`, "tools[0].function.parameters", "schema"},
		{`{` + m + `,"tool_choice":"sometimes"}`, "tool_choice", "sometimes"},
		{`{` + m + `,"tool_choice":{"type":"function"}}`, "tool_choice.function.name", "name"},
		{`{` + m + `,"parallel_tool_calls":"no"}`, "parallel_tool_calls", "boolean"},
		{`{` + m + `,"chat_template_kwargs":[]}`, "chat_template_kwargs", "object"},
		{`{` + m + `,"thinking_budget":-5}`, "thinking_budget", ">= 0"},
		{`{` + m + `,"functions":[]}`, "functions", "not supported"},
		{`{` + m + `,"model":5}`, "model", "string"},
	}
	for _, c := range cases {
		_, err := decodeChat(c.body, vocab)
		if err == nil {
			t.Errorf("%s: no error", c.body)
			continue
		}
		if err.Status != 400 || err.Param != c.param || !strings.Contains(err.Message, c.inMsg) || err.Type != "invalid_request_error" {
			t.Errorf("%.80s: got %d param %q %q; want param %q mentioning %q", c.body, err.Status, err.Param, err.Message, c.param, c.inMsg)
		}
	}
}

func TestDecodeChatValues(t *testing.T) {
	body := `{"model":"m","messages":[
		{"role":"developer","content":"sys"},
		{"role":"user","name":"bob","content":[{"type":"text","text":"a"},{"type":"input_text","text":"b"}],"extra":{"k":[1,2.0]}},
		{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"z\":1,\"a\":2}"}}]},
		{"role":"tool","tool_call_id":"c1","content":"42"}],
		"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"z":{},"a":{}}}}}],
		"tool_choice":{"type":"function","function":{"name":"f"}},"parallel_tool_calls":false,
		"max_completion_tokens":7,"temperature":0.5,"top_p":0.9,"top_k":-1,"min_p":0.1,"seed":-1,
		"presence_penalty":0.5,"frequency_penalty":-0.5,"repetition_penalty":1.1,
		"stop":"END","logit_bias":{"5":-100,"7":2.5},"logprobs":true,"top_logprobs":3,
		"stream":true,"stream_options":{"include_usage":true},"chat_template_kwargs":{"enable_thinking":false},
		"reasoning_effort":"low","max_thinking_tokens":9,"response_format":{"type":"json_object"},"ignore_eos":true,"n":1}`
	r, err := decodeChat(body, vocab)
	if err != nil {
		t.Fatal(err)
	}
	wantMsgs := `[{"role":"system","content":"sys"},` +
		`{"role":"user","name":"bob","content":"a\nb","extra":{"k":[1,2.0]}},` +
		`{"role":"assistant","content":"","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"z\":1,\"a\":2}"}}]},` +
		`{"role":"tool","tool_call_id":"c1","content":"42"}]`
	if string(r.messages) != wantMsgs {
		t.Errorf("messages:\n got %s\nwant %s", r.messages, wantMsgs)
	}
	if !json.Valid(r.messages) {
		t.Error("normalised messages are not valid JSON")
	}
	g := r.gen
	switch {
	case g.model != "m" || g.maxTokens != 7 || *g.temperature != 0.5 || *g.topP != 0.9 || *g.topK != -1 || *g.minP != 0.1:
		t.Errorf("sampling %+v", g)
	case *g.seed != ^uint64(0) || *g.presencePenalty != 0.5 || *g.frequencyPenalty != -0.5 || *g.repetitionPenalty != 1.1:
		t.Errorf("penalties/seed %+v", g)
	case len(g.stop) != 1 || g.stop[0] != "END" || g.logitBias[5] != -100 || g.logitBias[7] != 2.5 || !g.ignoreEOS:
		t.Errorf("stop/bias %+v", g)
	case !r.logprobs || r.topLogprobs != 3 || !r.stream || !r.includeUsage || r.thinkBudget != 9 || r.reasoningEffort != "low":
		t.Errorf("flags %+v", r)
	case r.toolChoice != "function" || r.toolName != "f" || r.parallelToolCalls || len(r.toolList) != 1 || string(r.kwargs["enable_thinking"]) != "false":
		t.Errorf("tools %+v", r)
	}
	if string(r.toolList[0].Parameters) != `{"type":"object","properties":{"z":{},"a":{}}}` {
		t.Errorf("tool schema lost its key order: %s", r.toolList[0].Parameters)
	}
}

func TestDecodeChatDuplicateKeys(t *testing.T) {
	r, err := decodeChat(`{"messages":[{"role":"user","content":"first","content":"second"}],"max_tokens":1,"max_tokens":2}`, vocab)
	if err != nil {
		t.Fatal(err)
	}
	if string(r.messages) != `[{"role":"user","content":"second"}]` || r.gen.maxTokens != 2 {
		t.Errorf("the last duplicate must win: %s, max_tokens %d", r.messages, r.gen.maxTokens)
	}
}

func TestDecodeCompletion(t *testing.T) {
	cases := []struct {
		body    string
		prompt  string
		ids     []int32
		errPar  string
		maxToks int
	}{
		{body: `{"prompt":"hi"}`, prompt: "hi", maxToks: 16},
		{body: `{"prompt":["hi"],"max_tokens":0,"echo":true,"logprobs":0}`, prompt: "hi", maxToks: 0},
		{body: `{"prompt":[1,2,3],"max_tokens":5}`, ids: []int32{1, 2, 3}, maxToks: 5},
		{body: `{"prompt":[[4,5]]}`, ids: []int32{4, 5}, maxToks: 16},
		{body: `{"prompt":[[4,5],[6]]}`, errPar: "prompt"},
		{body: `{"prompt":[1,"a"]}`, errPar: "prompt[1]"},
		{body: `{"prompt":[1,-1]}`, errPar: "prompt[1]"},
		{body: `{"prompt":[[]]}`, errPar: "prompt[0]"},
		{body: `{"prompt":[]}`, errPar: "prompt"},
		{body: `{"prompt":5}`, errPar: "prompt"},
		{body: `{"prompt":"a","max_tokens":-1}`, errPar: "max_tokens"},
		{body: `{"prompt":"a","max_tokens":0,"stream":true}`, errPar: "max_tokens"},
		{body: `{"prompt":"a","logprobs":true}`, errPar: "logprobs"},
	}
	for _, c := range cases {
		r, err := decodeCompletion(c.body, vocab)
		if c.errPar != "" {
			if err == nil || err.Param != c.errPar || err.Status != 400 {
				t.Errorf("%s: error %+v, want param %q", c.body, err, c.errPar)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.body, err)
			continue
		}
		if r.prompt != c.prompt || len(r.promptIDs) != len(c.ids) || r.gen.maxTokens != c.maxToks {
			t.Errorf("%s: got %+v", c.body, r)
		}
	}
}

// checkDecodeError is what every decoder error must be: a 4xx in OpenAI's
// shape with a message.
func checkDecodeError(t *testing.T, body string, err *APIError) {
	if err == nil {
		return
	}
	if err.Status < 400 || err.Status >= 500 || err.Message == "" || err.Type == "" {
		t.Fatalf("%q: bad error %+v", body, err)
	}
	if !json.Valid(appendErrorJSON(nil, err)) {
		t.Fatalf("%q: error JSON invalid", body)
	}
}

func FuzzDecodeChat(f *testing.F) {
	for _, s := range []string{
		`{"messages":[{"role":"user","content":"hi"}]}`,
		`{"messages":[{"role":"user","content":[{"type":"text","text":"a"}]}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"required"}`,
		`{"messages":[{"role":"assistant","content":null,"tool_calls":[{"function":{"name":"f","arguments":"{}"}}]}],"stop":["a","b"],"logit_bias":{"1":2}}`,
		`{"messages":[],"max_tokens":1e3,"seed":-9223372036854775808}`,
		`{"messages":[{"role":"user","content":"\u00e9\ud800"}],"response_format":{"type":"json_schema"}}`,
		`{"messages":[{"role":"user","content":"x"}],"guided_choice":["a","b"],"structured_outputs":{"regex":"a+"}}`,
		`{"messages":[{"role":"user","content":"x"}],"guided_json":"{\"type\":\"object\"}","grammar":""}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		r, err := decodeChat(body, vocab)
		checkDecodeError(t, body, err)
		if err == nil && !json.Valid(r.messages) {
			t.Fatalf("%q: normalised messages are not valid JSON: %s", body, r.messages)
		}
	})
}

func FuzzDecodeCompletion(f *testing.F) {
	for _, s := range []string{
		`{"prompt":"hi","max_tokens":3,"echo":true,"logprobs":2}`,
		`{"prompt":[1,2,3]}`, `{"prompt":[[1,2]],"stream":true,"stream_options":{"include_usage":true}}`,
		`{"prompt":["a","b"]}`, `{"prompt":"x","stop":"y","suffix":""}`,
		`{"prompt":"x","guided_regex":"[a-z]+","structured_outputs":{"json_object":true}}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		r, err := decodeCompletion(body, vocab)
		checkDecodeError(t, body, err)
		if err == nil {
			if (r.prompt == "") == (r.promptIDs == nil) {
				t.Fatalf("%q: exactly one of prompt text and ids must be set", body)
			}
			for _, id := range r.promptIDs {
				if id < 0 || id >= vocab {
					t.Fatalf("%q: id %d out of range", body, id)
				}
			}
		}
	})
}
