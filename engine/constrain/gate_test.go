package constrain

import (
	"strings"
	"testing"
)

func TestCompileLoose(t *testing.T) {
	schema := `{"type":"object","properties":{"n":{"type":"number","minimum":3,"maximum":5},"s":{"type":"string","pattern":"^a","minLength":2},"l":{"type":"array","uniqueItems":true,"items":{"type":"number","multipleOf":2}}},"required":["n"],"minProperties":1}`
	if _, err := Compile([]byte(schema)); err == nil {
		t.Fatal("Compile took narrowing keywords")
	}
	g, err := CompileLoose([]byte(schema))
	if err != nil {
		t.Fatal(err)
	}
	// uniqueItems and multipleOf are not enforced; the structure, the
	// number's bounds and the string's pattern and length are.
	checkDocs(t, "loose", g, []string{`{"n":3}`, `{"n":4.5,"s":"abc","l":[1,1]}`, `{"n":5,"l":[3]}`},
		[]string{`{"s":"a"}`, `{"n":"3"}`, `{"n":3,"l":["x"]}`, `{"n":3,"x":2}`, `{"n":3,"s":"b"}`, `{"n":3,"s":"a"}`, `{"n":1}`, `{"n":5.01}`})
	// Keywords that change the structure are still refused.
	for _, s := range []string{`{"type":"array","prefixItems":[{}]}`, `{"if":{},"then":{}}`, `{"allOf":[{},{}]}`} {
		if _, err := CompileLoose([]byte(s)); err == nil {
			t.Errorf("CompileLoose(%s) took it", s)
		}
	}
}

func TestMatcherDone(t *testing.T) {
	cases := []struct {
		schema, doc string
		done        bool
	}{
		{`{"type":"object"}`, `{"a":1}`, true},
		{`{"type":"object"}`, `{"a":1`, false},
		{`{"type":"string"}`, `"x"`, true},
		{`{"type":"integer"}`, `12`, false}, // complete, but more digits may follow
		{`{}`, `[1]`, true},
	}
	for _, c := range cases {
		m := mustCompile(t, c.schema).Matcher(NewVocab(nil, 1))
		if err := m.Feed([]byte(c.doc)); err != nil {
			t.Fatal(err)
		}
		if m.Done() != c.done {
			t.Errorf("%s after %q: Done %v, want %v", c.schema, c.doc, m.Done(), c.done)
		}
	}
}

func TestGate(t *testing.T) {
	// Token pieces: ordinary text, the trigger (an added token, not in
	// the vocabulary's bytes), and JSON pieces.
	pieces := []string{"hi", "<call>", "{\"", "a", "\":", "1", "}", "\n", "x", "\"b\"", "</call>", "}\n"}
	toks := make([][]byte, len(pieces))
	for i, p := range pieces {
		if p != "<call>" && p != "</call>" {
			toks[i] = []byte(p)
		}
	}
	v := NewVocab(toks, len(toks))
	id := func(s string) int32 {
		for i, p := range pieces {
			if p == s {
				return int32(i)
			}
		}
		t.Fatalf("no piece %q", s)
		return -1
	}
	g := mustCompile(t, `{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]}`)
	gate := g.NewGate(v, id("<call>"), -1)
	mask := make([]uint64, gate.Words())
	accept := func(s string) {
		t.Helper()
		if err := gate.Accept(id(s)); err != nil {
			t.Fatalf("%q: %v", s, err)
		}
	}
	for round := 0; round < 2; round++ {
		if !gate.Free() {
			t.Fatalf("round %d: in force before the trigger", round)
		}
		accept("hi")
		accept("x")
		accept("<call>")
		if gate.Free() {
			t.Fatal("free after the trigger")
		}
		gate.Allowed(mask)
		if mask[0]&(1<<id("hi")) != 0 || mask[0]&(1<<id("\n")) == 0 || mask[0]&(1<<id("{\"")) == 0 {
			t.Fatalf("mask %b after the trigger: want leading whitespace and the object's start only", mask[0])
		}
		if err := gate.Accept(id("hi")); err == nil {
			t.Fatal("text accepted where the document must start")
		}
		for _, s := range []string{"\n", "{\"", "a", "\":", "1"} {
			accept(s)
			if gate.Free() {
				t.Fatalf("free after %q, inside the document", s)
			}
		}
		accept("}")
		if !gate.Free() {
			t.Fatal("still in force after the document's end")
		}
	}
	// Open: in force at once, past a prefilled opening.
	gate = g.NewGate(v, -1, -1)
	if err := gate.Open([]byte(`{"a":`)); err != nil {
		t.Fatal(err)
	}
	if err := gate.Accept(id("\"b\"")); err == nil || !strings.Contains(err.Error(), "not allowed") {
		t.Fatalf("a string accepted for an integer: %v", err)
	}
	accept("1")
	accept("}")
	if !gate.Free() {
		t.Fatal("an opened document did not end")
	}
	if err := g.NewGate(v, -1, -1).Open([]byte(`[`)); err == nil {
		t.Fatal("Open took a prefix outside the grammar")
	}

	// With a close token: after the document, at most two whitespace
	// bytes and then the close token, before the output is free.
	gate = g.NewGate(v, id("<call>"), id("</call>"))
	for _, s := range []string{"hi", "<call>", "{\"", "a", "\":", "1", "}"} {
		accept(s)
	}
	if gate.Free() {
		t.Fatal("free before the close token")
	}
	if end := gate.Allowed(mask); end || mask[0] != 1<<id("\n")|1<<id("</call>") {
		t.Fatalf("closing mask %b (end %v): want the newline and the close token", mask[0], end)
	}
	if err := gate.Accept(id("hi")); err == nil {
		t.Fatal("text accepted before the close token")
	}
	accept("\n")
	accept("\n")
	if gate.Allowed(mask); mask[0] != 1<<id("</call>") {
		t.Fatalf("mask %b after two newlines: want the close token only", mask[0])
	}
	if err := gate.Accept(id("\n")); err == nil {
		t.Fatal("a third newline accepted")
	}
	accept("</call>")
	if !gate.Free() {
		t.Fatal("in force after the close token")
	}
	accept("hi")

	// A call body's trailing newline may come in the token that ends it,
	// and counts against the whitespace before the close token.
	calls, err := ToolCall([]Tool{{Name: "a"}})
	if err != nil {
		t.Fatal(err)
	}
	gate = calls.NewGate(v, id("<call>"), id("</call>"))
	if err := gate.Open([]byte(`{"name": "a", "arguments": {"a":1}`)); err != nil {
		t.Fatal(err)
	}
	if gate.Allowed(mask); mask[0]&(1<<id("}\n")) == 0 {
		t.Fatalf("mask %b: the body's last brace with its newline not allowed", mask[0])
	}
	accept("}\n")
	if gate.Free() {
		t.Fatal("free before the close token")
	}
	accept("\n")
	if gate.Allowed(mask); mask[0] != 1<<id("</call>") {
		t.Fatalf("mask %b after the body's newline and one more: want the close token only", mask[0])
	}
	accept("</call>")
	if !gate.Free() {
		t.Fatal("in force after the close token")
	}
}

