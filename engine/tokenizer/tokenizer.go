// Package tokenizer is a pure-Go reproduction of Hugging Face `tokenizers`
// for byte-level BPE models such as Qwen's: Encode gives the ids of
// tokenizer.encode(text, add_special_tokens=False) and Decode the string of
// tokenizer.decode(ids, skip_special_tokens=...), exactly.
//
// The pipeline is HF's: added tokens are cut out of the raw text first
// (longest match, honouring lstrip/rstrip/single_word), the pieces between
// them are normalised (NFC for Qwen), split by the pre-tokenizer (hand-written
// scanners equivalent to the regexes tokenizer.json names) and each piece's
// bytes are merged by BPE rank. A Tokenizer is immutable after loading apart
// from an internal, bounded, concurrency-safe cache of word encodings, so it
// may be shared by any number of goroutines.
package tokenizer

import (
	"golang.org/x/text/unicode/norm"
)

// Tokenizer is a loaded byte-level BPE tokenizer. Use Load or Parse.
type Tokenizer struct {
	// Model.
	vocab         map[string]int32 // model vocabulary, byte-level strings
	modelVocabLen int              // number of vocab entries (HF's vocab size)
	merges        map[uint64]merge // (left id, right id) -> merge
	byteID        [256]int32       // id of each single byte, -1 if absent
	unkID         int32            // -1 without an unknown token
	fuseUnk       bool
	ignoreMerges  bool
	bytesToID     map[string]int32 // raw bytes -> id, only with ignoreMerges

	// Pipeline.
	normForms   []norm.Form
	steps       []preStep
	byteLevel   bool
	added       []*addedToken
	addedIDs    map[string]int32
	specialSet  map[string]bool // contents of special added tokens
	rawMatcher  *addedMatcher   // added tokens with normalized=false
	normMatcher *addedMatcher   // added tokens with normalized=true

	// Id tables, indexed by id; ids in holes of the id space have present=false.
	vocabSize int
	tokens    []string // token strings (added tokens' content)
	present   []bool
	special   []bool
	byteOff   []int32 // TokenBytes(id) is tokBytes[byteOff[id]:byteOff[id+1]]
	tokBytes  []byte
	tokText   string // tokBytes as a string, for allocation-free decoding

	cache *wordCache
}

// preStep is one pre-tokenizer stage: optionally prefix each piece with a
// space (ByteLevel add_prefix_space), then optionally split it.
type preStep struct {
	prefixSpace bool
	split       *splitter
}

// buildTables fills the per-id tables once the vocabulary and added tokens
// are known.
func (t *Tokenizer) buildTables() {
	for _, a := range t.added {
		t.vocabSize = max(t.vocabSize, int(a.id)+1)
	}
	n := t.vocabSize
	t.tokens = make([]string, n)
	t.present = make([]bool, n)
	t.special = make([]bool, n)
	for s, id := range t.vocab {
		t.tokens[id], t.present[id] = s, true
	}
	for _, a := range t.added {
		t.tokens[a.id], t.present[a.id] = a.content, true
	}
	// HF skips a token in decode when its string is a special token's.
	for id, s := range t.tokens {
		t.special[id] = t.present[id] && t.specialSet[s]
	}
	t.byteOff = make([]int32, n+1)
	var buf []byte
	for id, s := range t.tokens {
		buf = byteLevelDecode(buf, s)
		t.byteOff[id+1] = int32(len(buf))
	}
	t.tokBytes = buf
	t.tokText = string(buf)

	var b [1]byte
	for i := range t.byteID {
		b[0] = byte(i)
		id, ok := t.vocab[string(byteLevelEncode(nil, string(b[:])))]
		if !ok {
			id = -1
		}
		t.byteID[i] = id
	}
	if t.ignoreMerges {
		t.bytesToID = make(map[string]int32, len(t.vocab))
		for s, id := range t.vocab {
			if bs := byteLevelDecode(nil, s); string(byteLevelEncode(nil, string(bs))) == s {
				t.bytesToID[string(bs)] = id
			}
		}
	}
}

