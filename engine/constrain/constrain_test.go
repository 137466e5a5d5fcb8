package constrain

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

// feed runs doc through a fresh matcher of g: the byte it failed at (-1:
// none) and whether the document may end after it.
func feed(t *testing.T, g *Grammar, doc string) (failAt int, complete bool) {
	t.Helper()
	m := g.Matcher(NewVocab(nil, 1))
	for i := 0; i < len(doc); i++ {
		if err := m.Feed([]byte{doc[i]}); err != nil {
			return i, false
		}
	}
	return -1, m.CanEnd()
}

// jsonObject is response_format json_object's grammar: any object.
func jsonObject() *Grammar {
	g, err := Compile([]byte(`{"type":"object"}`))
	if err != nil {
		panic(err)
	}
	return g
}

func mustCompile(t *testing.T, schema string) *Grammar {
	t.Helper()
	g, err := Compile([]byte(schema))
	if err != nil {
		t.Fatalf("Compile(%s): %v", schema, err)
	}
	return g
}

func TestGrammarDocuments(t *testing.T) {
	person := `{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"},"tags":{"type":"array","items":{"enum":["a","ab",1,12,true,null]},"maxItems":2},"boss":{"$ref":"#"}},"required":["name"]}`
	cases := []struct {
		schema string
		ok     []string // complete documents
		bad    []string // rejected or incomplete
	}{
		{`{}`, []string{`{}`, `[]`, `"x"`, `0`, `-1.5e+3`, `true`, `null`, `{"a":[1,{"b":null}],"c":"\u00e9\n"}`, "\n\n{ \"a\" : 1 }", `"é€😀"`},
			[]string{`{`, `{"a"}`, `{"a":}`, `[1,]`, `01`, `1.`, `-`, `tru`, `"\x"`, "\"\x01\"", `{"a":1}}`, `{} `, `{,}`, "\"\xff\"", "\"\xc3\"", `.5`, `1e`, `[1 2]`}},
		{`{"type":"object"}`, []string{`{}`, `{"k":[1,2]}`}, []string{`[]`, `"x"`, `1`}},
		{person, []string{`{"name":"x"}`, `{"name":"x","age":3}`, `{"name":"x","tags":["ab",12,null]}`[:0] + `{"name":"x","tags":["ab",12]}`, `{"name":"x","boss":{"name":"y","age":-0}}`, `{"name":"x","age":1,"tags":[true,1],"boss":{"name":"z"}}`},
			[]string{`{}`, `{"age":3}`, `{"age":3,"name":"x"}`, `{"name":"x","age":3.5}`, `{"name":"x","tags":["b"]}`, `{"name":"x","tags":[1,1,1]}`, `{"name":"x","other":1}`, `{"name":1}`, `{"name":"x","age":1e3}`, `{"name":"x",}`}},
		{`{"enum":["1",1,12,123]}`, []string{`"1"`, `1`, `12`, `123`}, []string{`1234`, `2`, `"12"`}},
		{`{"anyOf":[{"type":"string"},{"type":"array","items":{"type":"integer"},"minItems":1},{"type":"null"}]}`, []string{`"a"`, `[1]`, `null`, `[1,2]`}, []string{`[]`, `1`, `["a"]`}},
		{`{"type":["integer","boolean"]}`, []string{`7`, `false`}, []string{`7.0`, `"7"`}},
		{`{"type":"string","nullable":true}`, []string{`"s"`, `null`}, []string{`1`}},
		{`{"type":"object","properties":{"a":{"const":"x"},"b":{"type":"number"}},"required":["b"]}`, []string{`{"a":"x","b":1}`, `{"b":2.5}`}, []string{`{"a":"y","b":1}`, `{"a":"x"}`, `{"b":1,"a":"x"}`}},
		{`{"type":"object","additionalProperties":{"type":"integer"}}`, []string{`{"x":1,"y":2}`, `{}`}, []string{`{"x":"1"}`}},
		{`{"type":"object","additionalProperties":false}`, []string{`{}`}, []string{`{"x":1}`}},
		{`{"$defs":{"node":{"type":"object","properties":{"kids":{"type":"array","items":{"$ref":"#/$defs/node"}}},"required":["kids"]}},"$ref":"#/$defs/node"}`, []string{`{"kids":[]}`, `{"kids":[{"kids":[{"kids":[]}]}]}`}, []string{`{"kids":[{}]}`}},
		{`{"type":"array","minItems":2,"maxItems":3}`, []string{`[1,"a"]`, `[1,2,3]`}, []string{`[1]`, `[1,2,3,4]`}},
	}
	for _, c := range cases {
		checkDocs(t, c.schema, mustCompile(t, c.schema), c.ok, c.bad)
	}
}