func TestToolCall(t *testing.T) {
	tools := []Tool{
		{Name: "get_weather", Parameters: []byte(`{"type":"object","properties":{"city":{"type":"string"},"unit":{"enum":["c","f"]}},"required":["city"]}`), Strict: true},
		{Name: "ls", Parameters: []byte(`{"type":"object","properties":{"path":{"type":"string","pattern":"^/"},"n":{"type":"number","minimum":1}}}`)},
		{Name: "tree", Parameters: []byte(`{"$defs":{"d":{"type":"object","properties":{"kids":{"type":"array","items":{"$ref":"#/$defs/d"}}}}},"$ref":"#/$defs/d"}`)},
		{Name: "odd", Parameters: []byte(`{"type":"object","if":{"type":"object"},"then":{}}`)}, // uncompilable: any object
		{Name: "none"},
	}
	g, err := ToolCall(tools)
	if err != nil {
		t.Fatal(err)
	}
	ok := []string{
		`{"name": "get_weather", "arguments": {"city": "Paris"}}`,
		`{"name":"get_weather","arguments":{"city":"Paris","unit":"f"}}`,
		`{"name": "ls", "arguments": {"path": "/rel", "n": 1.5}}`,
		`{"name": "tree", "arguments": {"kids": [{"kids": []}]}}`,
		`{"name": "odd", "arguments": {"anything": [1]}}`,
		`{"name": "none", "arguments": {}}`,
		"{\"name\": \"none\", \"arguments\": {}}\n", // the newline before </tool_call>
		"{\"name\": \"none\", \"arguments\": {}} \n",
	}
	bad := []string{
		"{\"name\": \"none\", \"arguments\": {}}\n\n\n",
		"{\"name\": \"none\", \"arguments\": {}}\nx",
		`{"name": "get_weather", "arguments": {}}`,
		`{"name": "get_weather", "arguments": {"city": 1}}`,
		`{"name": "get_weather", "arguments": {"city": "x", "unit": "k"}}`,
		`{"name": "nope", "arguments": {}}`,
		`{"arguments": {}, "name": "none"}`,
		`{"name": "none"}`,
		`{"name": "odd", "arguments": []}`,
		`{"name": "ls", "arguments": {"path": 3}}`,
		`{"name": "ls", "arguments": {"path": "rel"}}`,
		`{"name": "ls", "arguments": {"path": "/rel", "n": 0.5}}`, // the bound holds though the tool is not strict
	}
	checkDocs(t, "tool calls", g, ok, bad)
	// Node ids are unique across the tools (the mask cache keys on them).
	ids := map[*node]bool{}
	var collect func(n *node)
	collect = func(n *node) {
		if n == nil || ids[n] {
			return
		}
		ids[n] = true
		for _, p := range n.props {
			collect(p.value)
		}
		collect(n.extra)
		collect(n.items)
		for _, a := range n.alts {
			collect(a)
		}
	}
	collect(g.root)
	seen := map[int32]bool{}
	for n := range ids {
		if seen[n.id] {
			t.Fatalf("node id %d used twice", n.id)
		}
		seen[n.id] = true
	}

	// A strict tool whose schema cannot be enforced is an error naming it.
	_, err = ToolCall([]Tool{{Name: "a"}, {Name: "b", Parameters: []byte(`{"type":"number","multipleOf":1}`), Strict: true}})
	te, isTool := err.(*ToolError)
	if !isTool || te.Index != 1 || te.Err.Path != "/multipleOf" {
		t.Fatalf("strict tool with a multipleOf: %v", err)
	}
	// More tools than one union takes.
	var many []Tool
	for i := range 150 {
		many = append(many, Tool{Name: "t" + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + string(rune('a'+i/26))})
	}
	g, err = ToolCall(many)
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{0, 63, 64, 149} {
		d := `{"name": "` + many[i].Name + `", "arguments": {}}`
		if at, done := feed(t, g, d); at >= 0 || !done {
			t.Errorf("tool %d of 150: %q rejected at byte %d", i, d, at)
		}
	}
	if at, done := feed(t, g, `{"name": "zz", "arguments": {}}`); at < 0 && done {
		t.Error("an unknown name accepted among 150 tools")
	}
}
