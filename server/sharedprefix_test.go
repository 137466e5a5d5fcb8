package server

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/infernix/infernix/engine"
	"github.com/infernix/infernix/engine/chat"
	"github.com/infernix/infernix/engine/tokenizer"
)

// TestSharedPrefix: the system/tools block's token count, with the real
// Qwen3 tokenizer, is the text before the first user message (the Qwen3.5
// template refuses to render without one); 0 without a system message or
// tools, and 0 when the template renders the system block differently once
// other messages follow. A BPE merge of the block's last token with the
// user's text costs that one token.
func TestSharedPrefix(t *testing.T) {
	root := filepath.Join("..", "tests", "testdata")
	tok, err := tokenizer.Load(filepath.Join(root, "qwen3-tokenizer", "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(filepath.Join(root, "chat-templates", "Qwen3.5-4B.jinja"))
	if err != nil {
		t.Fatal(err)
	}
	qwen35, err := chat.Compile("qwen3.5", string(src))
	if err != nil {
		t.Fatal(err)
	}
	// Qwen3's template does not trim the user's text (Qwen3.5's does).
	if src, err = os.ReadFile(filepath.Join(root, "chat-templates", "Qwen-Qwen3-0.6B.jinja")); err != nil {
		t.Fatal(err)
	}
	qwen3, err := chat.Compile("qwen3", string(src))
	if err != nil {
		t.Fatal(err)
	}
	// Says how many messages follow before the system prompt.
	counting, err := chat.Compile("counting", `{{ messages|length }} messages follow.
{% for m in messages %}<{{ m.role }}>{{ m.content }}</{{ m.role }}>
{% endfor %}`)
	if err != nil {
		t.Fatal(err)
	}
	sys := `{"role":"system","content":"` + strings.Repeat("You are a careful assistant. ", 10) + `"}`
	tools := `,"tools":[{"type":"function","function":{"name":"read_file","parameters":{"type":"object","properties":{"path":{"type":"string"}}}}}]`
	const question = "What does the scheduler do?"
	user := `{"role":"user","content":"` + question + `"}`
	cases := []struct {
		name     string
		tmpl     *chat.Template
		body     string
		question string // the user's text: the block ends where it begins (minus merged tokens)
		merged   int    // tokens of the block merged with the question
	}{
		{"system and tools", qwen35, `{"messages":[` + sys + `,` + user + `]` + tools + `}`, question, 0},
		{"developer", qwen35, `{"messages":[` + strings.Replace(sys, "system", "developer", 1) + `,` + user + `]}`, question, 0},
		{"tools only", qwen35, `{"messages":[` + user + `]` + tools + `}`, question, 0},
		{"later turns", qwen35, `{"messages":[` + sys + `,` + user + `,{"role":"assistant","content":"It runs lanes."},{"role":"user","content":"And?"}]` + tools + `}`, question, 0},
		{"qwen3", qwen3, `{"messages":[` + sys + `,` + user + `]` + tools + `}`, question, 0},
		// "user\n" + "\n\n…": the block's last token, "\n", merges into "\n\n\n".
		{"merged newline", qwen3, `{"messages":[` + sys + `,{"role":"user","content":"\n\n` + question + `"}]}`, "\n\n" + question, 1},
		{"neither", qwen35, `{"messages":[` + user + `]}`, "", 0},
		{"rendered differently", counting, `{"messages":[` + sys + `,` + user + `,{"role":"assistant","content":"It runs lanes."}]}`, "", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := &Server{eng: &engine.Engine{Text: &engine.Text{Tokenizer: tok, Template: c.tmpl}}, thinkOpen: -1, thinkClose: -1}
			req, aerr := decodeChat(c.body, 151669)
			if aerr != nil {
				t.Fatal(aerr)
			}
			p, aerr := s.renderChat(req, -1)
			if aerr != nil {
				t.Fatal(aerr)
			}
			ids := tok.Encode(p.text)
			want := 0
			if c.question != "" {
				i := strings.Index(p.text, c.question)
				want = len(tok.Encode(p.text[:i])) - c.merged
			}
			if got := s.sharedPrefix(req, -1, ids); got != want {
				t.Fatalf("%d shared tokens, want %d", got, want)
			}
		})
	}
}
