package tokenizer

import (
	"unicode/utf8"

	"github.com/infernix/infernix/engine/internal/utf8seq"
)

// Decode returns the text of ids like HF's decode(ids, skip_special_tokens):
// the bytes of the tokens concatenated, with invalid UTF-8 replaced by U+FFFD
// as Rust's String::from_utf8_lossy does (one U+FFFD per maximal invalid
// subsequence). Unknown ids are skipped, as HF skips them; with skipSpecial
// set, special tokens are too.
func (t *Tokenizer) Decode(ids []int32, skipSpecial bool) string {
	n := 0
	for _, id := range ids {
		if t.keep(id, skipSpecial) {
			n += int(t.byteOff[id+1] - t.byteOff[id])
		}
	}
	buf := make([]byte, 0, n)
	for _, id := range ids {
		if t.keep(id, skipSpecial) {
			buf = append(buf, t.tokBytes[t.byteOff[id]:t.byteOff[id+1]]...)
		}
	}
	if utf8.Valid(buf) {
		return string(buf)
	}
	out, _ := appendLossy(make([]byte, 0, len(buf)+8), buf, true)
	return string(out)
}

func (t *Tokenizer) keep(id int32, skipSpecial bool) bool {
	return t.valid(id) && !(skipSpecial && t.special[id])
}

// appendLossy appends src to dst with each maximal invalid subsequence
// replaced by U+FFFD (from_utf8_lossy semantics). Unless final, it stops
// before a trailing sequence that is incomplete but could still become valid
// and returns how many bytes of src it consumed.
func appendLossy(dst, src []byte, final bool) ([]byte, int) {
	i := 0
	for i < len(src) {
		c := src[i]
		if c < utf8.RuneSelf {
			dst = append(dst, c)
			i++
			continue
		}
		n, lo, hi := utf8seq.Lead(c)
		if n == 0 {
			dst = append(dst, "\uFFFD"...)
			i++
			continue
		}
		j := i + 1
		for j < i+n && j < len(src) {
			l, h := byte(0x80), byte(0xBF)
			if j == i+1 {
				l, h = lo, hi
			}
			if src[j] < l || src[j] > h {
				break
			}
			j++
		}
		switch {
		case j == i+n:
			dst = append(dst, src[i:j]...)
		case j == len(src) && !final:
			return dst, i
		default:
			dst = append(dst, "\uFFFD"...)
		}
		i = j
	}
	return dst, i
}

// StreamDecoder turns ids into text incrementally, for streaming output.
// The concatenation of everything Add and Flush return equals Decode of all
// the ids added. It is not safe for concurrent use.
type StreamDecoder struct {
	t           *Tokenizer
	skipSpecial bool
	pending     []byte // bytes of an incomplete UTF-8 sequence
	out         []byte
}

// NewStreamDecoder returns a decoder that drops special tokens when
// skipSpecial is set.
func (t *Tokenizer) NewStreamDecoder(skipSpecial bool) *StreamDecoder {
	return &StreamDecoder{t: t, skipSpecial: skipSpecial}
}

// Add appends one id and returns the text it completes. The result never
// ends inside a UTF-8 sequence: bytes of a character split across tokens are
// held back until the character is complete, and bytes that can no longer
// form one are returned as U+FFFD. Unknown ids (and special ones when
// skipping) return "".
func (d *StreamDecoder) Add(id int32) string {
	t := d.t
	if !t.keep(id, d.skipSpecial) {
		return ""
	}
	if len(d.pending) == 0 {
		// The common case: a token of whole characters, returned without
		// copying.
		if s := t.tokenText(id); utf8.ValidString(s) {
			return s
		}
	}
	d.pending = append(d.pending, t.tokBytes[t.byteOff[id]:t.byteOff[id+1]]...)
	out, used := appendLossy(d.out[:0], d.pending, false)
	d.out = out
	d.pending = d.pending[:copy(d.pending, d.pending[used:])]
	return string(out)
}

// Flush returns the held-back bytes, an incomplete sequence becoming U+FFFD
// as in Decode, and resets the decoder for reuse.
func (d *StreamDecoder) Flush() string {
	if len(d.pending) == 0 {
		return ""
	}
	out, _ := appendLossy(d.out[:0], d.pending, true)
	d.out = out
	d.pending = d.pending[:0]
	return string(out)
}
