package tokenizer

// The GPT-2 byte-level alphabet: every byte value is written as one printable
// rune so that a byte string becomes a string of visible characters. Bytes that
// are already printable (and not a space) stand for themselves; the other 68
// bytes are assigned U+0100, U+0101, ... in increasing byte order. Vocabulary
// entries of byte-level BPE tokenizers are strings over this alphabet.

// byteToRune maps a byte to its byte-level rune.
var byteToRune [256]rune

// runeToByte maps a byte-level rune back to its byte; the second table says
// which runes belong to the alphabet (all of them are below 0x144).
var (
	runeToByte   [0x144]byte
	runeIsByteLv [0x144]bool
)

func init() {
	next := rune(256)
	for b := 0; b < 256; b++ {
		if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			byteToRune[b] = rune(b)
		} else {
			byteToRune[b] = next
			next++
		}
		r := byteToRune[b]
		runeToByte[r] = byte(b)
		runeIsByteLv[r] = true
	}
}

// byteLevelDecode returns the bytes a token string stands for under the
// ByteLevel decoder: when every rune of s is in the byte-level alphabet the
// bytes they encode, otherwise s's own UTF-8 bytes (HF does the same per token,
// which is how added tokens such as "<|im_end|>" decode to themselves).
func byteLevelDecode(dst []byte, s string) []byte {
	start := len(dst)
	for _, r := range s {
		if r < 0 || int(r) >= len(runeIsByteLv) || !runeIsByteLv[r] {
			return append(dst[:start], s...)
		}
		dst = append(dst, runeToByte[r])
	}
	return dst
}

// byteLevelEncode appends the byte-level form of the bytes of s.
func byteLevelEncode(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		r := byteToRune[s[i]]
		if r < 0x80 {
			dst = append(dst, byte(r))
		} else {
			dst = append(dst, byte(0xC0|r>>6), byte(0x80|r&0x3F))
		}
	}
	return dst
}
