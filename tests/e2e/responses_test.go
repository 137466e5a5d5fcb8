package e2e

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// respItem is an output item assembled from a Responses stream.
type respItem struct {
	Type, ID, Text, CallID, Name, Args string
}

// itemsOf reads a response object's output in that form.
func itemsOf(r gjson.Result) []respItem {
	var out []respItem
	for _, it := range r.Get("output").Array() {
		ri := respItem{Type: it.Get("type").Str, ID: it.Get("id").Str, CallID: it.Get("call_id").Str,
			Name: it.Get("name").Str, Args: it.Get("arguments").Str}
		for _, p := range it.Get("content").Array() {
			ri.Text += p.Get("text").Str
		}
		out = append(out, ri)
	}
	return out
}

// assembleResponses checks a Responses stream (sequence numbers 0, 1, …;
// created, in_progress, items added, deltas and done in order, then one
// terminal event) and returns the assembled items and the final response.
func assembleResponses(t *testing.T, evs []sseEvent) ([]respItem, gjson.Result) {
	t.Helper()
	if len(evs) < 3 || evs[0].name != "response.created" || evs[1].name != "response.in_progress" {
		t.Fatalf("event order: %s", eventNames(evs))
	}
	for i, ev := range evs {
		if ev.data.Get("sequence_number").Int() != int64(i) {
			t.Fatalf("event %d (%s) has sequence_number %s", i, ev.name, ev.data.Get("sequence_number").Raw)
		}
	}
	id := evs[0].data.Get("response.id").Str
	if !strings.HasPrefix(id, "resp_") || evs[0].data.Get("response.status").Str != "in_progress" {
		t.Fatalf("response.created: %s", evs[0].data.Raw)
	}
	var items []respItem
	open := -1
	last := evs[len(evs)-1]
	for _, ev := range evs[2 : len(evs)-1] {
		d := ev.data
		idx := int(d.Get("output_index").Int())
		if ev.name != "response.output_item.added" && (idx != open || (d.Get("item_id").Exists() && d.Get("item_id").Str != items[idx].ID)) {
			t.Fatalf("%s for item %d (%s), open %d", ev.name, idx, d.Get("item_id").Str, open)
		}
		switch ev.name {
		case "response.output_item.added":
			if open != -1 || idx != len(items) {
				t.Fatalf("item %d added while %d open", idx, open)
			}
			open = idx
			it := d.Get("item")
			items = append(items, respItem{Type: it.Get("type").Str, ID: it.Get("id").Str, CallID: it.Get("call_id").Str, Name: it.Get("name").Str})
		case "response.output_text.delta", "response.reasoning_text.delta":
			items[idx].Text += d.Get("delta").Str
		case "response.function_call_arguments.delta":
			items[idx].Args += d.Get("delta").Str
		case "response.output_text.done", "response.reasoning_text.done":
			if d.Get("text").Str != items[idx].Text {
				t.Errorf("%s text %q, deltas %q", ev.name, d.Get("text").Str, items[idx].Text)
			}
		case "response.function_call_arguments.done":
			if d.Get("arguments").Str != items[idx].Args && !(items[idx].Args == "" && d.Get("arguments").Str == "{}") {
				t.Errorf("arguments.done %q, deltas %q", d.Get("arguments").Str, items[idx].Args)
			}
			items[idx].Args = d.Get("arguments").Str
		case "response.content_part.added", "response.content_part.done":
		case "response.output_item.done":
			open = -1
		default:
			t.Fatalf("unexpected event %s", ev.name)
		}
	}
	if open != -1 {
		t.Fatalf("item %d not done: %s", open, eventNames(evs))
	}
	switch last.name {
	case "response.completed", "response.incomplete", "response.failed":
	default:
		t.Fatalf("last event %s", last.name)
	}
	final := last.data.Get("response")
	if final.Get("id").Str != id || "response."+final.Get("status").Str != last.name {
		t.Fatalf("final response: %s", final.Raw)
	}
	return items, final
}

