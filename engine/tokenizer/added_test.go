package tokenizer

import "testing"

// TestIsAdded: Qwen3's <think> and <tool_call> are added tokens that are
// not special; <|im_end|> is both; ordinary vocabulary entries are neither.
func TestIsAdded(t *testing.T) {
	tk := qwen3(t)
	cases := []struct {
		text           string
		added, special bool
	}{{"<think>", true, false}, {"<tool_call>", true, false}, {"<|im_end|>", true, true}, {"hello", false, false}, {"{\"", false, false}}
	for _, c := range cases {
		id, ok := tk.TokenID(c.text)
		if !ok {
			t.Fatalf("no token %q", c.text)
		}
		if tk.IsAdded(id) != c.added || tk.IsSpecial(id) != c.special {
			t.Errorf("%q (%d): added %v special %v, want %v %v", c.text, id, tk.IsAdded(id), tk.IsSpecial(id), c.added, c.special)
		}
	}
	if tk.IsAdded(-1) || tk.IsAdded(int32(tk.VocabSize())) {
		t.Error("ids outside the vocabulary are not added tokens")
	}
}
