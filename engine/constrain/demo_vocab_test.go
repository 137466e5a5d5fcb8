package constrain

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/infernix/infernix/engine/tokenizer"
)

// TestDemoVocabRegexLeadBytes is the reported case on the demo model's
// byte-level vocabulary: the pattern `a` allowed its single-byte lead
// tokens (0xC2…0xF3), which decode to U+FFFD.
func TestDemoVocabRegexLeadBytes(t *testing.T) {
	dir := filepath.Join("..", "..", "tests", "testdata", "models", "demo")
	if _, err := os.Stat(filepath.Join(dir, "tokenizer.json")); err != nil {
		t.Skip("no demo model in tests/testdata")
	}
	tk, err := tokenizer.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	toks := make([][]byte, tk.VocabSize())
	for id := range toks {
		if t := int32(id); !tk.IsAdded(t) && !tk.IsSpecial(t) {
			toks[id] = tk.TokenBytes(t)
		}
	}
	v := NewVocab(toks, len(toks))
	for _, c := range []struct {
		pattern string
		want    []string
	}{
		{`a`, []string{"a"}},
		{`é`, []string{"\xc3"}}, // no whole é in this vocabulary
	} {
		g, err := CompileRegex(c.pattern)
		if err != nil {
			t.Fatal(err)
		}
		m := g.Matcher(v)
		mask := make([]uint64, m.Words())
		m.Allowed(mask)
		var got []string
		for id := range toks {
			if allowedSet(mask, id) {
				got = append(got, string(toks[id]))
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: tokens allowed %q, want %q", c.pattern, got, c.want)
		}
	}
}