func TestResponses(t *testing.T) {
	ts := shared(t)
	body := map[string]any{"model": "gpt-5-codex", "input": "Hello, who are you?", "instructions": "Be brief.",
		"max_output_tokens": 8, "temperature": 0}
	st, _, r := post(t, ts.URL+"/v1/responses", body)
	if st != 200 || r.Get("object").Str != "response" || r.Get("model").Str != "gpt-5-codex" || r.Get("instructions").Str != "Be brief." {
		t.Fatalf("%d %s", st, r.Raw)
	}
	items := itemsOf(r)
	if len(items) != 1 || items[0].Type != "message" || items[0].Text == "" || r.Get("output.0.role").Str != "assistant" ||
		r.Get("output.0.content.0.type").Str != "output_text" {
		t.Fatalf("output: %s", r.Get("output").Raw)
	}
	u := r.Get("usage")
	if r.Get("status").Str != "incomplete" || r.Get("incomplete_details.reason").Str != "max_output_tokens" ||
		u.Get("output_tokens").Int() != 8 || u.Get("total_tokens").Int() != u.Get("input_tokens").Int()+8 {
		t.Errorf("status/usage: %s", r.Raw)
	}
	// Stored by default: GET returns it, DELETE removes it.
	id := r.Get("id").Str
	if st, data := get(t, ts.URL+"/v1/responses/"+id); st != 200 || gjson.GetBytes(data, "id").Str != id ||
		gjson.GetBytes(data, "output.0.content.0.text").Str != items[0].Text {
		t.Errorf("GET: %d %s", st, data)
	}

	// Streaming assembles to the same output.
	body["stream"] = true
	sitems, final := assembleResponses(t, namedEvents(t, ts.URL+"/v1/responses", body))
	if len(sitems) != 1 || sitems[0].Text != items[0].Text || final.Get("status").Str != "incomplete" ||
		final.Get("usage.output_tokens").Int() != 8 || itemsOf(final)[0].Text != items[0].Text {
		t.Errorf("stream: %+v %s", sitems, final.Raw)
	}
	if st, data := get(t, ts.URL+"/v1/responses/"+final.Get("id").Str); st != 200 || gjson.GetBytes(data, "status").Str != "incomplete" {
		t.Errorf("GET streamed: %d %s", st, data)
	}

	// previous_response_id continues the stored conversation: the prompt
	// grows by the earlier turn.
	delete(body, "stream")
	body["input"] = "And then?"
	body["previous_response_id"] = id
	st, _, r2 := post(t, ts.URL+"/v1/responses", body)
	if st != 200 || r2.Get("previous_response_id").Str != id || r2.Get("usage.input_tokens").Int() <= u.Get("input_tokens").Int()+8 {
		t.Errorf("continued: %d %s (first prompt %d tokens)", st, r2.Raw, u.Get("input_tokens").Int())
	}

	req, _ := http.NewRequest("DELETE", ts.URL+"/v1/responses/"+id, nil)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("DELETE: %d", resp.StatusCode)
	}
	if st, data := get(t, ts.URL+"/v1/responses/"+id); st != 404 || gjson.GetBytes(data, "error.code").Str != "not_found" {
		t.Errorf("GET after DELETE: %d %s", st, data)
	}
	st, _, r = post(t, ts.URL+"/v1/responses", body)
	if st != 404 || r.Get("error.param").Str != "previous_response_id" {
		t.Errorf("deleted previous_response_id: %d %s", st, r.Raw)
	}

	// store: false keeps nothing.
	st, _, r = post(t, ts.URL+"/v1/responses", map[string]any{"input": "hi", "max_output_tokens": 2, "store": false})
	if st != 200 || r.Get("store").Type != gjson.False {
		t.Fatalf("store false: %d %s", st, r.Raw)
	}
	if st, _ := get(t, ts.URL+"/v1/responses/"+r.Get("id").Str); st != 404 {
		t.Errorf("GET of an unstored response: %d", st)
	}
}

func TestResponsesErrors(t *testing.T) {
	ts := shared(t)
	cases := []struct {
		name, body, param, msg string
	}{
		{"no input", `{"model":"m"}`, "input", "input is required"},
		{"bad item", `{"input":[{"type":"teleport"}]}`, "input[0].type", "not a supported input item"},
		{"bad effort", `{"input":"hi","reasoning":{"effort":"maximal"}}`, "reasoning.effort", "reasoning.effort"},
		{"bad max", `{"input":"hi","max_output_tokens":0}`, "max_output_tokens", "max_output_tokens"},
		{"forced unknown", `{"input":"hi","tools":[{"type":"function","name":"a"}],"tool_choice":{"type":"function","name":"b"}}`, "tool_choice", "not in tools"},
		{"image", `{"input":[{"role":"user","content":[{"type":"input_image","image_url":"data:image/png;base64,AA"}]}]}`, "input[0].content[0]", "no vision"},
		{"json schema", `{"input":"hi","text":{"format":{"type":"json_schema","name":"x","strict":true,"schema":{"type":"number","multipleOf":3}}}}`, "text.format.schema", "/multipleOf: not supported"},
	}
	for _, c := range cases {
		st, _, r := post(t, ts.URL+"/v1/responses", c.body)
		if st != 400 || r.Get("error.type").Str != "invalid_request_error" || r.Get("error.param").Str != c.param ||
			!strings.Contains(r.Get("error.message").Str, c.msg) {
			t.Errorf("%s: %d %s", c.name, st, r.Raw)
		}
	}
	if st, data := get(t, ts.URL+"/v1/responses/resp_nope"); st != 404 || gjson.GetBytes(data, "error.type").Str != "invalid_request_error" {
		t.Errorf("GET unknown: %d %s", st, data)
	}
}

