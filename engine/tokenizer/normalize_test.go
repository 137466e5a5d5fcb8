package tokenizer

import (
	"testing"

	"golang.org/x/text/unicode/norm"
)

// Expected values are what HF tokenizers 0.23.2 produces: it normalizes with
// Unicode 9.0 data, so later marks are inert starters.
func TestNormalizeUnicode9(t *testing.T) {
	tests := []struct {
		form    norm.Form
		in, out string
	}{
		{norm.NFC, "e\u0301", "\u00e9"},
		{norm.NFC, "plain ascii", "plain ascii"},
		{norm.NFC, "a\u1dfa\u0301", "a\u1dfa\u0301"},        // U+1DFA is Unicode 14
		{norm.NFC, "a\u0301\u1dfa", "\u00e1\u1dfa"},         // composes before it
		{norm.NFC, "a\u0d3b\u0301", "a\u0d3b\u0301"},        // Unicode 10
		{norm.NFC, "a\U0001e94a\u0301", "\u00e1\U0001e94a"}, // Adlam nukta is 9.0
		{norm.NFC, "a\u08e3\u0301", "\u00e1\u08e3"},         // Unicode 8
		{norm.NFC, "a\u2dff\u0323", "\u1ea1\u2dff"},
		{norm.NFC, "a\u1df6\u0301x\u0301", "a\u1df6\u0301x\u0301"},
		{norm.NFC, "e\u0301\u1df6e\u0301", "\u00e9\u1df6\u00e9"},
		{norm.NFKC, "\U0001e035\ufb01", "\U0001e035fi"}, // U+1E035's mapping is 15.0
	}
	for _, tc := range tests {
		if got := normalizeUnicode9(tc.form, tc.in); got != tc.out {
			t.Errorf("normalize(%+q) = %+q, want %+q", tc.in, got, tc.out)
		}
	}
}
