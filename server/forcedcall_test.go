package server

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/infernix/infernix/engine"
	"github.com/infernix/infernix/engine/chat"
	"github.com/infernix/infernix/engine/toolcall"
)

// TestForcedCallPrefill: a forced tool call (tool_choice required or a named
// function) opens the call right after a closed think block, whichever the
// template and the thinking switch: Qwen3 with thinking on leaves the opener
// to the model, so the server writes an empty block (as Qwen3's template does
// with thinking off); Qwen3.5 opens the block in the prompt, which the server
// closes; with thinking off both templates close it themselves.
func TestForcedCallPrefill(t *testing.T) {
	root := filepath.Join("..", "tests", "testdata", "chat-templates")
	load := func(name string) *chat.Template {
		src, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			t.Fatal(err)
		}
		tm, err := chat.Compile(name, string(src))
		if err != nil {
			t.Fatal(err)
		}
		return tm
	}
	qwen3, qwen35 := load("Qwen-Qwen3-0.6B.jinja"), load("Qwen3.5-4B.jinja")
	const tools = `,"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}]`
	cases := []struct {
		name   string
		tmpl   *chat.Template
		format toolcall.Format
		choice string
		think  string
		tail   string // what the prompt ends with
	}{
		{"qwen3 required thinking", qwen3, toolcall.FormatJSON, `"required"`, "true", "<|im_start|>assistant\n<think>\n\n</think>\n\n<tool_call>\n"},
		{"qwen3 required no thinking", qwen3, toolcall.FormatJSON, `"required"`, "false", "<|im_start|>assistant\n<think>\n\n</think>\n\n<tool_call>\n"},
		{"qwen3 named thinking", qwen3, toolcall.FormatJSON, `{"type":"function","function":{"name":"get_weather"}}`, "true",
			"<|im_start|>assistant\n<think>\n\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\":"},
		{"qwen3.5 named thinking", qwen35, toolcall.FormatXML, `{"type":"function","function":{"name":"get_weather"}}`, "true",
			"<|im_start|>assistant\n<think>\n\n</think>\n\n<tool_call>\n<function=get_weather>\n"},
		{"qwen3.5 required no thinking", qwen35, toolcall.FormatXML, `"required"`, "false", "<|im_start|>assistant\n<think>\n\n</think>\n\n<tool_call>\n"},
		{"qwen3 auto thinking", qwen3, toolcall.FormatJSON, `"auto"`, "true", "<|im_start|>assistant\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := &Server{eng: &engine.Engine{Text: &engine.Text{Template: c.tmpl}}, thinkOpen: 1, thinkClose: 2,
				thinkOpenText: "<think>", thinkCloseText: "</think>", toolFormat: c.format}
			body := `{"messages":[{"role":"user","content":"Weather in Oslo?"}]` + tools + `,"tool_choice":` + c.choice +
				`,"chat_template_kwargs":{"enable_thinking":` + c.think + `}}`
			req, aerr := decodeChat(body, 151669)
			if aerr != nil {
				t.Fatal(aerr)
			}
			p, aerr := s.renderChat(req, -1)
			if aerr != nil {
				t.Fatal(aerr)
			}
			if !strings.HasSuffix(p.text, c.tail) {
				t.Fatalf("prompt ends %q, want %q", p.text[max(0, len(p.text)-80):], c.tail)
			}
			if p.inThink {
				t.Error("the reply starts inside the think block")
			}
		})
	}
}
