package tokenizer

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func splitAll(sp *splitter, s string) []string {
	var out []string
	for i := 0; i < len(s); {
		j := sp.next(s, i)
		out = append(out, s[i:j])
		i = j
	}
	return out
}

// Expected pieces follow the regexes' leftmost-first semantics; the comments
// name the alternative that decides.
func TestSplitters(t *testing.T) {
	qwen := knownSplitters[patQwen2]
	qwen35 := knownSplitters[patQwen35]
	llama := knownSplitters[patLlama3]
	gpt2 := knownSplitters[patGPT2]
	tests := []struct {
		sp   *splitter
		in   string
		want []string
	}{
		{qwen, "Hello world", []string{"Hello", " world"}},
		{qwen, "a  b", []string{"a", " ", " b"}},                 // \s+(?!\S) backs off one space
		{qwen, "  end  ", []string{" ", " end", "  "}},           // at the end \s+(?!\S) takes all
		{qwen, "a \n b", []string{"a", " \n", " b"}},             // \s*[\r\n]+
		{qwen, "x  \n\n  y", []string{"x", "  \n\n", " ", " y"}}, // \s* backtracks to the last \n
		{qwen, "x\n \ty", []string{"x", "\n", " ", "\ty"}},       // [^\r\n\p{L}\p{N}]? takes the tab
		{qwen, "\r\nfoo", []string{"\r\n", "foo"}},               // \r is not a letter prefix
		{qwen, "it's IT'S it'Ll", []string{"it", "'s", " IT", "'S", " it", "'Ll"}},
		{qwen, "'sup", []string{"'s", "up"}},
		{qwen, "'TWAS", []string{"'T", "WAS"}}, // (?i) contraction before the letter run
		{qwen, "'LLama", []string{"'LL", "ama"}},
		{qwen, "x'REady", []string{"x", "'RE", "ady"}},
		{qwen, "'\u017ftop", []string{"'\u017f", "top"}}, // long s folds to s
		{qwen, "'Kelvin", []string{"'Kelvin"}},           // Kelvin sign folds to k: no contraction
		{qwen, " 'TWAS", []string{" '", "TWAS"}},         // the space takes the apostrophe
		{gpt2, "'TWAS", []string{"'", "TWAS"}},
		{qwen, "'\u017f '\u212a", []string{"'\u017f", " '", "\u212a"}}, // long s folds to s
		{qwen, "123456", []string{"1", "2", "3", "4", "5", "6"}},
		{qwen, "ab12", []string{"ab", "1", "2"}},
		{qwen, "!!!\n\nabc", []string{"!!!\n\n", "abc"}},
		{qwen, " ?! x", []string{" ?!", " x"}},
		{qwen, "(hello)", []string{"(hello", ")"}},
		{qwen, "\u3000漢字", []string{"\u3000漢字"}},
		{qwen, "a\u00a0b", []string{"a", "\u00a0b"}},
		{qwen, "e\u0301", []string{"e", "\u0301"}},
		{qwen, "<|im", []string{"<|", "im"}},
		{qwen, "\u200bx", []string{"\u200bx"}}, // ZWSP is not \s
		{qwen, "a\u0085\u0085b", []string{"a", "\u0085", "\u0085b"}},
		{qwen, "", nil},
		{qwen35, "e\u0301x", []string{"e\u0301x"}},
		{qwen35, "\u0301\u0301", []string{"\u0301\u0301"}},
		{qwen35, "नमस्ते", []string{"नमस्ते"}},
		{qwen, "नमस्ते", []string{"नमस", "्त", "े"}}, // a mark may prefix letters
		{llama, "1234567", []string{"123", "456", "7"}},
		{llama, "x12 345", []string{"x", "12", " ", "345"}},
		{gpt2, "Hello world  12 345!?", []string{"Hello", " world", " ", " 12", " 345", "!?"}},
		{gpt2, "it's IT'S", []string{"it", "'s", " IT", "'", "S"}}, // case-sensitive
		{gpt2, "a \n b", []string{"a", " \n", " b"}},
		{gpt2, "x\n\ny", []string{"x", "\n", "\n", "y"}}, // no letter prefix but ' '
		{gpt2, "  ", []string{"  "}},
		{gpt2, " \u0301", []string{" \u0301"}},
	}
	for _, tc := range tests {
		if got := splitAll(tc.sp, tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("split(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// The scanners must tile any input, valid UTF-8 or not, with non-empty
// pieces that never split a rune.
func FuzzSplitters(f *testing.F) {
	for _, s := range []string{"Hello world", "a \n b", "'s'S'\u017f", "\xff\xfe x", "12 345\u3000"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for name, sp := range knownSplitters {
			var b strings.Builder
			for i := 0; i < len(s); {
				j := sp.next(s, i)
				if j <= i || j > len(s) {
					t.Fatalf("%.20s: next(%q, %d) = %d", name, s, i, j)
				}
				if utf8.ValidString(s) && !utf8.ValidString(s[i:j]) {
					t.Fatalf("%.20s: piece %q splits a rune", name, s[i:j])
				}
				b.WriteString(s[i:j])
				i = j
			}
			if b.String() != s {
				t.Fatalf("pieces do not tile %q", s)
			}
		}
	})
}
