package gguf

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Token types (llama_token_type) in tokenizer.ggml.token_type.
const (
	TokenNormal      = 1
	TokenUnknown     = 2
	TokenControl     = 3
	TokenUserDefined = 4
	TokenUnused      = 5
	TokenByte        = 6
)

// preTokenizers are the tokenizer.json pre-tokenizers of the
// tokenizer.ggml.pre names this package rebuilds: the split regex the
// original tokenizer.json had, then byte-level mapping.
var preTokenizers = map[string]string{
	"qwen2": `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`,
}

// QwenPreTokenizer is the tokenizer.ggml.pre name of the Qwen2/Qwen3 split.
const QwenPreTokenizer = "qwen2"

// TokenizerJSON rebuilds the Hugging Face tokenizer.json that a GGUF
// file's byte-level BPE vocabulary (tokenizer.ggml.model "gpt2") came
// from: every token in the BPE vocab at its id, control and user-defined
// tokens also as added tokens (special for control ones), the merges in
// rank order, and the pre-tokenizer that tokenizer.ggml.pre names.
func (f *File) TokenizerJSON() ([]byte, error) {
	model, _ := f.Meta["tokenizer.ggml.model"].Str()
	if model != "gpt2" {
		return nil, fmt.Errorf("GGUF tokenizer.ggml.model %q is not supported (only byte-level BPE, \"gpt2\")", model)
	}
	pre, _ := f.Meta["tokenizer.ggml.pre"].Str()
	split, ok := preTokenizers[pre]
	if !ok {
		return nil, fmt.Errorf("GGUF tokenizer.ggml.pre %q is not supported (supported: %s)", pre, QwenPreTokenizer)
	}
	tokens, ok := f.Meta["tokenizer.ggml.tokens"].Strings()
	if !ok || len(tokens) == 0 {
		return nil, fmt.Errorf("GGUF tokenizer.ggml.tokens is missing")
	}
	kinds, _ := f.Meta["tokenizer.ggml.token_type"].Ints()
	if kinds != nil && len(kinds) != len(tokens) {
		return nil, fmt.Errorf("GGUF tokenizer.ggml.token_type has %d entries for %d tokens", len(kinds), len(tokens))
	}
	merges, _ := f.Meta["tokenizer.ggml.merges"].Strings()
	type added struct {
		ID         int    `json:"id"`
		Content    string `json:"content"`
		SingleWord bool   `json:"single_word"`
		LStrip     bool   `json:"lstrip"`
		RStrip     bool   `json:"rstrip"`
		Normalized bool   `json:"normalized"`
		Special    bool   `json:"special"`
	}
	vocab := make(map[string]int, len(tokens))
	var addedTokens []added
	for id, s := range tokens {
		if _, dup := vocab[s]; dup {
			return nil, fmt.Errorf("GGUF tokenizer.ggml.tokens: token %q appears twice (ids %d and %d)", s, vocab[s], id)
		}
		vocab[s] = id
		if kinds != nil && (kinds[id] == TokenControl || kinds[id] == TokenUserDefined) {
			addedTokens = append(addedTokens, added{ID: id, Content: s, Special: kinds[id] == TokenControl})
		}
	}
	pairs := make([][2]string, len(merges))
	for i, m := range merges {
		a, b, ok := strings.Cut(m, " ")
		if !ok {
			return nil, fmt.Errorf("GGUF tokenizer.ggml.merges[%d] %q is not two tokens", i, m)
		}
		pairs[i] = [2]string{a, b}
	}
	byteLevel := map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}
	doc := map[string]any{
		"version":      "1.0",
		"added_tokens": addedTokens,
		"normalizer":   map[string]any{"type": "NFC"},
		"pre_tokenizer": map[string]any{"type": "Sequence", "pretokenizers": []any{
			map[string]any{"type": "Split", "pattern": map[string]string{"Regex": split}, "behavior": "Isolated", "invert": false},
			byteLevel,
		}},
		"post_processor": byteLevel,
		"decoder":        byteLevel,
		"model": map[string]any{
			"type": "BPE", "dropout": nil, "unk_token": nil, "continuing_subword_prefix": "", "end_of_word_suffix": "",
			"fuse_unk": false, "byte_fallback": false, "ignore_merges": false, "vocab": vocab, "merges": pairs,
		},
	}
	return json.Marshal(doc)
}

// TokenString is the text of token id, for the bos/eos ids in metadata.
func (f *File) TokenString(key string) string {
	id, ok := f.Meta[key].Int()
	tokens, _ := f.Meta["tokenizer.ggml.tokens"].Strings()
	if !ok || id < 0 || id >= int64(len(tokens)) {
		return ""
	}
	return tokens[id]
}
