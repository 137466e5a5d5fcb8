package chat

import (
	"encoding/json"
	"strings"
	"testing"
)

// benchConversation is a 40-turn chat with tool calls.
func benchConversation() Request {
	var msgs []string
	msgs = append(msgs, `{"role":"system","content":"You are a helpful assistant."}`)
	for i := 0; i < 10; i++ {
		msgs = append(msgs,
			`{"role":"user","content":"What is the weather in Paris and Tokyo today? Please be thorough."}`,
			`{"role":"assistant","content":"<think>\nI should call the tool.\n</think>\n\nChecking.","tool_calls":[{"type":"function","function":{"name":"get_weather","arguments":"{\"location\": \"Paris\", \"days\": 3, \"unit\": \"celsius\"}"}}]}`,
			`{"role":"tool","content":"{\"temp\": 21.5, \"sky\": \"clear\"}"}`,
			`{"role":"assistant","content":"It is 21.5 degrees and clear in Paris."}`)
	}
	return Request{
		Messages:            json.RawMessage("[" + strings.Join(msgs, ",") + "]"),
		Tools:               json.RawMessage(`[{"type":"function","function":{"name":"get_weather","description":"Get weather","parameters":{"type":"object","properties":{"location":{"type":"string"},"days":{"type":"integer"},"unit":{"type":"string","enum":["celsius","fahrenheit"]}},"required":["location"]}}}]`),
		AddGenerationPrompt: true,
	}
}

func BenchmarkRender(b *testing.B) {
	for _, name := range []string{"chat-templates/Qwen-Qwen3-0.6B.jinja", "chat-templates/Qwen3-Coder.jinja", "chat-templates/Qwen3.5-4B.jinja"} {
		b.Run(name[strings.LastIndexByte(name, '/')+1:], func(b *testing.B) {
			t := &testing.T{}
			tm := loadTemplate(t, name)
			req := benchConversation()
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if _, err := tm.Render(req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
