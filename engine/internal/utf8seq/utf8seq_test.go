package utf8seq

import (
	"testing"
	"unicode/utf8"
)

// TestLeadMatchesUTF8 checks every lead and second byte against the
// standard library's validation of two-byte prefixes completed with
// continuation bytes.
func TestLeadMatchesUTF8(t *testing.T) {
	for c := 0; c < 256; c++ {
		n, lo, hi := Lead(byte(c))
		for s := 0x80; s <= 0xBF; s++ {
			seq := []byte{byte(c), byte(s), 0x80, 0x80}
			valid := c >= 0xC0 && utf8.FullRune(seq) && func() bool {
				r, size := utf8.DecodeRune(seq)
				return r != utf8.RuneError && size >= 2
			}()
			if got := n > 0 && byte(s) >= lo && byte(s) <= hi; got != valid {
				t.Fatalf("lead %#x, second %#x: Lead says %v (n %d, %#x…%#x), utf8 %v", c, s, got, n, lo, hi, valid)
			}
			if valid {
				if _, size := utf8.DecodeRune(seq); size != n {
					t.Fatalf("lead %#x: length %d, utf8 %d", c, n, size)
				}
			}
		}
	}
}
