package server

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
)

// anthropicRequest is a decoded Anthropic Messages request: the chat
// request it becomes plus what only this API's encoder needs.
type anthropicRequest struct {
	chat   *chatRequest
	model  string
	stream bool
	// prefill is the text of a final assistant message (a response
	// prefill the model continues); prefillMsgs are the messages without
	// it. Empty when the conversation ends with a user turn.
	prefill     string
	prefillMsgs json.RawMessage
}

// decodeAnthropic decodes a POST /v1/messages body. countOnly relaxes what
// /v1/messages/count_tokens does not need (max_tokens).
func decodeAnthropic(body string, countOnly bool) (*anthropicRequest, *APIError) {
	root, err := parseBody(body)
	if err != nil {
		return nil, err
	}
	f := fieldsOf(root)
	req := newConvRequest()
	ar := &anthropicRequest{chat: req}
	var e *APIError
	if ar.model, _, e = optString(f, "model", "model"); e != nil {
		return nil, e
	}
	req.gen.model = ar.model
	if v, set, e := optInt(f, "max_tokens", "max_tokens", 1, math.MaxInt32); e != nil {
		return nil, e
	} else if set {
		req.gen.maxTokens = int(v)
	} else if !countOnly {
		return nil, badRequest("max_tokens", "max_tokens is required")
	}
	var msgs []convMsg
	if sys := f["system"]; present(sys) {
		text, e := anthropicText(sys, "system", false)
		if e != nil {
			return nil, e
		}
		msgs = append(msgs, convMsg{role: "system", content: text})
	}
	m := f["messages"]
	switch {
	case !present(m):
		return nil, badRequest("messages", "messages is required")
	case !m.IsArray():
		return nil, fieldError("messages", "must be an array of {\"role\", \"content\"} objects")
	}
	i := 0
	m.ForEach(func(_, msg gjson.Result) bool {
		msgs, e = appendAnthropicMessage(msgs, msg, "messages."+strconv.Itoa(i))
		i++
		return e == nil
	})
	if e != nil {
		return nil, e
	}
	if i == 0 {
		return nil, badRequest("messages", "messages must not be empty")
	}
	b := appendConvMsgs([]byte{'['}, 0, msgs)
	req.messages = json.RawMessage(append(b, ']'))
	if last := &msgs[len(msgs)-1]; last.role == "assistant" && len(last.calls) == 0 && last.content != "" && len(msgs) > 1 {
		ar.prefill = last.content
		b = appendConvMsgs([]byte{'['}, 0, msgs[:len(msgs)-1])
		ar.prefillMsgs = json.RawMessage(append(b, ']'))
	}
	if e := decodeAnthropicTools(f, req); e != nil {
		return nil, e
	}
	if e := decodeAnthropicThinking(f, req); e != nil {
		return nil, e
	}
	for _, fl := range []struct {
		key string
		dst **float64
	}{{"temperature", &req.gen.temperature}, {"top_p", &req.gen.topP}} {
		if v, set, e := optFloat(f, fl.key, fl.key); e != nil {
			return nil, e
		} else if set {
			*fl.dst = &v
		}
	}
	if v, set, e := optInt(f, "top_k", "top_k", -1, math.MaxInt32); e != nil {
		return nil, e
	} else if set {
		k := int(v)
		req.gen.topK = &k
	}
	if st := f["stop_sequences"]; present(st) {
		if !st.IsArray() {
			return nil, fieldError("stop_sequences", "must be an array of strings")
		}
		var err *APIError
		st.ForEach(func(_, v gjson.Result) bool {
			if v.Type != gjson.String {
				err = fieldError("stop_sequences", "must be an array of strings")
				return false
			}
			if v.Str != "" {
				req.gen.stop = append(req.gen.stop, v.Str)
			}
			return true
		})
		if err != nil {
			return nil, err
		}
		if len(req.gen.stop) > maxStopStrings {
			return nil, badRequest("stop_sequences", "stop_sequences holds %d strings; at most %d are allowed", len(req.gen.stop), maxStopStrings)
		}
	}
	if md := f["metadata"]; present(md) && !md.IsObject() {
		return nil, fieldError("metadata", "must be an object")
	}
	if ar.stream, _, e = optBool(f, "stream", "stream"); e != nil {
		return nil, e
	}
	return ar, nil
}

