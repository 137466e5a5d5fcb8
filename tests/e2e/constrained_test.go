package e2e

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tidwall/gjson"
)

// capitalSchema has only bounded values (an enum, a boolean, a small
// integer), so that the tiny demo model's answers under it end.
var capitalSchema = map[string]any{"type": "object", "properties": map[string]any{
	"capital": map[string]any{"type": "string", "enum": []string{"Lima", "Cusco", "Paris"}},
	"sure":    map[string]any{"type": "boolean"},
	"rank":    map[string]any{"type": "integer"},
}, "required": []string{"capital", "sure"}}

// checkCapital decodes an answer under capitalSchema with encoding/json and
// checks it against the schema by hand: the keys in order, the required
// ones there, the types and the enum.
func checkCapital(t *testing.T, content string) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(content))
	dec.UseNumber()
	var keys []string
	vals := map[string]any{}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("%q: not an object (%v)", content, err)
	}
	for dec.More() {
		k, _ := dec.Token()
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("%q: %v", content, err)
		}
		keys = append(keys, k.(string))
		vals[k.(string)] = v
	}
	if _, err := dec.Token(); err != nil {
		t.Fatalf("%q: %v", content, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		t.Fatalf("%q: text after the object", content)
	}
	// The schema's properties in its order (encoding/json sorts the map's
	// keys): capital, rank (optional), sure.
	if want := []string{"capital", "rank", "sure"}; !slices.Equal(keys, want) && !slices.Equal(keys, []string{"capital", "sure"}) {
		t.Fatalf("%q: keys %v, want %v with rank optional", content, keys, want)
	}
	if c, _ := vals["capital"].(string); !slices.Contains([]string{"Lima", "Cusco", "Paris"}, c) {
		t.Fatalf("%q: capital %v outside the enum", content, vals["capital"])
	}
	if _, ok := vals["sure"].(bool); !ok {
		t.Fatalf("%q: sure is not a boolean", content)
	}
	if r, ok := vals["rank"]; ok {
		if n := string(r.(json.Number)); strings.ContainsAny(n, ".eE") {
			t.Fatalf("%q: rank %v is not an integer", content, r)
		}
	}
}

// TestConstrainedJSONSchema: response_format json_schema gives JSON of the
// schema, whole and streamed alike, with and without thinking; the
// reasoning stays free text.
func TestConstrainedJSONSchema(t *testing.T) {
	forEachDemo(t, func(t *testing.T, ts *testServer) {
		for _, think := range []bool{true, false} {
			body := map[string]any{"messages": userMsg("What is the capital of Peru?"), "max_tokens": 300, "temperature": 0,
				"chat_template_kwargs": map[string]any{"enable_thinking": think},
				"response_format":      map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "capital", "schema": capitalSchema, "strict": true}}}
			st, _, r := post(t, ts.URL+"/v1/chat/completions", body)
			ch := r.Get("choices.0")
			if st != 200 || ch.Get("finish_reason").Str != "stop" {
				t.Fatalf("thinking %v: status %d: %s", think, st, r.Raw)
			}
			content := ch.Get("message.content").Str
			checkCapital(t, content)
			if think && !strings.Contains(ch.Get("message.reasoning_content").Str, "Peru") {
				t.Errorf("the reasoning %q is not the model's free text", ch.Get("message.reasoning_content").Str)
			}
			body["stream"] = true
			d := assembleChat(t, streamEvents(t, ts.URL+"/v1/chat/completions", body))
			if d.content != content || d.finish != "stop" {
				t.Fatalf("streamed %q (%s), whole %q", d.content, d.finish, content)
			}
		}
	})
}

// TestConstrainedJSONObject: json_object answers are JSON objects; the
// demo model writes strings it never closes, so an answer cut by
// max_tokens must still be the start of one.
func TestConstrainedJSONObject(t *testing.T) {
	ts := start(t, opts{model: demoModel(t, "demo", true)})
	defer ts.close()
	for _, q := range []string{"What is the capital of Peru?", "hi", "Convert 10 kg to lb"} {
		body := map[string]any{"messages": userMsg(q), "max_tokens": 120, "seed": 7,
			"response_format": map[string]any{"type": "json_object"}}
		_, _, r := post(t, ts.URL+"/v1/chat/completions", body)
		content, finish := r.Get("choices.0.message.content").Str, r.Get("choices.0.finish_reason").Str
		var v map[string]any
		err := json.NewDecoder(strings.NewReader(content)).Decode(&v)
		switch {
		case finish == "stop" && err != nil:
			t.Fatalf("%q: %q is not an object: %v", q, content, err)
		case finish == "length" && err != nil && !errors.Is(err, io.ErrUnexpectedEOF):
			t.Fatalf("%q: %q does not start an object: %v", q, content, err)
		case finish == "length" && !strings.HasPrefix(strings.TrimSpace(content), "{"):
			t.Fatalf("%q: %q does not start an object", q, content)
		}
	}
}

