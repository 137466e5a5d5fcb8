package tokenizer

import "unicode/utf8"

// Hand-written equivalents of the split regexes byte-level BPE tokenizers ship.
// Go's regexp has no lookahead, and a scanner is much faster anyway. Each
// scanner reproduces the leftmost-first alternation of Oniguruma (which HF
// tokenizers compiles these patterns with), backtracking included. Every rune
// is matched by some alternative of each supported pattern, so a match always
// starts where the previous one ended and the pieces tile the input.

// Pattern strings recognised in tokenizer.json, verbatim.
const (
	// patQwen2 is the Qwen2/Qwen2.5/Qwen3 pattern.
	patQwen2 = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// patQwen35 is Qwen3.5's: combining marks join letters.
	patQwen35 = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// patLlama3 is the cl100k-style pattern with digit groups of up to three.
	patLlama3 = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// patGPT2 is the pattern of ByteLevel(use_regex=true).
	patGPT2 = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
)

// splitter describes one supported pattern; next returns the end of the match
// that starts at i (i < len(s)).
type splitter struct {
	gpt2      bool  // GPT-2 layout rather than the cl100k layout
	letters   uint8 // class bits of the letter run: clsL, or clsL|clsM
	punctNot  uint8 // symbol runs are of runes with none of these bits
	maxDigits int   // cl100k: \p{N} repeats up to this many times
}

var knownSplitters = map[string]*splitter{
	patQwen2:  {letters: clsL, punctNot: clsS | clsL | clsN, maxDigits: 1},
	patQwen35: {letters: clsL | clsM, punctNot: clsS | clsL | clsN | clsM, maxDigits: 1},
	patLlama3: {letters: clsL, punctNot: clsS | clsL | clsN, maxDigits: 3},
	patGPT2:   {gpt2: true, letters: clsL, punctNot: clsS | clsL | clsN},
}

// next returns the end of the match starting at i.
func (sp *splitter) next(s string, i int) int {
	if sp.gpt2 {
		return sp.nextGPT2(s, i)
	}
	return sp.nextCL100K(s, i)
}

