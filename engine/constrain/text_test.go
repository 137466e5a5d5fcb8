package constrain

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
)

func TestCompileRegex(t *testing.T) {
	cases := []struct {
		pattern string
		ok, bad []string
	}{
		{`(yes|no)`, []string{"yes", "no"}, []string{"yess", " yes", "ye", "\"yes\""}},
		{`\d{3}-[A-Z]+\n?`, []string{"123-AB", "123-AB\n"}, []string{"12-AB", "123-ab"}},
		{`(?s).*é`, []string{"é", "x\né"}, []string{"e", "éx"}},
	}
	for _, c := range cases {
		g, err := CompileRegex(c.pattern)
		if err != nil {
			t.Fatal(err)
		}
		checkDocs(t, c.pattern, g, c.ok, c.bad)
	}
	// Against Go's regexp (a full match) on random texts.
	re := `[a-c]+(x|yz)?\s*`
	g, err := CompileRegex(re)
	if err != nil {
		t.Fatal(err)
	}
	full := regexp.MustCompile(`^(?:` + re + `)$`)
	r := rand.New(rand.NewPCG(9, 10))
	for i := 0; i < 3000; i++ {
		var b strings.Builder
		for n := r.IntN(6); n >= 0; n-- {
			b.WriteString([]string{"a", "b", "c", "x", "y", "z", " ", "\n", "é"}[r.IntN(9)])
		}
		d := b.String()
		at, done := feed(t, g, d)
		if got, want := at < 0 && done, full.MatchString(d); got != want {
			t.Fatalf("%q: accepted %v, regexp %v", d, got, want)
		}
	}
	if _, err := CompileRegex(`(`); err == nil {
		t.Fatal("a bad pattern compiled")
	}
}

func TestCompileChoice(t *testing.T) {
	g, err := CompileChoice([]string{"positive", "negative", "neutral", "pos"})
	if err != nil {
		t.Fatal(err)
	}
	checkDocs(t, "choice", g, []string{"positive", "negative", "pos", "neutral"}, []string{"posi", " positive", "positive ", "\"pos\"", "neu"})
	var many []string
	for i := range 100 {
		many = append(many, "c"+strings.Repeat("x", i))
	}
	g, err = CompileChoice(many)
	if err != nil {
		t.Fatal(err)
	}
	if at, done := feed(t, g, many[99]); at >= 0 || !done {
		t.Error("the 100th of 100 choices rejected")
	}
	if _, err := CompileChoice([]string{"a", ""}); err == nil {
		t.Fatal("an empty choice compiled")
	}
	// Masks against feeding, through the vocabulary walk and its cache.
	pieces := []string{"p", "os", "pos", "itive", "neg", "ative", "ne", "utral", " ", "é", "\xc3", "\xa9", "a", "b", "x", "yz", "\n"}
	toks := make([][]byte, len(pieces))
	for i, p := range pieces {
		toks[i] = []byte(p)
	}
	v := NewVocab(toks, len(toks))
	g, _ = CompileChoice([]string{"positive", "negative", "neutral", "pos"})
	if n := checkMaskMatchesFeed(t, g, toks, v, 40, 10); n == 0 {
		t.Fatal("no walk completed a choice")
	}
	rg, _ := CompileRegex(`(a|é)+b?(x|yz)*\n?`)
	if n := checkMaskMatchesFeed(t, rg, toks, v, 40, 12); n == 0 {
		t.Fatal("no walk completed the pattern")
	}
}
