package server

import (
	"bufio"
	"bytes"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// genOutputs is a generation's outputs: thinking, blank lines, an answer,
// two tool calls. split cuts every text into single bytes, as a
// token-by-token pipeline may deliver it.
func genOutputs(split bool) []output {
	outs := []output{
		{kind: outReasoning, text: "Think, then answer."},
		{kind: outContent, text: "\n\n"},
		{kind: outContent, text: "Answer: \"42\""},
		{kind: outCallStart, index: 0, id: "call_A", name: "f"},
		{kind: outCallArgs, index: 0, text: `{"a": 1}`},
		{kind: outContent, text: "\n"},
		{kind: outCallStart, index: 1, id: "call_B", name: "g"},
	}
	if !split {
		return outs
	}
	var out []output
	for _, o := range outs {
		if o.kind == outCallStart {
			out = append(out, o)
			continue
		}
		for i := 0; i < len(o.text); i++ {
			c := o
			c.text = o.text[i : i+1]
			out = append(out, c)
		}
	}
	return out
}

var doneResult = &result{finish: "tool_calls", promptTokens: 20, completionTokens: 9, cached: 16}

func TestAnthropicEncoder(t *testing.T) {
	const wantMsg = `{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[` +
		`{"type":"thinking","thinking":"Think, then answer.","signature":"SIG"},{"type":"text","text":"Answer: \"42\""},` +
		`{"type":"tool_use","id":"toolu_A","name":"f","input":{"a": 1}},{"type":"tool_use","id":"toolu_B","name":"g","input":{}}],` +
		`"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":4,"cache_creation_input_tokens":0,"cache_read_input_tokens":16,"output_tokens":9}}`
	wantMsgSig := strings.Replace(wantMsg, "SIG", signature("Think, then answer."), 1)
	for _, split := range []bool{false, true} {
		e := &anthropicEncoder{id: "msg_1", model: "m"}
		for _, o := range genOutputs(split) {
			e.emit(&o)
		}
		if got := string(e.appendMessage(nil, doneResult)); got != wantMsgSig {
			t.Errorf("split %v:\n got %s\nwant %s", split, got, wantMsgSig)
		}

		var buf bytes.Buffer
		w := bufio.NewWriter(&buf)
		e = &anthropicEncoder{id: "msg_1", model: "m", w: w}
		e.start(20)
		for _, o := range genOutputs(split) {
			if err := e.emit(&o); err != nil {
				t.Fatal(err)
			}
		}
		e.end(doneResult)
		// Assemble the stream back into the message.
		var names []string
		msg := ""
		var blocks []map[string]string
		for _, ev := range strings.Split(strings.TrimSuffix(buf.String(), "\n\n"), "\n\n") {
			name, data, ok := strings.Cut(ev, "\ndata: ")
			name = strings.TrimPrefix(name, "event: ")
			if !ok || !gjson.Valid(data) || gjson.Get(data, "type").Str != name {
				t.Fatalf("bad event %q", ev)
			}
			d := gjson.Parse(data)
			if len(names) == 0 || names[len(names)-1] != name {
				names = append(names, name)
			}
			switch name {
			case "message_start":
				msg = d.Get("message.id").Str
			case "content_block_start":
				cb := d.Get("content_block")
				blocks = append(blocks, map[string]string{"type": cb.Get("type").Str, "id": cb.Get("id").Str, "name": cb.Get("name").Str})
			case "content_block_delta":
				b := blocks[d.Get("index").Int()]
				for _, k := range []string{"text", "thinking", "signature", "partial_json"} {
					b[k] += d.Get("delta." + k).Str
				}
			case "message_delta":
				if d.Get("delta.stop_reason").Str != "tool_use" || d.Get("usage.output_tokens").Int() != 9 {
					t.Errorf("message_delta %s", data)
				}
			}
		}
		wantNames := "message_start ping content_block_start content_block_delta content_block_stop content_block_start content_block_delta " +
			"content_block_stop content_block_start content_block_delta content_block_stop content_block_start content_block_stop message_delta message_stop"
		if got := strings.Join(names, " "); got != wantNames || msg != "msg_1" {
			t.Errorf("split %v: events\n got %s\nwant %s", split, got, wantNames)
		}
		m := gjson.Parse(wantMsgSig)
		for i, b := range blocks {
			c := m.Get("content").Array()[i]
			if b["type"] != c.Get("type").Str || b["text"] != c.Get("text").Str || b["thinking"] != c.Get("thinking").Str ||
				b["signature"] != c.Get("signature").Str || b["id"] != c.Get("id").Str {
				t.Errorf("split %v: block %d %v, want %s", split, i, b, c.Raw)
			}
			if b["type"] == "tool_use" && strings.ReplaceAll(b["partial_json"], " ", "") != strings.ReplaceAll(strings.ReplaceAll(c.Get("input").Raw, " ", ""), "{}", "") {
				t.Errorf("block %d input %q, want %s", i, b["partial_json"], c.Get("input").Raw)
			}
		}
	}
}

func TestResponsesEncoder(t *testing.T) {
	rr := &responsesRequest{chat: newConvRequest(), store: true, maxOutput: -1}
	for _, split := range []bool{false, true} {
		e := &responsesEncoder{req: rr, id: "resp_1", model: "m", created: 7}
		for _, o := range genOutputs(split) {
			e.emit(&o)
		}
		whole := gjson.ParseBytes(e.appendResponse(nil, doneResult))
		out := whole.Get("output").Array()
		if len(out) != 4 || out[0].Get("type").Str != "reasoning" || out[0].Get("content.0.text").Str != "Think, then answer." ||
			out[1].Get("content.0.text").Str != `Answer: "42"` || out[2].Get("call_id").Str != "call_A" || out[2].Get("arguments").Str != `{"a": 1}` ||
			out[3].Get("name").Str != "g" || out[3].Get("arguments").Str != "{}" || whole.Get("status").Str != "completed" ||
			whole.Get("usage.input_tokens_details.cached_tokens").Int() != 16 || whole.Get("usage.total_tokens").Int() != 29 {
			t.Errorf("split %v: %s", split, whole.Raw)
		}
		conv := string(appendConvMsgs(nil, 0, e.conversation()))
		if want := `{"role":"assistant","content":"Answer: \"42\"","reasoning_content":"Think, then answer.","tool_calls":[` +
			`{"id":"call_A","type":"function","function":{"name":"f","arguments":"{\"a\": 1}"}},{"id":"call_B","type":"function","function":{"name":"g","arguments":"{}"}}]}`; conv != want {
			t.Errorf("conversation\n got %s\nwant %s", conv, want)
		}

		var buf bytes.Buffer
		e = &responsesEncoder{req: rr, id: "resp_1", model: "m", created: 7, w: bufio.NewWriter(&buf)}
		e.start()
		for _, o := range genOutputs(split) {
			e.emit(&o)
		}
		final := e.end(doneResult)
		if string(final) != string(e.appendResponse(nil, doneResult)) || len(gjson.GetBytes(final, "output").Array()) != 4 {
			t.Errorf("streamed final response: %s", final)
		}
		var names []string
		texts := map[string]string{}
		for i, ev := range strings.Split(strings.TrimSuffix(buf.String(), "\n\n"), "\n\n") {
			name, data, ok := strings.Cut(ev, "\ndata: ")
			name = strings.TrimPrefix(name, "event: ")
			d := gjson.Parse(data)
			if !ok || !gjson.Valid(data) || d.Get("type").Str != name || d.Get("sequence_number").Int() != int64(i) {
				t.Fatalf("bad event %d %q", i, ev)
			}
			if len(names) == 0 || names[len(names)-1] != name {
				names = append(names, name)
			}
			texts[d.Get("item_id").Str+name] += d.Get("delta").Str
		}
		wantNames := "response.created response.in_progress " +
			"response.output_item.added response.content_part.added response.reasoning_text.delta response.reasoning_text.done response.content_part.done response.output_item.done " +
			"response.output_item.added response.content_part.added response.output_text.delta response.output_text.done response.content_part.done response.output_item.done " +
			"response.output_item.added response.function_call_arguments.delta response.function_call_arguments.done response.output_item.done " +
			"response.output_item.added response.function_call_arguments.done response.output_item.done response.completed"
		if got := strings.Join(names, " "); got != wantNames {
			t.Errorf("split %v: events\n got %s\nwant %s", split, got, wantNames)
		}
		if got := texts[e.items[1].id+"response.output_text.delta"]; got != `Answer: "42"` {
			t.Errorf("split %v: text deltas %q", split, got)
		}
	}
	// A cut generation is incomplete; a failed one carries the error.
	e := &responsesEncoder{req: rr, id: "resp_2", model: "m"}
	if r := gjson.ParseBytes(e.appendResponse(nil, &result{finish: "length"})); r.Get("status").Str != "incomplete" ||
		r.Get("incomplete_details.reason").Str != "max_output_tokens" {
		t.Errorf("length: %s", r.Raw)
	}
	if r := gjson.ParseBytes(e.appendResponse(nil, &result{finish: "error"})); r.Get("status").Str != "failed" || r.Get("error.message").Str == "" {
		t.Errorf("error: %s", r.Raw)
	}
}

func TestAnthropicStopReasons(t *testing.T) {
	cases := []struct {
		res  result
		want string
	}{
		{result{finish: "stop"}, `"stop_reason":"end_turn","stop_sequence":null`},
		{result{finish: "stop", stopString: "END"}, `"stop_reason":"stop_sequence","stop_sequence":"END"`},
		{result{finish: "length"}, `"stop_reason":"max_tokens","stop_sequence":null`},
		{result{finish: "tool_calls"}, `"stop_reason":"tool_use","stop_sequence":null`},
	}
	for _, c := range cases {
		if got := string(appendStopReason(nil, &c.res)); got != c.want {
			t.Errorf("%+v: %s, want %s", c.res, got, c.want)
		}
	}
}

func TestAnthropicErrorShape(t *testing.T) {
	for status, typ := range map[int]string{400: "invalid_request_error", 401: "authentication_error", 404: "not_found_error",
		413: "request_too_large", 429: "rate_limit_error", 500: "api_error", 503: "overloaded_error"} {
		got := string(appendAnthropicError(nil, &APIError{Status: status, Message: `bad "x"`}))
		if want := `{"type":"error","error":{"type":"` + typ + `","message":"bad \"x\""}}`; got != want {
			t.Errorf("%d: %s, want %s", status, got, want)
		}
	}
}

func TestClampToContext(t *testing.T) {
	s := &Server{ctxLen: 100}
	for _, c := range []struct{ prompt, asked, want int }{{10, 32000, 90}, {10, 50, 50}, {99, 5, 1}, {100, 5, 5}, {150, 5, 5}} {
		j := &job{prompt: make([]int32, c.prompt), maxTokens: c.asked}
		s.clampToContext(j)
		if j.maxTokens != c.want {
			t.Errorf("prompt %d, asked %d: %d, want %d", c.prompt, c.asked, j.maxTokens, c.want)
		}
	}
}
