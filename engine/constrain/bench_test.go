package constrain

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/infernix/infernix/engine/tokenizer"
)

// qwenVocab indexes the real Qwen3 tokenizer (tests/testdata) as the server
// does: added and special tokens excluded.
func qwenVocab(b *testing.B) *Vocab {
	dir := filepath.Join("..", "..", "tests", "testdata", "qwen3-tokenizer")
	if _, err := os.Stat(filepath.Join(dir, "tokenizer.json")); err != nil {
		b.Skip("no Qwen3 tokenizer in tests/testdata")
	}
	tk, err := tokenizer.Load(dir)
	if err != nil {
		b.Fatal(err)
	}
	toks := make([][]byte, tk.VocabSize())
	for id := range toks {
		if t := int32(id); !tk.IsAdded(t) && !tk.IsSpecial(t) {
			toks[id] = tk.TokenBytes(t)
		}
	}
	return NewVocab(toks, 151936)
}

// BenchmarkMaskUncached is one vocabulary walk of Qwen3's 151k tokens per
// op, in the costliest state (inside a string, where nearly every token is
// allowed), at an object's key, inside a string with a pattern (its DFA
// built once, then reused) and inside a bounded integer and number.
func BenchmarkMaskUncached(b *testing.B) {
	v := qwenVocab(b)
	for _, c := range []struct{ name, prefix string }{{"in_string", `{"name": "x`}, {"at_key", `{"name": "x", `},
		{"in_pattern_string", `{"name": "x", "age": 3, "code": "A`}, {"in_bounded_integer", `{"name": "x", "age": 1`},
		{"in_bounded_number", `{"name": "x", "age": 3, "code": "A", "p": 0.2`}} {
		b.Run(c.name, func(b *testing.B) {
			g, err := Compile([]byte(`{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer","minimum":0,"maximum":150},"code":{"type":"string","pattern":"^[A-Z][a-z0-9 ]*$"},"p":{"type":"number","minimum":0,"maximum":0.25}}}`))
			if err != nil {
				b.Fatal(err)
			}
			benchWalk(b, g, v, c.prefix)
		})
	}
}

// benchWalk times one uncached vocabulary walk of g's state after prefix.
func benchWalk(b *testing.B, g *Grammar, v *Vocab, prefix string) {
	m := g.Matcher(v)
	if err := m.Feed([]byte(prefix)); err != nil {
		b.Fatal(err)
	}
	mask := make([]uint64, m.Words())
	for b.Loop() {
		clear(mask)
		m.v.walk(&m.w, m.state, mask)
	}
}

// BenchmarkMaskCached is Allowed when the state's mask is cached: what a
// sequence pays per token inside a long string.
func BenchmarkMaskCached(b *testing.B) {
	v := qwenVocab(b)
	m := jsonObject().Matcher(v)
	if err := m.Feed([]byte(`{"a": "x`)); err != nil {
		b.Fatal(err)
	}
	mask := make([]uint64, m.Words())
	m.Allowed(mask)
	for b.Loop() {
		m.Allowed(mask)
	}
}

// BenchmarkMaskUncachedGrammars is one vocabulary walk per op for the other
// grammars: a GBNF grammar inside free text, an XML tool call inside a raw
// string value, and a regex over the whole output.
func BenchmarkMaskUncachedGrammars(b *testing.B) {
	v := qwenVocab(b)
	gbnf, err := CompileGBNF("root ::= \"Answer: \" [^\\n]* \"\\n\"\n")
	if err != nil {
		b.Fatal(err)
	}
	xml, err := ToolCallXML([]Tool{{Name: "f", Parameters: []byte(`{"type":"object","properties":{"path":{"type":"string"},"n":{"type":"integer"}},"required":["path"]}`)}})
	if err != nil {
		b.Fatal(err)
	}
	rx, err := CompileRegex(`[A-Z][a-z]+ (is|was) [0-9]{1,4}\.`)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		g      *Grammar
		prefix string
	}{{"gbnf_free_text", gbnf, "Answer: it"}, {"xml_raw_value", xml, "\n<function=f>\n<parameter=path>\n/tmp"}, {"regex", rx, "Paris is"}} {
		b.Run(c.name, func(b *testing.B) {
			benchWalk(b, c.g, v, c.prefix)
		})
	}
}