// TestResponsesFixtures sends requests in the shapes Codex sends
// (testdata/responses/*.json: instructions, developer messages, function
// and hosted tools, reasoning items, function calls and their outputs,
// include, prompt_cache_key, store false), whole and streamed.
func TestResponsesFixtures(t *testing.T) {
	ts := shared(t)
	files, _ := filepath.Glob(filepath.Join("testdata", "responses", "*.json"))
	if len(files) == 0 {
		t.Fatal("no fixtures in testdata/responses")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var body map[string]any
			if err := json.Unmarshal(data, &body); err != nil {
				t.Fatal(err)
			}
			body["max_output_tokens"] = 6
			delete(body, "stream")
			st, _, r := post(t, ts.URL+"/v1/responses", body)
			if st != 200 || r.Get("object").Str != "response" {
				t.Fatalf("%d %s", st, r.Raw)
			}
			body["stream"] = true
			if _, final := assembleResponses(t, namedEvents(t, ts.URL+"/v1/responses", body)); final.Get("usage.input_tokens").Int() < 10 {
				t.Errorf("usage: %s", final.Get("usage").Raw)
			}
		})
	}
}

// responsesTools are the demo tools in the Responses API's flat form.
func responsesTools() []map[string]any {
	var out []map[string]any
	for _, t := range demoTools {
		fn := t["function"].(map[string]any)
		out = append(out, map[string]any{"type": "function", "name": fn["name"], "description": fn["description"],
			"parameters": fn["parameters"]})
	}
	return append(out, map[string]any{"type": "web_search"})
}

// TestDemoResponses: with the demo models, a weather question gives a
// function_call item (whole and streamed); its output continues the
// conversation through previous_response_id into an answer; reasoning
// effort none turns thinking off, the default thinks first.
func TestDemoResponses(t *testing.T) {
	forEachDemo(t, func(t *testing.T, ts *testServer) {
		body := map[string]any{"input": "What's the weather in Paris?", "tools": responsesTools(), "max_output_tokens": 200,
			"temperature": 0, "reasoning": map[string]any{"effort": "none"}}
		_, _, r := post(t, ts.URL+"/v1/responses", body)
		items := itemsOf(r)
		last := items[len(items)-1]
		if last.Type != "function_call" || last.Name != "get_weather" || !strings.HasPrefix(last.CallID, "call_") ||
			!strings.HasPrefix(last.ID, "fc_") || gjson.Get(last.Args, "city").Str != "Paris" || r.Get("status").Str != "completed" {
			t.Fatalf("want a get_weather call: %s", r.Raw)
		}
		body["stream"] = true
		sitems, _ := assembleResponses(t, namedEvents(t, ts.URL+"/v1/responses", body))
		if sl := sitems[len(sitems)-1]; sl.Type != "function_call" || sl.Name != "get_weather" || gjson.Get(sl.Args, "city").Str != "Paris" {
			t.Errorf("streamed: %+v", sitems)
		}
		delete(body, "stream")

		// The result, by previous_response_id…
		output := []map[string]any{{"type": "function_call_output", "call_id": last.CallID,
			"output": `{"city": "Paris", "temperature": 18, "unit": "celsius", "condition": "sunny"}`}}
		body["input"] = output
		body["previous_response_id"] = r.Get("id").Str
		_, _, r2 := post(t, ts.URL+"/v1/responses", body)
		if it := itemsOf(r2); len(it) == 0 || it[len(it)-1].Type != "message" || !strings.Contains(it[len(it)-1].Text, "18") {
			t.Errorf("answer after the result (previous_response_id): %s", r2.Raw)
		}
		// …and statelessly, replaying the items (as Codex does with store false).
		delete(body, "previous_response_id")
		body["store"] = false
		body["input"] = []map[string]any{{"role": "user", "content": "What's the weather in Paris?"},
			{"type": "function_call", "call_id": last.CallID, "name": last.Name, "arguments": last.Args}, output[0]}
		_, _, r3 := post(t, ts.URL+"/v1/responses", body)
		if it := itemsOf(r3); len(it) == 0 || it[len(it)-1].Text != itemsOf(r2)[len(itemsOf(r2))-1].Text {
			t.Errorf("replayed: %s, by id: %s", r3.Get("output").Raw, r2.Get("output").Raw)
		}

		// Thinking by default: a reasoning item first.
		_, _, r = post(t, ts.URL+"/v1/responses", map[string]any{"input": "What is 23 + 45?", "max_output_tokens": 300, "temperature": 0})
		items = itemsOf(r)
		if len(items) != 2 || items[0].Type != "reasoning" || items[0].Text == "" || items[1].Type != "message" || !strings.Contains(items[1].Text, "68") ||
			r.Get("usage.output_tokens_details.reasoning_tokens").Int() < 2 || r.Get("usage.output_tokens_details.reasoning_tokens").Int() >= r.Get("usage.output_tokens").Int() {
			t.Errorf("reasoning: %s", r.Raw)
		}
		sitems, _ = assembleResponses(t, namedEvents(t, ts.URL+"/v1/responses", map[string]any{"input": "What is 23 + 45?",
			"max_output_tokens": 300, "temperature": 0, "stream": true}))
		if len(sitems) != 2 || sitems[0].Text != items[0].Text || sitems[1].Text != items[1].Text {
			t.Errorf("reasoning streamed: %+v, want %+v", sitems, items)
		}
	})
}
