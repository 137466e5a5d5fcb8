package constrain

import (
	"slices"
	"testing"
	"unicode/utf8"
)

// utf8Vocab is a vocabulary of every single byte (ids 0..255, as a
// byte-level BPE has them), followed by whole and partial multi-byte
// characters.
var utf8Whole = []string{"é", "É", "α", "ω", "ü", "中", "丹", "€", "😀", "\U0010FFFF"}

var utf8Partial = []string{"\xe4\xb8", "\xe4\xb9", "\xf0\x9f", "\xf0\x9f\x98", "\xf0\x9f\x99"}

func utf8Vocab() ([][]byte, *Vocab) {
	var toks [][]byte
	for b := range 256 {
		toks = append(toks, []byte{byte(b)})
	}
	for _, s := range utf8Whole {
		toks = append(toks, []byte(s))
	}
	for _, s := range utf8Partial {
		toks = append(toks, []byte(s))
	}
	return toks, NewVocab(toks, len(toks))
}

func allowedSet(mask []uint64, id int) bool { return mask[id/64]&(1<<(id%64)) != 0 }

// TestUTF8LeadBytes: a token that is a character's first bytes is allowed
// only if some character the grammar takes there starts with them.
func TestUTF8LeadBytes(t *testing.T) {
	var anyLead []byte
	for b := 0xC2; b <= 0xF4; b++ {
		anyLead = append(anyLead, byte(b))
	}
	regex := func(p string) *Grammar { return mustRegex(t, p) }
	cases := []struct {
		name    string
		g       *Grammar
		prefix  string
		leads   []byte   // the single lead bytes allowed
		whole   []string // the whole characters (of utf8Whole) allowed
		partial []string // the partial characters (of utf8Partial) allowed
	}{
		{"regex a", regex(`a`), "", nil, nil, nil},
		{"regex é", regex(`é`), "", []byte{0xC3}, []string{"é"}, nil},
		{"regex (?i)é", regex(`(?i)é`), "", []byte{0xC3}, []string{"é", "É"}, nil},
		{"regex [a-z]", regex(`[a-z]`), "", nil, nil, nil},
		{"regex .", regex(`.`), "", anyLead, utf8Whole, utf8Partial},
		{"regex [^a]", regex(`[^a]`), "", anyLead, utf8Whole, utf8Partial},
		{"regex [α-ω]", regex(`[α-ω]`), "", []byte{0xCE, 0xCF}, []string{"α", "ω"}, nil},
		{"regex 中", regex(`x*中`), "", []byte{0xE4}, []string{"中"}, []string{"\xe4\xb8"}},
		{"regex 😀 after x", regex(`x😀`), "x", []byte{0xF0}, []string{"😀"}, []string{"\xf0\x9f", "\xf0\x9f\x98"}},
		{"regex a then anything", regex(`a.*`), "a", anyLead, utf8Whole, utf8Partial},
		{"regex é then \\z", regex(`(?:é\z|\x{10FFFF}b)`), "", []byte{0xC3, 0xF4}, []string{"é", "\U0010FFFF"}, nil},
		{"gbnf a", mustGBNF(t, `root ::= "a"`), "", nil, nil, nil},
		{"gbnf é", mustGBNF(t, `root ::= "x" | "é"`), "", []byte{0xC3}, []string{"é"}, nil},
		{"gbnf 中", mustGBNF(t, `root ::= "ab" | "中"`), "", []byte{0xE4}, []string{"中"}, []string{"\xe4\xb8"}},
		{"gbnf [α-ω]", mustGBNF(t, `root ::= [α-ω]+`), "", []byte{0xCE, 0xCF}, []string{"α", "ω"}, nil},
		{"gbnf [^a]", mustGBNF(t, `root ::= [^a]`), "", anyLead, utf8Whole, utf8Partial},
		{"gbnf .", mustGBNF(t, `root ::= .`), "", anyLead, utf8Whole, utf8Partial},
		{"gbnf [^\\x80-\\U0010FFFF]", mustGBNF(t, `root ::= [^\x80-\U0010FFFF]`), "", nil, nil, nil},
		{"gbnf [^\\x80-\\u00e8\\u00ea-\\uFFFF]", mustGBNF(t, `root ::= [^\x80-\u00e8\u00ea-\uFFFF]`), "", []byte{0xC3, 0xF0, 0xF1, 0xF2, 0xF3, 0xF4}, []string{"é", "😀", "\U0010FFFF"}, []string{"\xf0\x9f", "\xf0\x9f\x98", "\xf0\x9f\x99"}},
		{"json string", mustCompile(t, `{"type":"string"}`), `"`, anyLead, utf8Whole, utf8Partial},
		{"json any", mustCompile(t, `{}`), `["`, anyLead, utf8Whole, utf8Partial},
		{"json object key", mustCompile(t, `{"type":"object"}`), `{"`, anyLead, utf8Whole, utf8Partial},
		{"json pattern", mustCompile(t, `{"type":"string","pattern":"^a+$"}`), `"a`, nil, nil, nil},
		{"json pattern é", mustCompile(t, `{"type":"string","pattern":"^[a-z]é"}`), `"a`, []byte{0xC3}, []string{"é"}, nil},
		{"json maxLength", mustCompile(t, `{"type":"string","maxLength":1}`), `"x`, nil, nil, nil},
		{"json maxLength open", mustCompile(t, `{"type":"string","maxLength":2}`), `"x`, anyLead, utf8Whole, utf8Partial},
		{"xml pattern", mustToolXML(t, `{"type":"object","properties":{"p":{"type":"string","pattern":"^[a-z]+$"}}}`), "\n<function=f>\n<parameter=p>\na", nil, nil, nil},
		{"xml raw", mustToolXML(t, `{"type":"object","properties":{"p":{"type":"string"}}}`), "\n<function=f>\n<parameter=p>\na", anyLead, utf8Whole, utf8Partial},
	}
	toks, v := utf8Vocab()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := c.g.Matcher(v)
			if err := m.Feed([]byte(c.prefix)); err != nil {
				t.Fatal(err)
			}
			mask := make([]uint64, m.Words())
			m.Allowed(mask)
			var leads []byte
			for b := 0xC2; b <= 0xF4; b++ {
				if allowedSet(mask, b) {
					leads = append(leads, byte(b))
				}
			}
			if !slices.Equal(leads, c.leads) {
				t.Errorf("lead bytes allowed % X, want % X", leads, c.leads)
			}
			var whole, partial []string
			for id := 256; id < len(toks); id++ {
				if !allowedSet(mask, id) {
					continue
				}
				if s := string(toks[id]); utf8.ValidString(s) {
					whole = append(whole, s)
				} else {
					partial = append(partial, s)
				}
			}
			if !slices.Equal(whole, c.whole) {
				t.Errorf("characters allowed %q, want %q", whole, c.whole)
			}
			if !slices.Equal(partial, c.partial) {
				t.Errorf("partial characters allowed %q, want %q", partial, c.partial)
			}
			// Every allowed token can go on to a complete document (the
			// mask agrees with Feed, which checkMaskMatchesFeed tests):
			// here, a lead byte is followed by some continuation.
			for _, b := range leads {
				mm := m.clone()
				if err := mm.Feed([]byte{b}); err != nil {
					t.Fatalf("lead %X allowed by the mask, refused by Feed: %v", b, err)
				}
				if !canContinue(mm) {
					t.Errorf("lead %X allowed but no continuation byte is", b)
				}
			}
		})
	}
}

