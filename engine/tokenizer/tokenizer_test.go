package tokenizer

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

func TestQwen3Basics(t *testing.T) {
	start := time.Now()
	tk, err := Load(qwen3Dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Load took %v", time.Since(start))
	if got := tk.VocabSize(); got != 151669 {
		t.Errorf("VocabSize = %d, want 151669", got)
	}
	for _, tc := range []struct {
		tok     string
		id      int32
		special bool
	}{
		{"<|endoftext|>", 151643, true},
		{"<|im_start|>", 151644, true},
		{"<|im_end|>", 151645, true},
		{"<|video_pad|>", 151656, true},
		{"<tool_call>", 151657, false},
		{"<think>", 151667, false},
		{"</think>", 151668, false},
		{"Hello", 9707, false},
		{"Ġworld", 1879, false},
		{"Ċ", 198, false},
	} {
		id, ok := tk.TokenID(tc.tok)
		if !ok || id != tc.id {
			t.Errorf("TokenID(%q) = %d, %v; want %d", tc.tok, id, ok, tc.id)
		}
		if s, ok := tk.Token(tc.id); !ok || s != tc.tok {
			t.Errorf("Token(%d) = %q, %v; want %q", tc.id, s, ok, tc.tok)
		}
		if got := tk.IsSpecial(tc.id); got != tc.special {
			t.Errorf("IsSpecial(%d) = %v", tc.id, got)
		}
	}
	if got := string(tk.TokenBytes(1879)); got != " world" {
		t.Errorf("TokenBytes(Ġworld) = %q", got)
	}
	if got := string(tk.TokenBytes(151645)); got != "<|im_end|>" {
		t.Errorf("TokenBytes(<|im_end|>) = %q", got)
	}
	for _, id := range []int32{-1, 151669, 1 << 30} {
		if _, ok := tk.Token(id); ok || tk.TokenBytes(id) != nil || tk.IsSpecial(id) {
			t.Errorf("id %d should be unknown", id)
		}
	}
	if _, ok := tk.TokenID("no such token"); ok {
		t.Error("TokenID of a missing token succeeded")
	}
	got := tk.Encode("<|im_start|>user\nhi<|im_end|>")
	want := []int32{151644, 872, 198, 6023, 151645}
	if !slices.Equal(got, want) {
		t.Errorf("Encode = %v, want %v", got, want)
	}
	if got := tk.AppendEncode([]int32{7}, "hi"); !slices.Equal(got, []int32{7, 6023}) {
		t.Errorf("AppendEncode = %v", got)
	}
	if got := tk.Encode(""); len(got) != 0 {
		t.Errorf("Encode(\"\") = %v", got)
	}
}

// naiveBPE merges the lowest-ranked adjacent pair (leftmost on ties) until
// none is left: the textbook algorithm, which the heap-based merge must agree
// with when every token has a single producing merge, as in Qwen's vocab.
func naiveBPE(tk *Tokenizer, word string) []int32 {
	var ids []int32
	for i := 0; i < len(word); i++ {
		ids = append(ids, tk.byteID[word[i]])
	}
	for {
		best, bestRank := -1, int32(1<<31-1)
		var bestID int32
		for i := 0; i+1 < len(ids); i++ {
			if m, ok := tk.merges[pairKey(ids[i], ids[i+1])]; ok && m.rank < bestRank {
				best, bestRank, bestID = i, m.rank, m.id
			}
		}
		if best < 0 {
			return ids
		}
		ids = append(ids[:best], append([]int32{bestID}, ids[best+2:]...)...)
	}
}

func TestMergeWordMatchesNaive(t *testing.T) {
	tk := qwen3(t)
	r := rand.New(rand.NewPCG(5, 6))
	alphabet := []string{"a", "b", "e", "t", "h", "n", "in", "er", " ", "  ", "\n", "0", "中", "é", "😀", "ing", "the", "\xff"}
	sc := new(mergeScratch)
	for iter := 0; iter < 5000; iter++ {
		var b strings.Builder
		for k := r.IntN(30); k >= 0; k-- {
			b.WriteString(alphabet[r.IntN(len(alphabet))])
		}
		w := b.String()
		got := tk.mergeWord(nil, w, sc)
		if want := naiveBPE(tk, w); !slices.Equal(got, want) {
			t.Fatalf("mergeWord(%q) = %v, naive = %v", w, got, want)
		}
	}
}

func TestEncodeLongRuns(t *testing.T) {
	tk := qwen3(t)
	for _, s := range []string{strings.Repeat(" ", 100000), strings.Repeat("ab", 50000), strings.Repeat("=", 100000)} {
		start := time.Now()
		ids := tk.Encode(s)
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("encoding %d bytes of %q took %v", len(s), s[:2], d)
		}
		if got := tk.Decode(ids, false); got != s {
			t.Errorf("round trip of a %d-byte run failed", len(s))
		}
	}
}

