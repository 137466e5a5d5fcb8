package constrain

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
)

func mustGBNF(t *testing.T, src string) *Grammar {
	t.Helper()
	g, err := CompileGBNF(src)
	if err != nil {
		t.Fatalf("CompileGBNF(%q): %v", src, err)
	}
	return g
}

func TestGBNFDocuments(t *testing.T) {
	cases := []struct {
		src     string
		ok, bad []string
	}{
		{`root ::= "yes" | "no"`, []string{"yes", "no"}, []string{"ye", "yess", " no", ""}},
		{"root ::= expr\nexpr ::= term ((\"+\" | \"-\") term)*\nterm ::= [0-9]+ | \"(\" expr \")\"  # numbers or groups\n",
			[]string{"1", "12+3", "(1-2)+((3))", "0-0-0"}, []string{"1+", "(1", "+1", "1 + 2", "()"}},
		{`root ::= [^"\\\n]{2,3} "é" .`, []string{"ab" + "é" + "x", "a b" + "é" + "\n"}, []string{"a" + "é" + "x", "abcd" + "é" + "x", "a\"b" + "é" + "x"}},
		{"root ::= item (\",\" item)*\nitem ::=\n  \"a\" |\n  \"b\" [0-9]?\n", []string{"a", "b", "b7,a,b"}, []string{"a,", "c", "b77"}},
		{`root ::= "(" root ")" root | ""`, []string{"", "()", "(())()", "()(()())"}, []string{"(", ")(", "(()"}},
		{`root ::= [\x41-\x43\u00e9]+ "\t"?`, []string{"ABC", "é\t"}, []string{"D", "\t"}},
	}
	for _, c := range cases {
		checkDocs(t, c.src, mustGBNF(t, c.src), c.ok, c.bad)
	}
}

// TestGBNFMatchesRegexp compares a regular grammar with the same language
// written as a regexp, and a balanced-parentheses grammar with a counter,
// on random texts.
func TestGBNFMatchesRegexp(t *testing.T) {
	g := mustGBNF(t, "root ::= [a-c]+ (\"x\" | \"yz\")? ws\nws ::= [ \\n]*\n")
	re := regexp.MustCompile(`^[a-c]+(x|yz)?[ \n]*$`)
	parens := mustGBNF(t, `root ::= "(" root ")" root | [a]*`)
	balanced := func(s string) bool {
		depth := 0
		for _, c := range s {
			switch c {
			case '(':
				depth++
			case ')':
				if depth--; depth < 0 {
					return false
				}
			}
		}
		return depth == 0
	}
	r := rand.New(rand.NewPCG(11, 12))
	for i := 0; i < 4000; i++ {
		var b strings.Builder
		for n := r.IntN(7); n >= 0; n-- {
			b.WriteString([]string{"a", "b", "c", "x", "y", "z", " ", "\n"}[r.IntN(8)])
		}
		d := b.String()
		m := g.Matcher(NewVocab(nil, 1))
		got := m.Feed([]byte(d)) == nil && m.CanEnd()
		if want := re.MatchString(d); got != want {
			t.Fatalf("%q: grammar %v, regexp %v", d, got, want)
		}
		b.Reset()
		for n := r.IntN(8); n >= 0; n-- {
			b.WriteString([]string{"(", ")", "a"}[r.IntN(3)])
		}
		d = b.String()
		m = parens.Matcher(NewVocab(nil, 1))
		got = m.Feed([]byte(d)) == nil && m.CanEnd()
		// The grammar's language: balanced parentheses where a's only end a
		// level (before its ")" or the text's end), never before a "(".
		want := balanced(d) && !strings.Contains(d, "a(")
		if got != want {
			t.Fatalf("%q: grammar %v, want %v", d, got, want)
		}
	}
}

func TestGBNFErrors(t *testing.T) {
	cases := []struct{ src, msg string }{
		{`rot ::= "a"`, "no rule named root"},
		{`root ::= x`, `undefined rule "x"`},
		{"root ::= root \"a\" | \"b\"", "left-recursive"},
		{"root ::= a \"x\"\na ::= b\nb ::= \"\" | a \"y\"", "left-recursive"},
		{`root ::= "abc`, "line 1, column 14: unterminated string"},
		{"root ::= \"a\"\n\nroot ::= \"b\"", "defined twice"},
		{`root ::= [b-a]`, "empty"},
		{`root ::= "a"{2,1}`, "bad repetition"},
		{`root ::= "\q"`, "unknown escape"},
		{"root ::= (\"a\"", "expected )"},
		{"root ::= \"a\" ]", "unexpected"},
	}
	for _, c := range cases {
		_, err := CompileGBNF(c.src)
		if err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("CompileGBNF(%q) = %v, want an error with %q", c.src, err, c.msg)
		}
	}
}

func TestGBNFMaskMatchesFeed(t *testing.T) {
	g := mustGBNF(t, "root ::= obj\nobj ::= \"{\" (pair (\", \" pair)*)? \"}\"\npair ::= key \": \" val\nkey ::= [a-z]+\nval ::= [0-9]+ | obj | \"é\"\n")
	pieces := []string{"{", "}", ", ", ": ", "a", "ab", "b", "1", "12", "é", "\xc3", "\xa9", "{a", "}}", ",", " ", ":", "x"}
	toks := make([][]byte, len(pieces))
	for i, p := range pieces {
		toks[i] = []byte(p)
	}
	if n := checkMaskMatchesFeed(t, g, toks, NewVocab(toks, len(toks)), 100, 30); n == 0 {
		t.Fatal("no walk completed a document")
	}
}

// FuzzGBNF compiles random grammar texts: an error or a grammar, never a
// panic or a hang; a compiled one is fed its own text.
func FuzzGBNF(f *testing.F) {
	f.Add("root ::= \"a\" | [b-c]* x\nx ::= (\"y\" | \"z\"){1,3}\n")
	f.Add(`root ::= "(" root ")" root | ""`)
	f.Fuzz(func(t *testing.T, src string) {
		if len(src) > 200 {
			return
		}
		g, err := CompileGBNF(src)
		if err != nil {
			return
		}
		m := g.Matcher(NewVocab(nil, 1))
		_ = m.Feed([]byte(src))
		m.CanEnd()
	})
}