// run returns the end of the run of runes from i whose class intersects mask.
func run(s string, i int, mask uint8) int {
	for i < len(s) {
		if c := s[i]; c < utf8.RuneSelf {
			if asciiClass[c]&mask == 0 {
				break
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if classOf(r)&mask == 0 {
			break
		}
		i += n
	}
	return i
}

// runNot returns the end of the run of runes from i whose class does not
// intersect mask.
func runNot(s string, i int, mask uint8) int {
	for i < len(s) {
		if c := s[i]; c < utf8.RuneSelf {
			if asciiClass[c]&mask != 0 {
				break
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if classOf(r)&mask != 0 {
			break
		}
		i += n
	}
	return i
}

// runNewlines returns the end of the run of '\r' and '\n' from i.
func runNewlines(s string, i int) int {
	for i < len(s) && (s[i] == '\r' || s[i] == '\n') {
		i++
	}
	return i
}

// contraction returns the length of the contraction suffix after an
// apostrophe at s[i:] ("s", "t", "re", "ve", "m", "ll", "d"), or 0. With fold
// set it matches case-insensitively as Oniguruma does, where U+017F (long s)
// folds to 's'.
func contraction(s string, i int, fold bool) int {
	c0, n0, ok := foldedASCII(s, i, fold)
	if !ok {
		return 0
	}
	switch c0 {
	case 's', 't', 'm', 'd':
		return n0
	case 'r', 'v', 'l':
		want := byte('e')
		if c0 == 'l' {
			want = 'l'
		}
		if c1, n1, ok := foldedASCII(s, i+n0, fold); ok && c1 == want {
			return n0 + n1
		}
	}
	return 0
}

// foldedASCII decodes the rune at s[i] and, when fold is set, folds it to
// the lower-case ASCII letter it matches case-insensitively.
func foldedASCII(s string, i int, fold bool) (byte, int, bool) {
	if i >= len(s) {
		return 0, 0, false
	}
	c := s[i]
	if c < 0x80 {
		if fold && c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		return c, 1, true
	}
	if fold && c == 0xC5 && i+1 < len(s) && s[i+1] == 0xBF { // U+017F
		return 's', 2, true
	}
	return 0, 0, false
}

// nextCL100K implements
//
//	(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?LETTERS+|\p{N}{1,max}|
//	 ?[^\s\p{L}\p{N}...]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
func (sp *splitter) nextCL100K(s string, i int) int {
	r0, n0 := decodeRune(s, i)
	c0 := classOf(r0)
	if r0 == '\'' {
		if n := contraction(s, i+1, true); n > 0 {
			return i + 1 + n
		}
	}
	// [^\r\n\p{L}\p{N}]?LETTERS+ : a rune that is itself a letter makes the
	// optional prefix irrelevant (with marks as letters, a mark taken as the
	// prefix gives the same end).
	if c0&sp.letters != 0 {
		return run(s, i+n0, sp.letters)
	}
	if r0 != '\r' && r0 != '\n' && c0&(clsL|clsN) == 0 && i+n0 < len(s) {
		if r1, n1 := decodeRune(s, i+n0); classOf(r1)&sp.letters != 0 {
			return run(s, i+n0+n1, sp.letters)
		}
	}
	if c0&clsN != 0 {
		end := i + n0
		for k := 1; k < sp.maxDigits && end < len(s); k++ {
			r, n := decodeRune(s, end)
			if classOf(r)&clsN == 0 {
				break
			}
			end += n
		}
		return end
	}
	//  ?[^\s\p{L}\p{N}]+[\r\n]*
	if r0 == ' ' && i+1 < len(s) {
		if r1, n1 := decodeRune(s, i+1); classOf(r1)&sp.punctNot == 0 {
			return runNewlines(s, runNot(s, i+1+n1, sp.punctNot))
		}
	}
	if c0&sp.punctNot == 0 {
		return runNewlines(s, runNot(s, i+n0, sp.punctNot))
	}
	// Only whitespace is left (marks are letters or symbols by now).
	return whitespace(s, i, true)
}

// whitespace handles the whitespace alternatives at s[i] (a rune in \s):
// with newlines, \s*[\r\n]+ (greedy \s* backtracks to the last \r or \n of
// the run); then \s+(?!\S), which backs off one rune unless the run
// reaches the end of s; then \s+.
func whitespace(s string, i int, newlines bool) int {
	end := i
	lastNL := -1
	lastStart := i
	for end < len(s) {
		r, m := decodeRune(s, end)
		if classOf(r)&clsS == 0 {
			break
		}
		if r == '\r' || r == '\n' {
			lastNL = end
		}
		lastStart = end
		end += m
	}
	if newlines && lastNL >= 0 {
		return lastNL + 1
	}
	if end == len(s) || lastStart == i {
		return end
	}
	return lastStart
}

// nextGPT2 implements
//
//	's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
func (sp *splitter) nextGPT2(s string, i int) int {
	r0, n0 := decodeRune(s, i)
	if r0 == '\'' {
		if n := contraction(s, i+1, false); n > 0 {
			return i + 1 + n
		}
	}
	start, c := i, classOf(r0)
	if r0 == ' ' && i+1 < len(s) {
		r1, n1 := decodeRune(s, i+1)
		if c1 := classOf(r1); c1&(clsL|clsN) != 0 || c1&sp.punctNot == 0 {
			start, c, n0 = i+1, c1, n1
		}
	}
	switch {
	case c&clsL != 0:
		return run(s, start+n0, clsL)
	case c&clsN != 0:
		return run(s, start+n0, clsN)
	case c&sp.punctNot == 0:
		return runNot(s, start+n0, sp.punctNot)
	}
	return whitespace(s, i, false)
}
