// Package chat renders Hugging Face chat templates (Jinja) exactly like
// transformers' tokenizer.apply_chat_template(..., tokenize=False).
//
// Contract:
//
//   - Compile parses a template once; the *Template is immutable and safe
//     for concurrent use. Syntax errors are *SyntaxError naming the
//     template and line.
//   - Render builds the variables transformers passes (messages, tools,
//     documents=None, add_generation_prompt, the special tokens, then the
//     chat_template_kwargs) and renders. Output is byte-identical to
//     transformers 5.x for the same inputs.
//   - A template calling raise_exception(msg) yields a *TemplateError whose
//     Message is msg; other render failures are *RuntimeError carrying the
//     Python exception class jinja2 would raise and its message.
//   - JSON inputs keep object key order and the int/float distinction
//     (2 stays 2, 2.0 stays 2.0), as Python's json module does.
//   - Rendering is bounded: a step budget, recursion depth and string size
//     limits turn runaway templates into *RuntimeError (Type "LimitError"
//     or "RecursionError") instead of hangs or crashes.
//
// The interpreter itself lives in package jinja; this package adds the
// chat-specific inputs and helpers.
package chat

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/infernix/infernix/engine/chat/jinja"
)

// Value is a template value with Python semantics.
type Value = jinja.Value

// TemplateError is what raise_exception(message) produces.
type TemplateError = jinja.TemplateError

// SyntaxError reports a template that does not compile.
type SyntaxError = jinja.SyntaxError

// RuntimeError reports any other rendering failure.
type RuntimeError = jinja.RuntimeError

// Template is a compiled chat template.
type Template struct {
	tmpl   *jinja.Template
	format Format
}

// Compile parses a chat template.
func Compile(name, source string) (*Template, error) {
	t, err := jinja.Compile(name, source)
	if err != nil {
		return nil, err
	}
	return &Template{tmpl: t, format: Detect(source)}, nil
}

// Format returns what Detect found in the template source.
func (t *Template) Format() Format { return t.format }

// Execute renders with explicit variables (jinja2's Template.render(**vars)).
// Build values with JSONValue or the constructors of package jinja.
func (t *Template) Execute(vars map[string]Value) (string, error) {
	return t.tmpl.Execute(vars)
}

// JSONValue decodes JSON into a template value the way Python's json.loads
// does (key order kept, ints and floats distinct).
func JSONValue(raw []byte) (Value, error) { return jinja.DecodeJSON(raw) }

// Request is one apply_chat_template call.
type Request struct {
	// Messages is the OpenAI-style messages array as raw JSON.
	Messages json.RawMessage
	// Tools is the optional tools array as raw JSON; absent or null renders
	// as tools=None, like transformers.
	Tools json.RawMessage
	// AddGenerationPrompt appends the assistant turn header.
	AddGenerationPrompt bool
	// Kwargs are chat_template_kwargs (e.g. enable_thinking), passed as
	// template variables; they override BOSToken/EOSToken.
	Kwargs map[string]json.RawMessage
	// BOSToken and EOSToken become bos_token/eos_token when non-empty (a
	// tokenizer without such a token does not define the variable).
	BOSToken, EOSToken string
	// Now is the clock behind strftime_now; time.Now when nil.
	Now func() time.Time
}

// reservedVars cannot be passed as kwargs: transformers would fail with a
// duplicate keyword argument.
var reservedVars = map[string]bool{"messages": true, "tools": true, "documents": true, "add_generation_prompt": true}

// Render renders a conversation. Assistant tool_calls whose
// function.arguments is a JSON string holding an object (the OpenAI wire
// form) are decoded to that object first, keeping key order, because
// templates expect objects; any other string is left as it is.
func (t *Template) Render(r Request) (string, error) {
	vars, err := buildVars(r)
	if err != nil {
		return "", err
	}
	return t.tmpl.ExecuteOptions(vars, jinja.Options{Now: r.Now})
}

func buildVars(r Request) (map[string]Value, error) {
	msgs, err := jinja.DecodeJSON(r.Messages)
	if err != nil {
		return nil, fmt.Errorf("chat: messages: %w", err)
	}
	if msgs.Kind() != jinja.KindList {
		return nil, fmt.Errorf("chat: messages must be a JSON array")
	}
	if len(msgs.Items()) == 0 {
		// transformers refuses before rendering, whatever the template says.
		return nil, &RuntimeError{Type: "ValueError", Msg: "Cannot apply chat template to an empty conversation. Provide at least one message."}
	}
	for _, m := range msgs.Items() {
		decodeToolCallArguments(m)
	}
	vars := map[string]Value{
		"messages":              msgs,
		"tools":                 jinja.None(),
		"documents":             jinja.None(),
		"add_generation_prompt": jinja.Bool(r.AddGenerationPrompt),
	}
	if len(r.Tools) > 0 {
		tools, err := jinja.DecodeJSON(r.Tools)
		if err != nil {
			return nil, fmt.Errorf("chat: tools: %w", err)
		}
		vars["tools"] = tools
	}
	if r.BOSToken != "" {
		vars["bos_token"] = jinja.String(r.BOSToken)
	}
	if r.EOSToken != "" {
		vars["eos_token"] = jinja.String(r.EOSToken)
	}
	for k, raw := range r.Kwargs {
		if reservedVars[k] {
			return nil, fmt.Errorf("chat: chat_template_kwargs may not set %q", k)
		}
		v, err := jinja.DecodeJSON(raw)
		if err != nil {
			return nil, fmt.Errorf("chat: chat_template_kwargs[%q]: %w", k, err)
		}
		vars[k] = v
	}
	return vars, nil
}

// decodeToolCallArguments replaces string arguments of a message's
// tool_calls (function.arguments, or arguments at the top level of the
// call) by the JSON object they encode.
func decodeToolCallArguments(m Value) {
	d := m.Dict()
	if d == nil {
		return
	}
	calls, ok := d.GetStr("tool_calls")
	if !ok || calls.Kind() != jinja.KindList {
		return
	}
	for _, c := range calls.Items() {
		cd := c.Dict()
		if cd == nil {
			continue
		}
		decodeArgumentsIn(cd)
		if fn, ok := cd.GetStr("function"); ok && fn.Dict() != nil {
			decodeArgumentsIn(fn.Dict())
		}
	}
}

func decodeArgumentsIn(d *jinja.Dict) {
	args, ok := d.GetStr("arguments")
	if !ok || args.Kind() != jinja.KindString {
		return
	}
	v, err := jinja.DecodeJSON([]byte(args.Str()))
	if err != nil || v.Kind() != jinja.KindDict {
		return
	}
	d.SetStr("arguments", v)
}
