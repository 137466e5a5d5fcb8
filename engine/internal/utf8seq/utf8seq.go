// Package utf8seq describes well-formed UTF-8 by its lead bytes, for
// decoders that take text a byte at a time (the tokenizer's lossy decode,
// constrained decoding's lexers).
package utf8seq

// Lead gives the length of the well-formed sequences that lead byte c
// starts and the range of their second byte (Unicode Table 3-7); n = 0 for
// a byte that starts none (ASCII included).
func Lead(c byte) (n int, lo, hi byte) {
	switch {
	case c >= 0xC2 && c <= 0xDF:
		return 2, 0x80, 0xBF
	case c == 0xE0:
		return 3, 0xA0, 0xBF
	case c == 0xED:
		return 3, 0x80, 0x9F
	case c >= 0xE1 && c <= 0xEF:
		return 3, 0x80, 0xBF
	case c == 0xF0:
		return 4, 0x90, 0xBF
	case c >= 0xF1 && c <= 0xF3:
		return 4, 0x80, 0xBF
	case c == 0xF4:
		return 4, 0x80, 0x8F
	}
	return 0, 0, 0
}
