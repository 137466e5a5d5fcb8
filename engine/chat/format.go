package chat

import (
	"encoding/json"
	"fmt"
	"strings"
)

// ToolCallStyle is how a template asks the model to write tool calls.
type ToolCallStyle uint8

const (
	// ToolCallsNone: the template has no tool-call convention.
	ToolCallsNone ToolCallStyle = iota
	// ToolCallsJSON: Hermes/Qwen3 style, a JSON object
	// {"name": ..., "arguments": {...}} inside <tool_call></tool_call>.
	ToolCallsJSON
	// ToolCallsXML: Qwen3-Coder/Qwen3.5 style,
	// <tool_call><function=NAME><parameter=P>value</parameter></function></tool_call>.
	ToolCallsXML
)

func (s ToolCallStyle) String() string {
	switch s {
	case ToolCallsJSON:
		return "json"
	case ToolCallsXML:
		return "xml"
	}
	return "none"
}

// Format is what the server needs to know about a template's conventions
// to parse model output.
type Format struct {
	ToolCalls ToolCallStyle
	// ToolCallOpen/ToolCallClose delimit one call ("<tool_call>",
	// "</tool_call>"); empty when ToolCalls is ToolCallsNone.
	ToolCallOpen, ToolCallClose string
	// ThinkOpen/ThinkClose delimit reasoning ("<think>", "</think>");
	// empty when the template has no reasoning markers.
	ThinkOpen, ThinkClose string
}

// Detect inspects a template's source for its tool-call and reasoning
// markers.
func Detect(source string) Format {
	var f Format
	switch {
	case strings.Contains(source, "<function="):
		f.ToolCalls = ToolCallsXML
	case strings.Contains(source, "<tool_call>"):
		f.ToolCalls = ToolCallsJSON
	}
	if f.ToolCalls != ToolCallsNone {
		f.ToolCallOpen, f.ToolCallClose = "<tool_call>", "</tool_call>"
	}
	if strings.Contains(source, "<think>") && strings.Contains(source, "</think>") {
		f.ThinkOpen, f.ThinkClose = "<think>", "</think>"
	}
	return f
}

// probeMessages is a minimal conversation every chat template accepts.
var probeMessages = json.RawMessage(`[{"role":"user","content":"x"}]`)

// GenerationPrompt returns the text add_generation_prompt=True appends for
// these chat_template_kwargs (for Qwen3.5 with thinking on:
// "<|im_start|>assistant\n<think>\n"), found by rendering a one-message
// conversation with and without it.
func (t *Template) GenerationPrompt(kwargs map[string]json.RawMessage) (string, error) {
	without, err := t.Render(Request{Messages: probeMessages, Kwargs: kwargs})
	if err != nil {
		return "", err
	}
	with, err := t.Render(Request{Messages: probeMessages, Kwargs: kwargs, AddGenerationPrompt: true})
	if err != nil {
		return "", err
	}
	if !strings.HasPrefix(with, without) {
		return "", fmt.Errorf("chat: generation prompt is not a suffix of the rendered conversation")
	}
	return with[len(without):], nil
}

// OpensThink reports whether the generation prompt for these kwargs leaves
// a reasoning block open, so the model's output starts inside <think>
// (Qwen3.5 unless enable_thinking is false).
func (t *Template) OpensThink(kwargs map[string]json.RawMessage) (bool, error) {
	if t.format.ThinkOpen == "" {
		return false, nil
	}
	p, err := t.GenerationPrompt(kwargs)
	if err != nil {
		return false, err
	}
	return strings.LastIndex(p, t.format.ThinkOpen) > strings.LastIndex(p, t.format.ThinkClose), nil
}

// SourceFromTokenizerConfig extracts the chat template from a
// tokenizer_config.json: chat_template is either a string or a list of
// {"name", "template"} entries, of which name (or "default" when name is
// empty) is chosen.
func SourceFromTokenizerConfig(data []byte, name string) (string, error) {
	var cfg struct {
		ChatTemplate json.RawMessage `json:"chat_template"`
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		return "", fmt.Errorf("chat: tokenizer_config.json: %w", err)
	}
	if len(cfg.ChatTemplate) == 0 || string(cfg.ChatTemplate) == "null" {
		return "", fmt.Errorf("chat: tokenizer_config.json has no chat_template")
	}
	var s string
	if err := json.Unmarshal(cfg.ChatTemplate, &s); err == nil {
		return s, nil
	}
	var named []struct {
		Name     string `json:"name"`
		Template string `json:"template"`
	}
	if err := json.Unmarshal(cfg.ChatTemplate, &named); err != nil {
		return "", fmt.Errorf("chat: chat_template: %w", err)
	}
	if name == "" {
		name = "default"
	}
	for _, n := range named {
		if n.Name == name {
			return n.Template, nil
		}
	}
	return "", fmt.Errorf("chat: no chat template named %q", name)
}
