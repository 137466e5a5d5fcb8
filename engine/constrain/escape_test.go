package constrain

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// TestEscapeNextBytes: inside a string, an escape (its backslash, its
// letter, each \u hex digit) is allowed only where the character it may
// still produce is one the string takes there: within maxLength, one its
// pattern can take, the next of an enum value, const or key.
func TestEscapeNextBytes(t *testing.T) {
	cases := []struct {
		schema, prefix string
		allow, refuse  string // next bytes
	}{
		{`{"type":"string","maxLength":1}`, `"`, `\"a`, ""},
		{`{"type":"string","maxLength":1}`, `"x`, `"`, `\ua0`},
		{`{"type":"string","maxLength":0}`, `"`, `"`, `\a`},
		{`{"type":"string","maxLength":2}`, `"x\`, `un"\/bfnrt`, `xa0`},
		{`{"type":"string","maxLength":2}`, `"x\u`, `0123456789abcdefABCDEF`, `"\gx`},
		{`{"type":"string","maxLength":2}`, `"x\uD`, `01234567`, `89abcdefABCDEF`},
		{`{"type":"string","minLength":1}`, `"\uD`, `01234567`, `89abcdefABCDEF`},
		{`{"type":"string"}`, `"\uD8`, `0123456789abcdefABCDEF`, ``}, // lone surrogates: valid JSON
		{`{"type":"string","minLength":2}`, `"x`, `\a`, `"`},
		{`{"type":"string","pattern":"^a+$"}`, `"a`, `\"a`, `b`},
		{`{"type":"string","pattern":"^a+$"}`, `"a\`, `u`, `n"\/bfrt`},
		{`{"type":"string","pattern":"^a+$"}`, `"a\u`, `0`, `123456789abcdefABCDEF"`},
		{`{"type":"string","pattern":"^a+$"}`, `"a\u0`, `0`, `123456789abcdefABCDEF`},
		{`{"type":"string","pattern":"^a+$"}`, `"a\u00`, `6`, `012345789abcdefABCDEF`},
		{`{"type":"string","pattern":"^a+$"}`, `"a\u006`, `1`, `023456789abcdefABCDEF`},
		{`{"type":"string","pattern":"^é$"}`, `"\u00`, `eE`, `0fF`},
		{`{"type":"string","pattern":"^é$"}`, `"\u00e`, `9`, `0aA`},
		// Beyond the BMP only the character itself (no surrogate escapes).
		{`{"type":"string","pattern":"^😀$"}`, `"`, "\xf0", `\`},
		{`{"type":"string","pattern":"^[\\x{E000}-\\x{E0FF}]$"}`, `"\u`, `eE`, `dD0fF`},
		{`{"type":"string","pattern":"^.$"}`, `"\u`, `dD0fF`, `"`},
		{`{"type":"string","pattern":"^.$"}`, `"\uD`, `01234567`, `89abcdefABCDEF`},
		{`{"type":"string","pattern":"^\\n$"}`, `"\`, `nu`, `t"\/`},
		{`{"type":"string","pattern":"^\\\\$"}`, `"\`, `\u`, `n"/`},
		{`{"type":"string","pattern":"^\"$"}`, `"\`, `"u`, `n\/`},
		{`{"type":"string","pattern":"^[a-z]$","maxLength":1}`, `"\u00`, `67`, `0258`},
		{`{"type":"string","format":"uuid"}`, `"\`, `u`, `n"\/`},
		{`{"type":"string","format":"date"}`, `"2024-\u003`, `01`, `2a`},
		// Enum values, const and keys are matched as written (Go's
		// canonical escapes), so only their own escapes are taken.
		{`{"enum":["a\"b","c\nd","é","\u0001"]}`, `"a`, `\`, `"u`},
		{`{"enum":["a\"b","c\nd","é","\u0001"]}`, `"a\`, `"`, `u\n`},
		{`{"enum":["a\"b","c\nd","é","\u0001"]}`, `"c\`, `n`, `u"`},
		{`{"enum":["a\"b","c\nd","é","\u0001"]}`, `"\u000`, `1`, `02"`},
		{`{"const":"x\\y"}`, `"x\`, `\`, `u"`},
		{`{"type":"object","properties":{"a\"b":{"type":"string","maxLength":1}},"required":["a\"b"]}`, `{"a\`, `"`, `u\`},
		{`{"type":"object","properties":{"a\"b":{"type":"string","maxLength":1}},"required":["a\"b"]}`, `{"a\"b":"q`, `"`, `\`},
		{`{"type":"object","additionalProperties":{"type":"string","pattern":"^a$"}}`, `{"k\u0`, `0123456789abcdefABCDEF`, `"`},
		{`{"type":"object","additionalProperties":{"type":"string","pattern":"^a$"}}`, `{"k":"\u00`, `6`, `7"`},
	}
	for _, c := range cases {
		g := mustCompile(t, c.schema)
		m := g.Matcher(NewVocab(nil, 1))
		if err := m.Feed([]byte(c.prefix)); err != nil {
			t.Errorf("%s: prefix %s refused: %v", c.schema, c.prefix, err)
			continue
		}
		for want, bs := range map[bool]string{true: c.allow, false: c.refuse} {
			for i := 0; i < len(bs); i++ {
				if got := m.clone().Feed([]byte{bs[i]}) == nil; got != want {
					t.Errorf("%s: after %s, %q allowed %v, want %v", c.schema, c.prefix, bs[i], got, want)
				}
			}
		}
	}
}

// escVocab is every single byte (ids 0..255) and multi-byte tokens that
// write escapes, characters and ends in one go.
func escVocab() ([][]byte, *Vocab) {
	var toks [][]byte
	for b := range 256 {
		toks = append(toks, []byte{byte(b)})
	}
	for _, s := range []string{`\u`, `\u00`, `\u0061`, `00`, `006`, `e9`, `D8`, `d83d`, `\"`, `\\`, `\n`, `"}`, `":"`, `","`, `a"`, "é", "😀", `\ud83d\ude00`, "\n</parameter>", "\n<parameter=p>\n", "</function>"} {
		toks = append(toks, []byte(s))
	}
	return toks, NewVocab(toks, len(toks))
}

// completableWithin reports whether some bytes, at most limit of them,
// take m to a state where the document may end: a depth-first search over
// all 256 bytes, closing bytes first, states merged by their key (a state
// searched with as many bytes left or more is not searched again).
func completableWithin(m *Matcher, limit int) bool {
	// Closing bytes, then the printable ones, then the rest (whitespace
	// last, which may pad without bringing the end nearer).
	order := []byte(`"}]>`)
	for b := 0x21; b < 0x7F; b++ {
		if !strings.ContainsRune(`"}]>`, rune(b)) {
			order = append(order, byte(b))
		}
	}
	for b := 0x80; b < 0x100; b++ {
		order = append(order, byte(b))
	}
	for b := 0; b <= 0x20; b++ {
		order = append(order, byte(b))
	}
	order = append(order, 0x7F)
	seen := map[string]int{}
	var search func(m *Matcher, left int) bool
	search = func(m *Matcher, left int) bool {
		if m.CanEnd() {
			return true
		}
		k := string(stateKey(nil, m.state, 1<<20))
		if l, ok := seen[k]; (ok && l >= left) || left == 0 {
			return false
		}
		seen[k] = left
		for _, b := range order {
			x := m.clone()
			if x.Feed([]byte{b}) == nil && search(x, left-1) {
				return true
			}
		}
		return false
	}
	return search(m, limit)
}

// TestNoDeadEnds walks grammars at random, by the tokens (single bytes
// and longer) that their masks allow, favouring escapes and quotes, and
// checks that from every point reached a complete document is still
// reachable: no token the mask allows leads where nothing may follow.
func TestNoDeadEnds(t *testing.T) {
	schemas := []string{
		`{"type":"string","maxLength":0}`,
		`{"type":"string","maxLength":1}`,
		`{"type":"string","maxLength":2}`,
		`{"type":"string","minLength":1,"maxLength":2}`,
		`{"type":"string","pattern":"^a+$"}`,
		`{"type":"string","pattern":"^a+$","maxLength":2}`,
		`{"type":"string","pattern":"^é$"}`,
		`{"type":"string","pattern":"^😀$"}`,
		`{"type":"string","pattern":"^[\\x{E000}-\\x{E0FF}]$"}`,
		`{"type":"string","pattern":"^.$"}`,
		`{"type":"string","pattern":"^[\\n\\t\"\\\\/]+$","maxLength":3}`,
		`{"type":"string","pattern":"^(a|\\x{7FF}|\\x{800}|\\x{FFFF})$"}`,
		`{"type":"string","pattern":"x"}`,
		`{"type":"string","format":"ipv4"}`,
		`{"enum":["a\"b","c\nd","é","\u0001","😀","a"]}`,
		`{"const":"x\\y\t"}`,
		`{"type":"object","properties":{"a\"b":{"type":"string","maxLength":1},"tab\tk":{"enum":["\\","\""]}},"required":["tab\tk"]}`,
		`{"type":"object","additionalProperties":{"type":"string","pattern":"^a$"}}`,
		`{"type":"array","items":{"type":"string","pattern":"^[a-c]$"},"maxItems":2}`,
	}
	var grammars []*Grammar
	var names []string
	for _, s := range schemas {
		grammars = append(grammars, mustCompile(t, s))
		names = append(names, s)
	}
	grammars = append(grammars, mustRegex(t, `a[é😀]?b?`), mustGBNF(t, `root ::= "\"" [a\\]? "\\u00" [0-9] "\""`),
		mustToolXML(t, `{"type":"object","properties":{"p":{"type":"string","pattern":"^a+$","maxLength":2}},"required":["p"]}`),
		mustToolXML(t, `{"type":"object","properties":{"p":{"type":"string","maxLength":1}},"required":["p"]}`))
	names = append(names, "regex", "gbnf", "xml pattern", "xml maxLength")
	favour := []byte(`\u"0123456789abcdefABCDEFn`)
	toks, v := escVocab()
	r := rand.New(rand.NewPCG(11, 12))
	walks := 40
	if testing.Short() {
		walks = 8
	}
	for gi, g := range grammars {
		for walk := 0; walk < walks; walk++ {
			m := g.Matcher(v)
			mask := make([]uint64, m.Words())
			var path strings.Builder
			for step := 0; step < 24; step++ {
				if !completableWithin(m, 96) {
					t.Fatalf("%s: after %q no complete document is reachable", names[gi], path.String())
				}
				m.Allowed(mask)
				var allowed, favoured []int
				for id := range toks {
					if !allowedSet(mask, id) {
						continue
					}
					allowed = append(allowed, id)
					if id >= 256 || strings.IndexByte(string(favour), byte(id)) >= 0 {
						favoured = append(favoured, id)
					}
				}
				if len(allowed) == 0 {
					break
				}
				pick := allowed
				if len(favoured) > 0 && r.IntN(4) > 0 {
					pick = favoured
				}
				id := pick[r.IntN(len(pick))]
				if err := m.Accept(int32(id)); err != nil {
					t.Fatalf("%s: after %q: token %q allowed by the mask: %v", names[gi], path.String(), toks[id], err)
				}
				path.Write(toks[id])
			}
		}
	}
}