// checkDocs checks that g takes every document of ok whole and refuses (or
// leaves incomplete) every one of bad; what names g in failures.
func checkDocs(t *testing.T, what string, g *Grammar, ok, bad []string) {
	t.Helper()
	for _, d := range ok {
		if at, done := feed(t, g, d); at >= 0 || !done {
			t.Errorf("%s: %q rejected (at byte %d, complete %v)", what, d, at, done)
		}
	}
	for _, d := range bad {
		if at, done := feed(t, g, d); at < 0 && done {
			t.Errorf("%s: %q accepted", what, d)
		}
	}
}

func TestWhitespaceLimits(t *testing.T) {
	g := mustCompile(t, `{}`)
	indent := strings.Repeat(" ", MaxIndent-1) + "\t"
	for _, ok := range []string{"{ }", "{\n" + indent + "}", strings.Repeat("\n", MaxLeading) + "[1, 2,\n  3\n]"} {
		if at, done := feed(t, g, ok); at >= 0 || !done {
			t.Fatalf("%q rejected at %d", ok, at)
		}
	}
	for _, c := range []struct {
		doc string
		at  int
	}{{"{  }", 2}, {"{ \n}", 2}, {"{\n\n}", 2}, {"{\n" + indent + " }", 2 + MaxIndent}, {"{\r\n}", 1}, {strings.Repeat(" ", MaxLeading+1) + "1", MaxLeading}, {"1 ", 1}} {
		if at, _ := feed(t, g, c.doc); at != c.at {
			t.Fatalf("%q failed at %d, want %d", c.doc, at, c.at)
		}
	}
	if at, _ := feed(t, g, strings.Repeat("9", maxNumberLen+1)); at != maxNumberLen {
		t.Fatalf("a long number failed at %d, want %d", at, maxNumberLen)
	}
}

// TestAnyMatchesEncodingJSON checks the any-value grammar against
// encoding/json on random documents and on their random corruptions.
func TestAnyMatchesEncodingJSON(t *testing.T) {
	g := mustCompile(t, `true`)
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 3000; i++ {
		doc := randomJSON(r, 0)
		if at, done := feed(t, g, doc); at >= 0 || !done {
			t.Fatalf("%q rejected at %d", doc, at)
		}
		b := []byte(doc)
		const junk = "{}[]\",:0-.eE+ \\tnu\x01\xc3"
		b[r.IntN(len(b))] = junk[r.IntN(len(junk))]
		if r.IntN(4) == 0 {
			b = b[:r.IntN(len(b))]
		}
		checkAgainstStd(t, g, b)
	}
}

func checkAgainstStd(t *testing.T, g *Grammar, b []byte) {
	t.Helper()
	at, done := feed(t, g, string(b))
	ours := at < 0 && done
	std := json.Valid(b) && utf8.Valid(b) && withinLimits(b) // encoding/json lets invalid UTF-8 through
	if ours != std {
		t.Fatalf("%q: grammar %v (failed at %d, complete %v), encoding/json %v", b, ours, at, done, std)
	}
}

// withinLimits reports whether b keeps the grammar's limits: whitespace
// as MaxIndent and MaxLeading allow (strings aside) and none at the end,
// numbers of at most maxNumberLen bytes.
func withinLimits(b []byte) bool {
	in, esc, num := false, false, 0
	lead := true
	var run []byte
	okRun := func() bool {
		if len(run) == 0 {
			return true
		}
		if lead {
			return len(run) <= MaxLeading
		}
		if string(run) == " " {
			return true
		}
		if run[0] != '\n' || len(run) > 1+MaxIndent {
			return false
		}
		for _, c := range run[1:] {
			if c != ' ' && c != '\t' {
				return false
			}
		}
		return true
	}
	for _, c := range b {
		switch {
		case in:
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				in = false
			}
			continue
		case isWS(c):
			num = 0
			run = append(run, c)
			continue
		}
		if !okRun() {
			return false
		}
		run, lead = run[:0], false
		if c >= '0' && c <= '9' || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E' {
			if num++; num > maxNumberLen {
				return false
			}
		} else {
			num = 0
			in = c == '"'
		}
	}
	return len(run) == 0
}