// TestConstrainedResponses: the Responses API's text.format json_schema,
// echoed back as sent.
func TestConstrainedResponses(t *testing.T) {
	ts := start(t, opts{model: demoModel(t, "demo", true)})
	defer ts.close()
	format := map[string]any{"type": "json_schema", "name": "capital", "schema": capitalSchema, "strict": true}
	st, _, r := post(t, ts.URL+"/v1/responses", map[string]any{"input": "What is the capital of France?", "temperature": 0,
		"max_output_tokens": 300, "text": map[string]any{"format": format}})
	if st != 200 || r.Get("status").Str != "completed" {
		t.Fatalf("status %d: %s", st, r.Raw)
	}
	var text string
	for _, it := range r.Get("output").Array() {
		if it.Get("type").Str == "message" {
			text += it.Get("content.0.text").Str
		}
	}
	checkCapital(t, text)
	want, _ := json.Marshal(format)
	if got := r.Get("text.format"); !jsonEqual(got.Raw, string(want)) {
		t.Errorf("text.format echoed as %s, sent %s", got.Raw, want)
	}
}

func jsonEqual(a, b string) bool {
	var x, y any
	return json.Unmarshal([]byte(a), &x) == nil && json.Unmarshal([]byte(b), &y) == nil && string(mustJSON(x)) == string(mustJSON(y))
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// TestConstrainedErrors: schemas the engine cannot enforce are 400s naming
// the field and the keyword's path, in each API's shape.
func TestConstrainedErrors(t *testing.T) {
	ts := shared(t)
	chat := func(schema any) map[string]any {
		return map[string]any{"messages": userMsg("hi"), "response_format": map[string]any{"type": "json_schema",
			"json_schema": map[string]any{"name": "x", "schema": schema, "strict": true}}}
	}
	st, _, r := post(t, ts.URL+"/v1/chat/completions", chat(map[string]any{"type": "object", "properties": map[string]any{
		"a": map[string]any{"type": "number", "multipleOf": 1}}}))
	checkError(t, st, r, 400, "response_format.json_schema.schema", "/properties/a/multipleOf")
	st, _, r = post(t, ts.URL+"/v1/chat/completions", chat(map[string]any{"type": "string", "pattern": "(?=x)"}))
	checkError(t, st, r, 400, "response_format.json_schema.schema", "/pattern")
	st, _, r = post(t, ts.URL+"/v1/chat/completions", chat(map[string]any{"$ref": "#/$defs/nope"}))
	checkError(t, st, r, 400, "response_format.json_schema.schema", "does not resolve")
	st, _, r = post(t, ts.URL+"/v1/chat/completions", chat("not a schema"))
	checkError(t, st, r, 400, "response_format.json_schema.schema", "must be an object")
	st, _, r = post(t, ts.URL+"/v1/responses", map[string]any{"input": "hi", "text": map[string]any{"format": map[string]any{
		"type": "json_schema", "name": "x", "strict": true, "schema": map[string]any{"minimum": 1}}}})
	checkError(t, st, r, 400, "text.format.schema", "/minimum")
	st, _, r = post(t, ts.URL+"/v1/chat/completions", map[string]any{"messages": userMsg("hi"), "response_format": map[string]any{
		"type": "json_schema", "json_schema": map[string]any{"name": "x", "schema": map[string]any{}, "strict": "yes"}}})
	checkError(t, st, r, 400, "response_format.json_schema.strict", "boolean")
}

// TestConstrainedGrammarHook: a grammar hook's JSON schema or GBNF grammar
// is enforced on every API, here on the Anthropic Messages API.
func TestConstrainedGrammarHook(t *testing.T) {
	dir := t.TempDir()
	src := "def grammar(request):\n    if request.model == \"yes-no\":\n        return {\"enum\": [\"yes\", \"no\"]}\n" +
		"    if request.model == \"gbnf\":\n        return 'root ::= (\"oui\" | \"non\") \"!\"'\n" +
		"    if request.model == \"broken\":\n        return 'root ::= \"x'\n    return None\n"
	if err := os.WriteFile(filepath.Join(dir, "grammar.star"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	ts := start(t, opts{model: demoModel(t, "demo", true), server: serverCfg(func(c *serverConfig) {
		c.Hooks = hooksFor(t, dir, "")
	})})
	defer ts.close()
	for _, model := range []string{"yes-no", "gbnf", "other"} {
		st, _, r := post(t, ts.URL+"/v1/messages", map[string]any{"model": model, "max_tokens": 200, "temperature": 0,
			"messages": userMsg("What is the capital of Peru?")}, "anthropic-version", "2023-06-01")
		var text string
		for _, b := range r.Get("content").Array() {
			if b.Get("type").Str == "text" {
				text += b.Get("text").Str
			}
		}
		var constrained bool
		switch model {
		case "yes-no":
			constrained = text == `"yes"` || text == `"no"`
		case "gbnf":
			constrained = text == "oui!" || text == "non!"
		default:
			constrained = text != `"yes"` && text != `"no"` && text != "oui!" && text != "non!"
		}
		if st != 200 || !constrained {
			t.Fatalf("model %s: status %d, text %q: %s", model, st, text, r.Raw)
		}
	}
	// A grammar that does not parse fails the request, naming the hook and
	// where the grammar broke; the server keeps serving.
	st, _, r := post(t, ts.URL+"/v1/messages", map[string]any{"model": "broken", "max_tokens": 20,
		"messages": userMsg("hi")}, "anthropic-version", "2023-06-01")
	if st != 500 || !strings.Contains(r.Get("error.message").Str, "grammar") || !strings.Contains(r.Get("error.message").Str, "unterminated string") {
		t.Fatalf("broken grammar: status %d: %s", st, r.Raw)
	}
}

// TestConstrainedPattern: a string's pattern and length bounds, an
// integer's bounds and a number's are enforced on the real model; keywords
// the engine cannot enforce (multipleOf) are ignored unless the schema is
// strict, which makes them a 400.
func TestConstrainedPattern(t *testing.T) {
	ts := start(t, opts{model: demoModel(t, "demo", true)})
	defer ts.close()
	schema := map[string]any{"type": "object", "properties": orderedProps{
		{"code", map[string]any{"type": "string", "pattern": "^[A-Z]{3}$"}},
		{"note", map[string]any{"type": "string", "minLength": 2, "maxLength": 8}},
		{"n", map[string]any{"type": "integer", "minimum": 3, "maximum": 12}},
		{"x", map[string]any{"type": "number", "minimum": -2.5, "exclusiveMaximum": 1}},
		{"y", map[string]any{"type": "number", "multipleOf": 0.5}},
	}, "required": []string{"code", "note", "n", "x"}}
	ask := func(strict bool) (int, gjson.Result) {
		st, _, r := post(t, ts.URL+"/v1/chat/completions", map[string]any{"messages": userMsg("What is the capital of Peru?"),
			"max_tokens": 300, "temperature": 0, "chat_template_kwargs": map[string]any{"enable_thinking": false},
			"response_format": map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "x", "schema": schema, "strict": strict}}})
		return st, r
	}
	st, r := ask(false)
	if st != 200 || r.Get("choices.0.finish_reason").Str != "stop" {
		t.Fatalf("status %d: %s", st, r.Raw)
	}
	content := r.Get("choices.0.message.content").Str
	var v struct {
		Code string          `json:"code"`
		Note string          `json:"note"`
		N    json.RawMessage `json:"n"`
		X    json.RawMessage `json:"x"`
	}
	if err := json.Unmarshal([]byte(content), &v); err != nil {
		t.Fatalf("%q: %v", content, err)
	}
	if !regexp.MustCompile(`^[A-Z]{3}$`).MatchString(v.Code) {
		t.Fatalf("%q: code %q does not match ^[A-Z]{3}$", content, v.Code)
	}
	if n := utf8.RuneCountInString(v.Note); n < 2 || n > 8 {
		t.Fatalf("%q: note %q has %d characters, not 2…8", content, v.Note, n)
	}
	if n, err := strconv.Atoi(string(v.N)); err != nil || n < 3 || n > 12 {
		t.Fatalf("%q: n %s is not an integer within 3…12", content, v.N)
	}
	// A bounded number is written without an exponent.
	if x, err := strconv.ParseFloat(string(v.X), 64); err != nil || x < -2.5 || x >= 1 || strings.ContainsAny(string(v.X), "eE") {
		t.Fatalf("%q: x %s is not a plain number within [-2.5, 1)", content, v.X)
	}
	// multipleOf cannot be enforced: strict, that is a 400.
	st, r = ask(true)
	checkError(t, st, r, 400, "response_format.json_schema.schema", "/properties/y/multipleOf")
}

// TestGuidedOutputs: vLLM's guided_* and structured_outputs fields and
// llama.cpp's json_schema constrain chat and text completions alike.
func TestGuidedOutputs(t *testing.T) {
	ts := start(t, opts{model: demoModel(t, "demo", true)})
	defer ts.close()
	chat := func(extra map[string]any) gjson.Result {
		body := map[string]any{"messages": userMsg("What is the capital of Peru?"), "max_tokens": 200, "temperature": 0}
		for k, v := range extra {
			body[k] = v
		}
		st, _, r := post(t, ts.URL+"/v1/chat/completions", body)
		if st != 200 || r.Get("choices.0.finish_reason").Str != "stop" {
			t.Fatalf("%v: status %d: %s", extra, st, r.Raw)
		}
		return r.Get("choices.0.message")
	}
	choices := []string{"Lima", "Cusco", "Paris"}
	if c := chat(map[string]any{"guided_choice": choices}).Get("content").Str; !slices.Contains(choices, c) {
		t.Fatalf("guided_choice: %q", c)
	}
	noThink := map[string]any{"enable_thinking": false}
	re := regexp.MustCompile(`^The capital is [A-Z][a-z]+\.$`)
	if c := chat(map[string]any{"structured_outputs": map[string]any{"regex": `The capital is [A-Z][a-z]+\.`}, "chat_template_kwargs": noThink}).Get("content").Str; !re.MatchString(c) {
		t.Fatalf("structured_outputs.regex: %q", c)
	}
	checkCapital(t, chat(map[string]any{"guided_json": capitalSchema}).Get("content").Str)
	checkCapital(t, chat(map[string]any{"json_schema": capitalSchema}).Get("content").Str)
	checkCapital(t, chat(map[string]any{"structured_outputs": map[string]any{"json": string(mustJSON(capitalSchema))}}).Get("content").Str)
	d := assembleChat(t, streamEvents(t, ts.URL+"/v1/chat/completions", map[string]any{"messages": userMsg("What is the capital of Peru?"),
		"max_tokens": 200, "temperature": 0, "stream": true, "guided_choice": choices}))
	if !slices.Contains(choices, d.content) || d.finish != "stop" {
		t.Fatalf("streamed guided_choice: %+v", d)
	}
	// A GBNF grammar: llama.cpp's grammar field and vLLM's guided_grammar.
	gbnf := "root ::= \"The capital is \" city \".\"\ncity ::= [A-Z] [a-z]{2,12}\n"
	for _, key := range []string{"grammar", "guided_grammar"} {
		if c := chat(map[string]any{key: gbnf, "chat_template_kwargs": noThink}).Get("content").Str; !regexp.MustCompile(`^The capital is [A-Z][a-z]{2,12}\.$`).MatchString(c) {
			t.Fatalf("%s: %q", key, c)
		}
	}
	st, _, r := post(t, ts.URL+"/v1/completions", map[string]any{"prompt": "The capital of Peru is", "max_tokens": 30, "temperature": 0,
		"guided_regex": ` [A-Z][a-z]+\.`})
	if txt := r.Get("choices.0.text").Str; st != 200 || !regexp.MustCompile(`^ [A-Z][a-z]+\.$`).MatchString(txt) || r.Get("choices.0.finish_reason").Str != "stop" {
		t.Fatalf("completions guided_regex: status %d: %s", st, r.Raw)
	}

	bad := []struct {
		body        map[string]any
		param, text string
	}{
		{map[string]any{"guided_regex": "("}, "guided_regex", "missing closing"},
		{map[string]any{"guided_choice": []any{"a", 1}}, "guided_choice", "array of strings"},
		{map[string]any{"guided_grammar": `root ::= root "a"`}, "guided_grammar", "left-recursive"},
		{map[string]any{"structured_outputs": map[string]any{"grammar": `root ::= "a`}}, "structured_outputs.grammar", "line 1, column 12: unterminated string"},
		{map[string]any{"grammar": 7}, "grammar", "GBNF"},
		{map[string]any{"guided_json": "not json"}, "guided_json", "JSON schema"},
		{map[string]any{"response_format": map[string]any{"type": "json_object"}, "guided_choice": []string{"a"}}, "guided_choice", "both constrain"},
	}
	for _, b := range bad {
		body := map[string]any{"messages": userMsg("hi")}
		for k, v := range b.body {
			body[k] = v
		}
		st, _, r := post(t, ts.URL+"/v1/chat/completions", body)
		checkError(t, st, r, 400, b.param, b.text)
	}
}