// Encode returns the token ids of text, like HF's
// encode(text, add_special_tokens=False): added tokens (special or not) that
// occur in text are recognised, and no BOS/EOS is added. Invalid UTF-8 bytes
// are encoded as their own bytes (they decode back as U+FFFD).
func (t *Tokenizer) Encode(text string) []int32 {
	return t.AppendEncode(make([]int32, 0, len(text)/3+1), text)
}

// AppendEncode appends the ids of text to dst and returns it; see Encode.
func (t *Tokenizer) AppendEncode(dst []int32, text string) []int32 {
	if t.rawMatcher.empty() {
		return t.encodeNormalizing(dst, text)
	}
	it := addedIter{m: t.rawMatcher, s: text}
	for {
		gap, tok := it.next()
		if gap != "" {
			dst = t.encodeNormalizing(dst, gap)
		}
		if tok == nil {
			return dst
		}
		dst = append(dst, tok.id)
	}
}

// encodeNormalizing encodes text that holds no raw-matched added token:
// normalise it, cut out normalized added tokens, pre-tokenize and merge.
func (t *Tokenizer) encodeNormalizing(dst []int32, s string) []int32 {
	s = t.normalize(s)
	if t.normMatcher.empty() {
		return t.encodePiece(dst, s, 0)
	}
	it := addedIter{m: t.normMatcher, s: s}
	for {
		gap, tok := it.next()
		if gap != "" {
			dst = t.encodePiece(dst, gap, 0)
		}
		if tok == nil {
			return dst
		}
		dst = append(dst, tok.id)
	}
}

// encodePiece runs pre-tokenizer steps from step on, then BPE.
func (t *Tokenizer) encodePiece(dst []int32, s string, step int) []int32 {
	if s == "" {
		return dst
	}
	for ; step < len(t.steps); step++ {
		st := &t.steps[step]
		if st.prefixSpace && s[0] != ' ' {
			s = " " + s
		}
		if st.split != nil {
			for i := 0; i < len(s); {
				j := st.split.next(s, i)
				dst = t.encodePiece(dst, s[i:j], step+1)
				i = j
			}
			return dst
		}
	}
	return t.bpeWord(dst, s)
}

// TokenID returns the id of the exact token string s (byte-level form for
// vocabulary entries, content for added tokens).
func (t *Tokenizer) TokenID(s string) (int32, bool) {
	if id, ok := t.addedIDs[s]; ok {
		return id, true
	}
	id, ok := t.vocab[s]
	return id, ok
}

// Token returns the string of token id in its raw form: byte-level
// characters for vocabulary entries (e.g. "Ġthe"), the content for added
// tokens.
func (t *Tokenizer) Token(id int32) (string, bool) {
	if !t.valid(id) {
		return "", false
	}
	return t.tokens[id], true
}

// VocabSize returns the largest id in the vocabulary or added tokens plus one.
func (t *Tokenizer) VocabSize() int { return t.vocabSize }

// IsSpecial reports whether id is a special token, i.e. one that
// Decode(..., skipSpecial=true) drops.
func (t *Tokenizer) IsSpecial(id int32) bool { return t.valid(id) && t.special[id] }

// IsAdded reports whether id is an added token (special or not: Qwen's
// <think> and <tool_call> are added tokens that are not special), text
// that the tokenizer matches whole before BPE.
func (t *Tokenizer) IsAdded(id int32) bool {
	if !t.valid(id) {
		return false
	}
	a, ok := t.addedIDs[t.tokens[id]]
	return ok && a == id
}

// TokenBytes returns the bytes that token id decodes to (a special token's
// bytes are its content). It returns nil for an unknown id. The slice is
// shared: callers must not modify it.
func (t *Tokenizer) TokenBytes(id int32) []byte {
	if !t.valid(id) {
		return nil
	}
	return t.tokBytes[t.byteOff[id]:t.byteOff[id+1]:t.byteOff[id+1]]
}

func (t *Tokenizer) tokenText(id int32) string {
	return t.tokText[t.byteOff[id]:t.byteOff[id+1]]
}

func (t *Tokenizer) valid(id int32) bool {
	return id >= 0 && int(id) < len(t.present) && t.present[id]
}
