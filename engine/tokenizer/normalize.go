package tokenizer

import (
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// HF's normalizers use Unicode 9.0 tables (the unicode-normalization-alignments
// crate), while x/text has Unicode 15. Characters assigned since 9.0 are
// therefore unknown to HF: it gives them no decomposition and combining class
// 0, so they act as inert starters (e.g. NFC leaves "a\u1DF6\u0301" alone while
// Unicode 15 reorders and composes it). Normalizing the text between such
// characters separately, and copying them unchanged, reproduces that; for
// characters assigned by 9.0 the two versions agree (normalization stability).

// normalize applies the tokenizer's normalizers to s.
func (t *Tokenizer) normalize(s string) string {
	for _, f := range t.normForms {
		s = normalizeUnicode9(f, s)
	}
	return s
}

func normalizeUnicode9(f norm.Form, s string) string {
	// Text that is already normal under Unicode 15 is normal under HF's view
	// too: a non-normal stretch between new characters would be non-normal
	// within s as well. This is the common, allocation-free path.
	if f.QuickSpanString(s) == len(s) {
		return s
	}
	var out []byte
	start := 0
	for i := 0; i < len(s); {
		if s[i] < utf8.RuneSelf {
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if classOf(r)&clsNew != 0 {
			// Each stretch separately: AppendString would normalize across
			// the boundary with what out already holds.
			out = append(out, f.String(s[start:i])...)
			out = append(out, s[i:i+n]...)
			start = i + n
		}
		i += n
	}
	if start == 0 {
		return f.String(s)
	}
	out = append(out, f.String(s[start:])...)
	return string(out)
}