// canContinue follows the first continuation byte the mask allows until
// the pending character is complete, reporting whether it gets there (with
// a mask that only allows what can be completed, it always does).
func canContinue(m *Matcher) bool {
	mask := make([]uint64, m.Words())
	for m.pendingUTF8() > 0 {
		m.Allowed(mask)
		b := 0x80
		for b <= 0xBF && !allowedSet(mask, b) {
			b++
		}
		if b > 0xBF || m.Feed([]byte{byte(b)}) != nil {
			return false
		}
	}
	return true
}

// pendingUTF8 is the most bytes any configuration has left of a character.
func (m *Matcher) pendingUTF8() int {
	n := 0
	for _, c := range m.state {
		if c.lex.sub == strUTF8 && (c.lex.mode == lexText || c.lex.mode == lexGram || c.lex.mode == lexString) {
			n = max(n, int(c.lex.n))
		}
		if c.lex.sub == strUTF8 && c.lex.mode == lexRaw {
			n = max(n, int(c.lex.n), int(c.lex.cnt))
		}
	}
	return n
}

func mustToolXML(t *testing.T, params string) *Grammar {
	t.Helper()
	g, err := ToolCallXML([]Tool{{Name: "f", Parameters: []byte(params)}})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestUTF8ByteByByte feeds multi-byte characters a byte at a time (as a
// streaming parser or a byte-level tokenizer would), and checks at which
// byte each is refused.
func TestUTF8ByteByByte(t *testing.T) {
	regex := func(p string) *Grammar { return mustRegex(t, p) }
	cases := []struct {
		name   string
		g      *Grammar
		doc    string
		failAt int // -1: accepted whole
		done   bool
	}{
		{"regex é", regex(`é`), "é", -1, true},
		{"regex a on é", regex(`a`), "é", 0, false},
		{"regex [a-z] on é", regex(`[a-z]`), "é", 0, false},
		{"regex é on É", regex(`é`), "É", 1, false}, // C3 89: the lead is shared
		{"regex 中", regex(`中+`), "中中", -1, true},
		{"regex 中 on 丹", regex(`中`), "丹", 2, false}, // E4 B8 AD vs E4 B8 B9
		{"regex 中 on 之", regex(`中`), "之", 1, false}, // E4 B9 8B
		{"regex α-ω on ü", regex(`[α-ω]`), "ü", 0, false},
		{"regex α-ω on ω", regex(`[α-ω]`), "ω", -1, true},
		{"regex . on 😀", regex(`.`), "😀", -1, true},
		{"regex [^a] on 😀", regex(`[^a]`), "😀", -1, true},
		{"regex 😀 on 😁", regex(`😀`), "😁", 3, false},
		{"regex 😀 on 🙀", regex(`😀`), "🙀", 2, false},
		{"gbnf a on é", mustGBNF(t, `root ::= "a"`), "é", 0, false},
		{"gbnf é", mustGBNF(t, `root ::= "é"`), "é", -1, true},
		{"gbnf 中 on 之", mustGBNF(t, `root ::= "中"`), "之", 1, false},
		{"gbnf [^a] on 😀", mustGBNF(t, `root ::= [^a]`), "😀", -1, true},
		{"json string", mustCompile(t, `{"type":"string"}`), `"é中😀"`, -1, true},
		{"json pattern", mustCompile(t, `{"type":"string","pattern":"^a+$"}`), `"aé"`, 2, false},
		{"json pattern é", mustCompile(t, `{"type":"string","pattern":"^é+$"}`), `"éé"`, -1, true},
		{"json maxLength", mustCompile(t, `{"type":"string","maxLength":1}`), `"éé"`, 3, false},
	}
	for _, c := range cases {
		at, done := feed(t, c.g, c.doc)
		if at != c.failAt || done != c.done {
			t.Errorf("%s: %q failed at byte %d (complete %v), want %d (%v)", c.name, c.doc, at, done, c.failAt, c.done)
		}
	}
}

// TestUTF8MaskMatchesFeed walks random tokens of the byte vocabulary
// through grammars with multi-byte characters, the mask checked against
// Feed at each step.
func TestUTF8MaskMatchesFeed(t *testing.T) {
	toks, v := utf8Vocab()
	for _, p := range []string{`é+|a`, `[α-ω]{1,3}x`, `(?i)é中`, `😀|\x{10FFFF}`} {
		g, err := CompileRegex(p)
		if err != nil {
			t.Fatal(err)
		}
		if n := checkMaskMatchesFeed(t, g, toks, v, 40, 10); n == 0 {
			t.Errorf("%s: no walk completed a document", p)
		}
	}
	g := mustGBNF(t, `root ::= ("é" | [α-ω] | "中")+ "."`)
	if n := checkMaskMatchesFeed(t, g, toks, v, 40, 10); n == 0 {
		t.Error("gbnf: no walk completed a document")
	}
}

// TestUTF8PrefixesExhaustive checks, for every well-formed prefix of a
// multi-byte character, that Feed takes it exactly when some character it
// starts is taken whole: against all of Unicode.
func TestUTF8PrefixesExhaustive(t *testing.T) {
	if testing.Short() {
		t.Skip("walks all of Unicode for each grammar")
	}
	regex := func(p string) *Grammar { return mustRegex(t, p) }
	cases := []struct {
		name   string
		g      *Grammar
		prefix string
	}{
		{"regex [α-ω]|中|(?i)é", regex(`[α-ω]|中|(?i)é`), ""},
		{"regex [^\\x{80}-\\x{10000}]", regex(`[^\x{80}-\x{10000}]`), ""},
		{"regex \\p{Greek}x", regex(`\p{Greek}x`), ""},
		{"regex a(?:b|\\x{1F600}c)", regex(`a(?:b|\x{1F600}c)`), "a"},
		{"gbnf", mustGBNF(t, `root ::= [^\x80-\u00e8\u00ea-\uFFFF] | "中" | [\U0001F600-\U0001F64F]`), ""},
		{"json pattern", mustCompile(t, `{"type":"string","pattern":"^[a-zé€]+$"}`), `"`},
	}
	for _, c := range cases {
		m := c.g.Matcher(NewVocab(nil, 1))
		if err := m.Feed([]byte(c.prefix)); err != nil {
			t.Fatal(err)
		}
		// The proper prefixes of every character, and of those that some
		// configuration takes whole (told by the rune-level automata).
		prefixes, taken := map[string]bool{}, map[string]bool{}
		var buf [4]byte
		for r := rune(0x80); r <= utf8.MaxRune; r++ {
			if r >= 0xD800 && r <= 0xDFFF {
				continue
			}
			n := utf8.EncodeRune(buf[:], r)
			ok := takesRune(m, r)
			for k := 1; k < n; k++ {
				prefixes[string(buf[:k])] = true
				if ok {
					taken[string(buf[:k])] = true
				}
			}
		}
		if len(taken) == 0 {
			t.Errorf("%s: no character taken", c.name)
		}
		for p := range prefixes {
			if got := m.clone().Feed([]byte(p)) == nil; got != taken[p] {
				t.Errorf("%s: prefix % X taken %v, want %v", c.name, p, got, taken[p])
			}
		}
	}
}

// takesRune reports whether some configuration of m takes character r
// next, by the rune-level automaton: a pattern's DFA, a string's length
// bounds, a GBNF class.
func takesRune(m *Matcher, r rune) bool {
	for _, c := range m.state {
		l := c.lex
		switch l.mode {
		case lexNone: // raw text's first character
			if c.phase == pRootValue && c.node.kind == kText && !c.node.rx.start.next(r).dead {
				return true
			}
		case lexText:
			if l.sub == strNormal && !l.rx.next(r).dead {
				return true
			}
		case lexString:
			if l.sub == strNormal && (l.str == nil || l.addRune(r)) {
				return true
			}
		case lexGram:
			if l.sub == strNormal && c.node.gel[c.idx].cls.matches(r) {
				return true
			}
		}
	}
	return false
}

func mustRegex(t *testing.T, p string) *Grammar {
	t.Helper()
	g, err := CompileRegex(p)
	if err != nil {
		t.Fatal(err)
	}
	return g
}