// anthropicText reads a string or an array of text blocks (system prompts,
// tool results); cache_control and citations are accepted and ignored.
// inTool (tool results) turns image and document blocks into a note
// instead of an error: an agent's tool may return a screenshot, and one
// such result must not fail the whole session.
func anthropicText(r gjson.Result, p string, inTool bool) (string, *APIError) {
	if r.Type == gjson.String {
		return r.Str, nil
	}
	if !r.IsArray() {
		return "", fieldError(p, "must be a string or an array of text blocks")
	}
	var parts []string
	var err *APIError
	i := 0
	r.ForEach(func(_, blk gjson.Result) bool {
		bp := p + "." + strconv.Itoa(i)
		i++
		switch t := blk.Get("type").Str; t {
		case "text":
			txt := blk.Get("text")
			if txt.Type != gjson.String {
				err = fieldError(bp+".text", "must be a string")
				return false
			}
			parts = append(parts, txt.Str)
		case "image", "document":
			if inTool {
				parts = append(parts, "["+t+" omitted: this model reads text only]")
				return true
			}
			err = badRequest(bp, "%s: %s blocks are not supported: this model reads text only", bp, t)
			return false
		default:
			err = badRequest(bp+".type", "%s.type must be \"text\", got %q", bp, t)
			return false
		}
		return true
	})
	return strings.Join(parts, "\n"), err
}

