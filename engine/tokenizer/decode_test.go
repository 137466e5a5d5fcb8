package tokenizer

import (
	"math/rand/v2"
	"testing"
	"unicode/utf8"
)

// Expected values follow Rust's String::from_utf8_lossy: one U+FFFD per
// maximal prefix of a well-formed sequence, or per lone bad byte.
func TestAppendLossy(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"", ""},
		{"abc", "abc"},
		{"é中😀", "é中😀"},
		{"\xe2\x82", "\uFFFD"},     // truncated 3-byte sequence: one
		{"\xe2\x82A", "\uFFFDA"},   // broken by ASCII
		{"\xf0\x9f\x98", "\uFFFD"}, // truncated 4-byte
		{"\xf0\x9f\x98\xf0\x9f\x98\x80", "\uFFFD😀"},
		{"\x80\x80\xbf", "\uFFFD\uFFFD\uFFFD"}, // lone continuations: one each
		{"\xc0\xaf", "\uFFFD\uFFFD"},           // C0 is never a lead byte
		{"\xed\xa0\x80", "\uFFFD\uFFFD\uFFFD"}, // surrogate: ED A0 is not a prefix
		{"\xe0\x80\x80", "\uFFFD\uFFFD\uFFFD"}, // overlong: E0 80 is not a prefix
		{"\xf4\x90\x80\x80", "\uFFFD\uFFFD\uFFFD\uFFFD"},
		{"\xf0\x80", "\uFFFD\uFFFD"},
		{"\xff\xfeA", "\uFFFD\uFFFDA"},
		{"a\xe4\xb8", "a\uFFFD"},
	}
	for _, tc := range tests {
		got, n := appendLossy(nil, []byte(tc.in), true)
		if string(got) != tc.want || n != len(tc.in) {
			t.Errorf("appendLossy(%q) = %q (%d consumed), want %q", tc.in, got, n, tc.want)
		}
	}
	// Not final: a trailing incomplete sequence is held back.
	got, n := appendLossy(nil, []byte("ab\xe4\xb8"), false)
	if string(got) != "ab" || n != 2 {
		t.Errorf("non-final appendLossy = %q, %d; want \"ab\", 2", got, n)
	}
}

func TestDecodeBasics(t *testing.T) {
	tk := qwen3(t)
	hello := tk.Encode("Hello, 世界!")
	if got := tk.Decode(hello, false); got != "Hello, 世界!" {
		t.Errorf("Decode = %q", got)
	}
	imStart, _ := tk.TokenID("<|im_start|>")
	think, _ := tk.TokenID("<think>")
	ids := append([]int32{imStart, think}, hello...)
	ids = append(ids, -1, 1<<30) // unknown ids are skipped
	if got := tk.Decode(ids, false); got != "<|im_start|><think>Hello, 世界!" {
		t.Errorf("Decode = %q", got)
	}
	if got := tk.Decode(ids, true); got != "<think>Hello, 世界!" { // <think> is not special
		t.Errorf("Decode(skip) = %q", got)
	}
}

// byteTokens returns the id of each single-byte token.
func byteTokens(t testing.TB, tk *Tokenizer) [256]int32 {
	var ids [256]int32
	for b := 0; b < 256; b++ {
		id, ok := tk.TokenID(string(byteToRune[b]))
		if !ok {
			t.Fatalf("no token for byte %#x", b)
		}
		ids[b] = id
	}
	return ids
}

// A stream decoder fed one id at a time must produce Decode's text, never
// emitting a partial character, whatever mix of byte tokens, whole tokens
// and special tokens arrives.
func TestStreamDecoderMatchesDecode(t *testing.T) {
	tk := qwen3(t)
	bt := byteTokens(t, tk)
	r := rand.New(rand.NewPCG(3, 4))
	words := tk.Encode("Hello 世界 😀👍🏽 <|im_end|><think>")
	for iter := 0; iter < 3000; iter++ {
		var ids []int32
		for k := r.IntN(16); k >= 0; k-- {
			switch x := r.IntN(10); {
			case x < 5:
				ids = append(ids, bt[0x80+r.IntN(0x80)])
			case x < 7:
				ids = append(ids, bt[r.IntN(0x80)])
			case x < 9:
				ids = append(ids, words[r.IntN(len(words))])
			default:
				ids = append(ids, 151643+int32(r.IntN(26)))
			}
		}
		for _, skip := range []bool{false, true} {
			d := tk.NewStreamDecoder(skip)
			var out string
			for _, id := range ids {
				piece := d.Add(id)
				if !utf8.ValidString(piece) {
					t.Fatalf("Add returned invalid UTF-8 %q", piece)
				}
				out += piece
			}
			out += d.Flush()
			if want := tk.Decode(ids, skip); out != want {
				t.Fatalf("stream(%v, %v) = %q, Decode = %q", ids, skip, out, want)
			}
		}
	}
}

func TestStreamDecoderHoldsPartialCharacters(t *testing.T) {
	tk := qwen3(t)
	bt := byteTokens(t, tk)
	d := tk.NewStreamDecoder(false)
	emoji := "😀"
	for i := 0; i < len(emoji)-1; i++ {
		if got := d.Add(bt[emoji[i]]); got != "" {
			t.Fatalf("byte %d: got %q before the character was complete", i, got)
		}
	}
	if got := d.Add(bt[emoji[len(emoji)-1]]); got != emoji {
		t.Fatalf("last byte: got %q, want %q", got, emoji)
	}
	d.Add(bt[0xE4])
	if got := d.Flush(); got != "\uFFFD" {
		t.Fatalf("Flush of an incomplete sequence = %q", got)
	}
	if got := d.Add(bt['x']); got != "x" {
		t.Fatalf("after Flush: %q", got)
	}
}

func TestStreamDecoderNoAllocs(t *testing.T) {
	tk := qwen3(t)
	ids := tk.Encode("The quick brown fox jumps over the lazy dog, 中文.")
	d := tk.NewStreamDecoder(false)
	allocs := testing.AllocsPerRun(100, func() {
		for _, id := range ids {
			d.Add(id)
		}
	})
	if allocs != 0 {
		t.Errorf("Add allocates %.1f times per sentence of whole-character tokens", allocs)
	}
}