func TestEncodeNoAllocs(t *testing.T) {
	tk := qwen3(t)
	text := proseText(4096) + "<|im_start|>user\nÜber 中文 😀<|im_end|>"
	dst := tk.Encode(text) // warms the cache
	allocs := testing.AllocsPerRun(20, func() { dst = tk.AppendEncode(dst[:0], text) })
	if allocs != 0 {
		t.Errorf("AppendEncode of cached words allocates %.1f times", allocs)
	}
}

// Concurrent encoders must agree with sequential results, also while the
// word cache overflows and is replaced.
func TestConcurrentEncode(t *testing.T) {
	tk := qwen3(t)
	var texts []string
	for i := 0; i < 64; i++ {
		var b strings.Builder
		for j := 0; j < 600; j++ {
			fmt.Fprintf(&b, "w%dx%d ", i, j) // many distinct words
		}
		b.WriteString(proseText(256))
		texts = append(texts, b.String())
	}
	want := make([][]int32, len(texts))
	for i, s := range texts {
		want[i] = tk.Encode(s)
	}
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < 2; k++ {
				for i := range texts {
					j := (i + g*7) % len(texts)
					if got := tk.Encode(texts[j]); !slices.Equal(got, want[j]) {
						errs <- fmt.Sprintf("goroutine %d text %d differs", g, j)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

func TestEncodeInvalidUTF8(t *testing.T) {
	tk := qwen3(t)
	for _, s := range []string{"\xff", "a\xe4\xb8b", "\xc0\xaf<|im_end|>\x80"} {
		ids := tk.Encode(s)
		want := string(appendLossyString(s))
		if got := tk.Decode(ids, false); got != want {
			t.Errorf("Decode(Encode(%q)) = %q, want %q", s, got, want)
		}
	}
}

func appendLossyString(s string) []byte {
	out, _ := appendLossy(nil, []byte(s), true)
	return out
}

// FuzzEncodeDecode checks the round trip on NFC text (the only text HF
// returns unchanged) and that nothing panics or yields invalid UTF-8.
func FuzzEncodeDecode(f *testing.F) {
	for _, s := range []string{"Hello, world!", "it's 12345", "<|im_start|>user\n你好<|im_end|>", "e\u0301", " \n\t ", "😀👍🏽", "\xff\xfe"} {
		f.Add(s)
	}
	tk := qwen3(f)
	f.Fuzz(func(t *testing.T, s string) {
		ids := tk.Encode(s)
		got := tk.Decode(ids, false)
		if !utf8.ValidString(got) {
			t.Fatalf("Decode returned invalid UTF-8 for %q", s)
		}
		if utf8.ValidString(s) && norm.NFC.IsNormalString(s) && got != s {
			t.Fatalf("round trip %q -> %v -> %q", s, ids, got)
		}
		if s2 := streamAll(tk, ids, false); s2 != got {
			t.Fatalf("stream decode %q != Decode %q", s2, got)
		}
	})
}

// tinyTokenizer returns a small GPT-2-style tokenizer.json as a generic
// value, for tests to modify: the 256 byte tokens, a few merges in the
// "a b" form and ByteLevel(use_regex=true).
func tinyTokenizer() map[string]any {
	vocab := map[string]any{}
	for b := 0; b < 256; b++ {
		vocab[string(byteToRune[b])] = b
	}
	merges := []any{"Ġ t", "h e", "Ġt he", "l l", "e ll", "ell o"}
	next := 256
	for _, m := range merges {
		vocab[strings.ReplaceAll(m.(string), " ", "")] = next
		next++
	}
	vocab["<unk>"] = next
	return map[string]any{
		"version":       "1.0",
		"added_tokens":  []any{map[string]any{"id": next + 1, "content": "<|end|>", "special": true}},
		"normalizer":    nil,
		"pre_tokenizer": map[string]any{"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},
		"decoder":       map[string]any{"type": "ByteLevel"},
		"model":         map[string]any{"type": "BPE", "vocab": vocab, "merges": merges},
	}
}

func parseTiny(t *testing.T, mod func(m map[string]any)) (*Tokenizer, error) {
	t.Helper()
	m := tinyTokenizer()
	if mod != nil {
		mod(m)
	}
	data, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return Parse(data)
}

func model(m map[string]any) map[string]any { return m["model"].(map[string]any) }

func TestTinyTokenizer(t *testing.T) {
	tk, err := parseTiny(t, nil)
	if err != nil {
		t.Fatal(err)
	}
	ids := tk.Encode("hello the<|end|>")
	// Byte tokens have their byte's value as id: "he" "ll" "o" "Ġthe" "<|end|>".
	want := []int32{257, 259, 'o', 258, 263}
	if !slices.Equal(ids, want) {
		t.Errorf("Encode = %v, want %v", ids, want)
	}
	if got := tk.Decode(ids, true); got != "hello the" {
		t.Errorf("Decode = %q", got)
	}
	if got := tk.VocabSize(); got != 264 {
		t.Errorf("VocabSize = %d", got)
	}
}

// With bytes missing from the vocab, HF substitutes the unknown token (one
// per byte, or one per run with fuse_unk) or, without one, drops them.
func TestUnknownBytes(t *testing.T) {
	dropZ := func(m map[string]any) { delete(model(m)["vocab"].(map[string]any), "z") }
	tests := []struct {
		name string
		mod  func(m map[string]any)
		want []int32
	}{
		{"drop", func(m map[string]any) { dropZ(m) }, []int32{'a', 'a'}},
		{"unk", func(m map[string]any) { dropZ(m); model(m)["unk_token"] = "<unk>" },
			[]int32{'a', 262, 262, 'a'}},
		{"fused", func(m map[string]any) { dropZ(m); model(m)["unk_token"] = "<unk>"; model(m)["fuse_unk"] = true },
			[]int32{'a', 262, 'a'}},
	}
	for _, tc := range tests {
		tk, err := parseTiny(t, tc.mod)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := tk.Encode("azza"); !slices.Equal(got, tc.want) {
			t.Errorf("%s: Encode(azza) = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		mod  func(m map[string]any)
		want string // in the error
	}{
		{"model type", func(m map[string]any) { model(m)["type"] = "WordPiece" }, `"WordPiece"`},
		{"no model", func(m map[string]any) { delete(m, "model") }, "no model"},
		{"pre_tokenizer type", func(m map[string]any) { m["pre_tokenizer"] = map[string]any{"type": "Whitespace"} }, `"Whitespace"`},
		{"no byte level", func(m map[string]any) { m["pre_tokenizer"] = nil }, "ByteLevel"},
		{"split regex", func(m map[string]any) {
			m["pre_tokenizer"] = map[string]any{"type": "Sequence", "pretokenizers": []any{
				map[string]any{"type": "Split", "pattern": map[string]any{"Regex": `\w+`}, "behavior": "Isolated"},
				map[string]any{"type": "ByteLevel", "use_regex": false}}}
		}, `"\\w+"`},
		{"split string", func(m map[string]any) {
			m["pre_tokenizer"] = map[string]any{"type": "Split", "pattern": map[string]any{"String": " "}, "behavior": "Isolated"}
		}, "Split pattern"},
		{"split behavior", func(m map[string]any) {
			m["pre_tokenizer"] = map[string]any{"type": "Split", "pattern": map[string]any{"Regex": patGPT2}, "behavior": "Removed"}
		}, `"Removed"`},
		{"normalizer", func(m map[string]any) { m["normalizer"] = map[string]any{"type": "Lowercase"} }, `"Lowercase"`},
		{"decoder", func(m map[string]any) { m["decoder"] = map[string]any{"type": "WordPiece"} }, `"WordPiece"`},
		{"no decoder", func(m map[string]any) { m["decoder"] = nil }, "decoder"},
		{"merge", func(m map[string]any) { model(m)["merges"] = []any{"q q"} }, `"q" "q"`},
		{"merge form", func(m map[string]any) { model(m)["merges"] = []any{"a b c"} }, "a b c"},
		{"byte fallback", func(m map[string]any) { model(m)["byte_fallback"] = true }, "byte_fallback"},
		{"dropout", func(m map[string]any) { model(m)["dropout"] = 0.1 }, "dropout"},
		{"unk", func(m map[string]any) { model(m)["unk_token"] = "<nope>" }, "<nope>"},
		{"prefix", func(m map[string]any) { model(m)["continuing_subword_prefix"] = "##" }, "##"},
		{"vocab id", func(m map[string]any) { model(m)["vocab"].(map[string]any)["x"] = -4 }, "-4"},
		{"sparse ids", func(m map[string]any) { model(m)["vocab"].(map[string]any)["x"] = 1 << 22 }, "sparse"},
		{"vocab shape", func(m map[string]any) { model(m)["vocab"] = []any{1} }, "vocab"},
	}
	for _, tc := range tests {
		_, err := parseTiny(t, tc.mod)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want it to mention %s", tc.name, err, tc.want)
		}
	}
	for _, bad := range []string{"", "null", "[]", "{", `{"model": 5}`, `{"model": {"vocab": {"a": "x"}}}`} {
		if _, err := Parse([]byte(bad)); err == nil {
			t.Errorf("Parse(%q) succeeded", bad)
		}
	}
}

func TestPairMerges(t *testing.T) {
	tk, err := parseTiny(t, func(m map[string]any) {
		model(m)["merges"] = []any{[]any{"Ġ", "t"}, []any{"h", "e"}, []any{"Ġt", "he"}, []any{"l", "l"}, []any{"e", "ll"}, []any{"ell", "o"}}
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := tk.Encode(" the hello"); !slices.Equal(got, []int32{258, ' ', 257, 259, 'o'}) {
		t.Errorf("Encode = %v", got)
	}
}

// FuzzParse feeds mutated tokenizer.json documents to Parse: it may fail,
// but must not panic, and what it accepts must encode without panicking.
func FuzzParse(f *testing.F) {
	seed, _ := json.Marshal(tinyTokenizer())
	f.Add(seed)
	m := tinyTokenizer()
	model(m)["merges"] = []any{[]any{"Ġ", "t"}}
	m["pre_tokenizer"] = map[string]any{"type": "Sequence", "pretokenizers": []any{
		map[string]any{"type": "Split", "pattern": map[string]any{"Regex": patQwen2}, "behavior": "Isolated"},
		map[string]any{"type": "ByteLevel", "use_regex": false}}}
	m["normalizer"] = map[string]any{"type": "Sequence", "normalizers": []any{map[string]any{"type": "NFC"}}}
	pair, _ := json.Marshal(m)
	f.Add(pair)
	f.Add([]byte(`{"model":{"vocab":{"a":0},"merges":[]},"pre_tokenizer":{"type":"ByteLevel"},"decoder":{"type":"ByteLevel"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		tk, err := Parse(data)
		if err != nil {
			return
		}
		ids := tk.Encode("Hello the world <|end|> 123 \xff")
		_ = tk.Decode(ids, true)
		_ = tk.Decode([]int32{-1, 0, 1, int32(tk.VocabSize())}, false)
	})
}
