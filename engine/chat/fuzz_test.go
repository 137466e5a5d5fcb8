package chat

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzRender renders the real Qwen templates over arbitrary request JSON:
// Render must never panic and only return documented error types.
func FuzzRender(f *testing.F) {
	data, err := os.ReadFile(filepath.Join(testdataDir, "chat", "chat_cases.json"))
	if err != nil {
		f.Fatal(err)
	}
	var fix struct {
		Cases []fixtureCase `json:"cases"`
	}
	if err := json.Unmarshal(data, &fix); err != nil {
		f.Fatal(err)
	}
	rels := []string{"qwen3-tokenizer/tokenizer_config.json", "chat-templates/Qwen3-Coder.jinja", "chat-templates/Qwen3.5-4B.jinja"}
	var templates []*Template
	for _, rel := range rels {
		templates = append(templates, loadTemplate(&testing.T{}, rel))
	}
	for i, c := range fix.Cases {
		if i%3 == 0 {
			f.Add(uint8(i), []byte(c.Messages), []byte(c.Tools), c.AddGenerationPrompt)
		}
	}
	f.Fuzz(func(t *testing.T, which uint8, messages, tools []byte, agp bool) {
		tm := templates[int(which)%len(templates)]
		_, err := tm.Render(Request{Messages: messages, Tools: tools, AddGenerationPrompt: agp})
		if err == nil {
			return
		}
		// Bad input JSON gives plain errors, template failures
		// *RuntimeError or *TemplateError; never a syntax error.
		var se *SyntaxError
		if errors.As(err, &se) {
			t.Fatalf("syntax error at render time: %v", err)
		}
	})
}