// appendAnthropicMessage translates one message. A user message's
// tool_result blocks become tool messages (before its text); an assistant
// message's thinking, text and tool_use blocks become one assistant
// message with reasoning_content and tool_calls.
func appendAnthropicMessage(msgs []convMsg, m gjson.Result, p string) ([]convMsg, *APIError) {
	if !m.IsObject() {
		return nil, fieldError(p, "must be an object with role and content")
	}
	f := fieldsOf(m)
	role := f["role"].Str
	if role != "user" && role != "assistant" {
		return nil, badRequest(p+".role", "%s.role must be \"user\" or \"assistant\", got %s", p, orNull(f["role"]))
	}
	c := f["content"]
	if c.Type == gjson.String {
		return append(msgs, convMsg{role: role, content: c.Str}), nil
	}
	if !c.IsArray() {
		return nil, fieldError(p+".content", "must be a string or an array of content blocks")
	}
	out := convMsg{role: role}
	var texts, thinking []string
	var err *APIError
	i := 0
	c.ForEach(func(_, blk gjson.Result) bool {
		bp := p + ".content." + strconv.Itoa(i)
		i++
		if !blk.IsObject() {
			err = fieldError(bp, "must be a content block object")
			return false
		}
		bf := fieldsOf(blk)
		switch t := bf["type"].Str; t {
		case "text":
			if bf["text"].Type != gjson.String {
				err = fieldError(bp+".text", "must be a string")
				return false
			}
			texts = append(texts, bf["text"].Str)
		case "thinking":
			if role == "assistant" {
				thinking = append(thinking, bf["thinking"].Str)
			}
		case "redacted_thinking", "server_tool_use", "web_search_tool_result", "web_fetch_tool_result",
			"code_execution_tool_result", "mcp_tool_use", "mcp_tool_result", "container_upload":
			// Server-side blocks another model produced: nothing to render.
		case "tool_use":
			if role != "assistant" {
				err = badRequest(bp+".type", "%s: tool_use blocks belong in assistant messages", bp)
				return false
			}
			name := bf["name"]
			if name.Type != gjson.String || name.Str == "" {
				err = fieldError(bp+".name", "must be a non-empty string")
				return false
			}
			input := bf["input"]
			args := "{}"
			if present(input) {
				if !input.IsObject() {
					err = fieldError(bp+".input", "must be an object")
					return false
				}
				args = input.Raw
			}
			out.calls = append(out.calls, convCall{id: bf["id"].Str, name: name.Str, args: args})
		case "tool_result":
			if role != "user" {
				err = badRequest(bp+".type", "%s: tool_result blocks belong in user messages", bp)
				return false
			}
			id := bf["tool_use_id"]
			if id.Type != gjson.String {
				err = fieldError(bp+".tool_use_id", "must be a string")
				return false
			}
			var text string
			if rc := bf["content"]; present(rc) {
				if text, err = anthropicText(rc, bp+".content", true); err != nil {
					return false
				}
			}
			if bf["is_error"].Type == gjson.True {
				text = "Error: " + text
			}
			msgs = append(msgs, convMsg{role: "tool", content: text, toolCallID: id.Str})
		case "image", "document":
			err = badRequest(bp, "%s: %s blocks are not supported: this model reads text only", bp, t)
			return false
		default:
			err = badRequest(bp+".type", "%s.type %q is not a supported content block", bp, t)
			return false
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	out.content = strings.Join(texts, "\n")
	out.reasoning = strings.Join(thinking, "\n")
	if role == "user" && out.content == "" && len(texts) == 0 && i > 0 {
		return msgs, nil // only tool results
	}
	return append(msgs, out), nil
}

func orNull(r gjson.Result) string {
	if !r.Exists() {
		return "null"
	}
	return r.Raw
}

// decodeAnthropicTools reads tools (custom tools with input_schema; the
// server tools Claude Code declares, which carry a versioned type and no
// schema, are accepted and not offered to the model) and tool_choice.
func decodeAnthropicTools(f fields, req *chatRequest) *APIError {
	var tools []convTool
	if t := f["tools"]; present(t) {
		if !t.IsArray() {
			return fieldError("tools", "must be an array of tool objects")
		}
		var err *APIError
		i := 0
		t.ForEach(func(_, tool gjson.Result) bool {
			p := "tools." + strconv.Itoa(i)
			i++
			if !tool.IsObject() {
				err = fieldError(p, "must be an object")
				return false
			}
			tf := fieldsOf(tool)
			if typ := tf["type"]; present(typ) && typ.Str != "custom" && !present(tf["input_schema"]) {
				return true // a server tool (web_search_…, bash_…, text_editor_…)
			}
			name := tf["name"]
			if name.Type != gjson.String || name.Str == "" {
				err = fieldError(p+".name", "must be a non-empty string")
				return false
			}
			schema := tf["input_schema"]
			if !schema.IsObject() {
				err = badRequest(p+".input_schema", "%s.input_schema is required (a JSON schema object)", p)
				return false
			}
			strict, _, e := optBool(tf, "strict", p+".strict")
			if e != nil {
				err = e
				return false
			}
			tools = append(tools, convTool{name: name.Str, description: tf["description"].Str, params: json.RawMessage(schema.Raw), strict: strict, param: p + ".input_schema"})
			return true
		})
		if err != nil {
			return err
		}
	}
	applyConvTools(req, tools)
	tc := f["tool_choice"]
	if !present(tc) {
		return nil
	}
	if !tc.IsObject() {
		return fieldError("tool_choice", "must be an object like {\"type\": \"auto\"}")
	}
	tf := fieldsOf(tc)
	switch t := tf["type"].Str; t {
	case "auto":
	case "any":
		req.toolChoice = "required"
	case "none":
		req.toolChoice = "none"
	case "tool":
		name := tf["name"]
		if name.Type != gjson.String || name.Str == "" {
			return fieldError("tool_choice.name", "must be a non-empty string")
		}
		req.toolChoice, req.toolName = "function", name.Str
	default:
		return badRequest("tool_choice.type", "tool_choice.type must be auto, any, tool or none, got %q", t)
	}
	if tf["disable_parallel_tool_use"].Type == gjson.True {
		req.parallelToolCalls = false
	}
	return checkToolChoice(req, "tool_choice")
}

// decodeAnthropicThinking maps thinking onto the thinking budget: enabled
// with budget_tokens caps it, enabled without leaves it uncapped, disabled
// or absent (Anthropic's default) turns thinking off.
func decodeAnthropicThinking(f fields, req *chatRequest) *APIError {
	req.thinkBudget = 0
	th := f["thinking"]
	if !present(th) {
		return nil
	}
	if !th.IsObject() {
		return fieldError("thinking", "must be an object like {\"type\": \"enabled\", \"budget_tokens\": 1024}")
	}
	tf := fieldsOf(th)
	switch t := tf["type"].Str; t {
	case "disabled":
	case "enabled", "adaptive":
		req.thinkBudget = -1
		if v, set, e := optInt(tf, "budget_tokens", "thinking.budget_tokens", 0, math.MaxInt32); e != nil {
			return e
		} else if set {
			req.thinkBudget = int(v)
		}
	default:
		return badRequest("thinking.type", "thinking.type must be \"enabled\" or \"disabled\", got %q", t)
	}
	return nil
}