func randomJSON(r *rand.Rand, depth int) string {
	k := r.IntN(8)
	if depth > 3 {
		k = r.IntN(5)
	}
	switch k {
	case 0:
		return []string{"true", "false", "null"}[r.IntN(3)]
	case 1:
		return []string{"0", "-12", "3.25", "1e9", "-0.5E-3", "7"}[r.IntN(6)]
	case 2, 3, 4:
		b, _ := json.Marshal([]string{"", "a", "é\"\\\n", "😀x", "\u2028", "<tag>"}[r.IntN(6)])
		return string(b)
	case 5:
		var parts []string
		for j := r.IntN(4); j > 0; j-- {
			parts = append(parts, randomJSON(r, depth+1))
		}
		return "[" + strings.Join(parts, []string{",", ", ", " ,\n  "}[r.IntN(3)]) + "]"
	default:
		var parts []string
		for j := r.IntN(4); j > 0; j-- {
			parts = append(parts, `"k`+string(rune('a'+j))+`":`+randomJSON(r, depth+1))
		}
		return "{" + strings.Join(parts, ",") + "}"
	}
}

func FuzzAnyJSON(f *testing.F) {
	for _, s := range []string{`{"a":[1,2.5e3,"x\u00e9"]}`, `[]`, `"\ud83d"`, `-0`, "{\n  \"a\": null\n}", `tru`} {
		f.Add([]byte(s))
	}
	g, _ := Compile([]byte(`{}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		checkAgainstStd(t, g, b)
	})
}

func TestCompileErrors(t *testing.T) {
	cases := []struct{ schema, path string }{
		{`{"type":"string","pattern":"\\bx"}`, "/pattern"},
		{`{"type":"string","pattern":"(a"}`, "/pattern"},
		{`{"type":"string","minLength":3,"maxLength":2}`, "/maxLength"},
		{`{"type":"string","maxLength":-1}`, "/maxLength"},
		{`{"maximum":3}`, "/maximum"},
		{`{"type":"object","properties":{"a":{"minimum":3}}}`, "/properties/a/minimum"},
		{`{"type":"number","minimum":3,"maximum":2.5}`, ""},
		{`{"type":"number","minimum":1.0000000000000000001}`, "/minimum"},
		{`{"type":"number","exclusiveMinimum":2,"maximum":2}`, ""},
		{`{"minimum":3}`, "/minimum"},
		{`{"type":"integer","multipleOf":2.5}`, "/multipleOf"},
		{`{"type":"integer","multipleOf":0}`, "/multipleOf"},
		{`{"type":"number","multipleOf":3}`, "/multipleOf"},
		{`{"type":"integer","minimum":1,"maximum":4,"multipleOf":5}`, ""},
		{`{"type":"object","properties":{"a/b":{"type":"strin"}}}`, "/properties/a~1b/type"},
		{`{"$ref":"#/$defs/missing"}`, "/$ref"},
		{`{"$ref":"http://x"}`, "/$ref"},
		{`{"type":"array","prefixItems":[]}`, "/prefixItems"},
		{`{"type":"object","properties":{"a":{}},"required":["b"]}`, "/required/0"},
		{`{"enum":[[1]]}`, "/enum/0"},
		{`false`, ""},
		{`{"type":"array","minItems":3,"maxItems":2}`, "/maxItems"},
		{`{"allOf":[{},{}]}`, "/allOf"},
		{`{"type":`, ""},
	}
	for _, c := range cases {
		_, err := Compile([]byte(c.schema))
		se, ok := err.(*SchemaError)
		if !ok || se.Path != c.path {
			t.Errorf("Compile(%s) = %v, want a SchemaError at %q", c.schema, err, c.path)
		}
	}
}

// testVocab is a small vocabulary of JSON-ish pieces, with an excluded id.
func testVocab() ([][]byte, *Vocab) {
	pieces := []string{"{", "}", "[", "]", "\"", ",", ":", " ", "\n", "  ", "{\"", "\":", "\",", "\"}", "},", "],",
		"name", "age", "tags", "boss", "a", "ab", "1", "12", "123", "0", "-", ".", "5", "e", "true", "false", "null",
		"tr", "ue", "\\", "n", "u00", "e9", "é", "\xc3", "\xa9", "\"name\"", "\":\"", "x", "\"]", "}}", "", "<|im_end|>", "\x01"}
	toks := make([][]byte, len(pieces))
	for i, p := range pieces {
		if p != "<|im_end|>" {
			toks[i] = []byte(p)
		}
	}
	return toks, NewVocab(toks, len(toks)+3)
}

// TestMaskMatchesFeed checks every mask along random walks against feeding
// each token to a copy of the matcher.
func TestMaskMatchesFeed(t *testing.T) {
	schemas := []string{`{}`, `{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"},"tags":{"type":"array","items":{"enum":["a","ab",1,12]}},"boss":{"$ref":"#"}},"required":["name"]}`,
		`{"type":"array","items":{"type":"string","pattern":"^(a|é)[ab1\\n]*$","minLength":2,"maxLength":6}}`,
		`{"type":"object","additionalProperties":{"type":"string","pattern":"1{2}","maxLength":4}}`,
		`{"type":"array","items":{"type":"string","minLength":3,"maxLength":5}}`, `{"type":"array","items":{"type":"string","minLength":3}}`,
		`{"type":"array","items":{"type":"number","minimum":-1.5,"exclusiveMaximum":12.25}}`, `{"type":"array","items":{"type":"integer","minimum":-3,"maximum":40,"multipleOf":4}}`}
	toks, v := testVocab()
	tools, err := ToolCall([]Tool{{Name: "name", Parameters: []byte(schemas[1])}, {Name: "ab"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range schemas {
		checkMaskMatchesFeed(t, mustCompile(t, sc), toks, v, 40, 40)
	}
	checkMaskMatchesFeed(t, tools, toks, v, 40, 40)
}

// checkMaskMatchesFeed walks g randomly (walks of at most steps tokens),
// checking at every step that the mask holds exactly the tokens that feed.
// The mask cache is shared by all the walks, so a state key that confuses
// two states shows as a wrong mask.
// It returns how many walks reached a complete document.
func checkMaskMatchesFeed(t *testing.T, g *Grammar, toks [][]byte, v *Vocab, walks, steps int) (complete int) {
	t.Helper()
	r := rand.New(rand.NewPCG(3, 4))
	for walk := 0; walk < walks; walk++ {
		m := g.Matcher(v)
		mask := make([]uint64, m.Words())
		var path []string
		for step := 0; step < steps; step++ {
			m.Allowed(mask)
			var allowed []int32
			for id := range v.Size() {
				on := mask[id/64]&(1<<(id%64)) != 0
				want := id < len(toks) && len(toks[id]) > 0 && m.clone().Feed(toks[id]) == nil
				if on != want {
					t.Fatalf("after %q: token %d (%q): mask %v, feed %v", path, id, toks[min(id, len(toks)-1)], on, want)
				}
				if on {
					allowed = append(allowed, int32(id))
				}
			}
			if len(allowed) == 0 {
				break
			}
			tok := allowed[r.IntN(len(allowed))]
			if err := m.Accept(tok); err != nil {
				t.Fatal(err)
			}
			path = append(path, string(toks[tok]))
			if m.CanEnd() {
				complete++
				break
			}
		}
	}
	return complete
}

func (m *Matcher) clone() *Matcher {
	c := *m
	c.state = append([]config(nil), m.state...)
	c.bufA, c.bufB = nil, nil
	return &c
}

func TestAcceptRejects(t *testing.T) {
	toks, v := testVocab()
	m := jsonObject().Matcher(v)
	id := func(s string) int32 {
		for i, p := range toks {
			if string(p) == s {
				return int32(i)
			}
		}
		t.Fatalf("no token %q", s)
		return -1
	}
	if err := m.Accept(id("[")); err == nil {
		t.Fatal("an array was accepted where an object must start")
	}
	if err := m.Accept(int32(len(toks) - 2)); err == nil { // <|im_end|>: excluded
		t.Fatal("an excluded token was accepted")
	}
	for _, s := range []string{"{\"", "a", "\":", "1", "}"} {
		if err := m.Accept(id(s)); err != nil {
			t.Fatal(err)
		}
	}
	if !m.CanEnd() {
		t.Fatal(`{"a":1} is not complete`)
	}
}
