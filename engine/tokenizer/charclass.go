package tokenizer

import (
	"sync"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/rangetable"
)

var unicode9 = rangetable.Assigned("9.0.0")

// Character classes used by the pre-tokenizer scanners and the added-token
// word-boundary checks. They follow the regex engines HF uses:
//   - clsL: \p{L} (general category L*).
//   - clsN: \p{N} (Nd, Nl and No).
//   - clsM: \p{M} (Mn, Mc, Me).
//   - clsS: \s, the Unicode White_Space property (Oniguruma's and the Rust
//     regex crate's \s agree on it; unicode.IsSpace is the same set).
//   - clsW: \w of the Rust regex crate (Alphabetic, M, Nd, Pc, Join_Control),
//     used for single_word added tokens.
//   - clsNew: not assigned in Unicode 9.0, the version of HF's normalization
//     tables (see normalize.go).
const (
	clsL uint8 = 1 << iota
	clsN
	clsM
	clsS
	clsW
	clsNew
)

var (
	bmpClassOnce sync.Once
	bmpClass     []uint8 // class bits of every rune below 0x10000
	asciiClass   [utf8.RuneSelf]uint8
)

func init() {
	for r := rune(0); r < utf8.RuneSelf; r++ {
		asciiClass[r] = computeClass(r)
	}
}

func computeClass(r rune) uint8 {
	var c uint8
	if unicode.IsLetter(r) {
		c |= clsL
	}
	if unicode.IsNumber(r) {
		c |= clsN
	}
	if unicode.IsMark(r) {
		c |= clsM
	}
	if unicode.IsSpace(r) {
		c |= clsS
	}
	if unicode.IsLetter(r) || unicode.In(r, unicode.Nl, unicode.Other_Alphabetic, unicode.M, unicode.Nd, unicode.Pc) ||
		r == 0x200C || r == 0x200D {
		c |= clsW
	}
	if !unicode.Is(unicode9, r) {
		c |= clsNew
	}
	return c
}

// buildBMPClass fills the table for the Basic Multilingual Plane once, so
// that scanning non-ASCII text costs a load instead of range-table searches.
func buildBMPClass() {
	t := make([]uint8, 0x10000)
	for r := rune(0); r < 0x10000; r++ {
		t[r] = computeClass(r)
	}
	bmpClass = t
}

// classOf returns the class bits of r. Invalid UTF-8 reaches here as
// utf8.RuneError (U+FFFD, a symbol), which has none of the bits.
func classOf(r rune) uint8 {
	if r < utf8.RuneSelf {
		return asciiClass[r]
	}
	if r < 0x10000 {
		bmpClassOnce.Do(buildBMPClass)
		return bmpClass[r]
	}
	return computeClass(r)
}

// decodeRune is utf8.DecodeRuneInString with the ASCII case inline.
func decodeRune(s string, i int) (rune, int) {
	if c := s[i]; c < utf8.RuneSelf {
		return rune(c), 1
	}
	return utf8.DecodeRuneInString(s[i:])
}

// lastRune is utf8.DecodeLastRuneInString with the ASCII case inline.
func lastRune(s string) (rune, int) {
	if c := s[len(s)-1]; c < utf8.RuneSelf {
		return rune(c), 1
	}
	return utf8.DecodeLastRuneInString(s)
}
