package server

import (
	"encoding/json"
	"strings"

	"github.com/infernix/infernix/engine/toolcall"
)

// The Anthropic Messages and OpenAI Responses decoders translate their
// conversations into the chat-completions form the chat templates take
// (convMsg → the messages JSON of a chatRequest), so both APIs run on the
// same template rendering, thinking budgets and forced-call prefill as
// /v1/chat/completions.

// convMsg is one chat message in the template's terms.
type convMsg struct {
	role       string // system, user, assistant or tool
	content    string
	reasoning  string // assistant thinking (reasoning_content)
	calls      []convCall
	toolCallID string // tool messages: the call answered
	name       string // tool messages: the function's name, when known
}

// convCall is an assistant tool call; args is the arguments JSON text.
type convCall struct {
	id, name, args string
}

// appendConvMsg appends m as a normalised chat message (every key the Qwen
// templates read; content always a string).
func appendConvMsg(b []byte, m *convMsg) []byte {
	b = append(b, `{"role":`...)
	b = appendString(b, m.role)
	b = append(b, `,"content":`...)
	b = appendString(b, m.content)
	if m.reasoning != "" {
		b = append(b, `,"reasoning_content":`...)
		b = appendString(b, m.reasoning)
	}
	if len(m.calls) > 0 {
		b = append(b, `,"tool_calls":[`...)
		for i, c := range m.calls {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"id":`...)
			b = appendString(b, c.id)
			b = append(b, `,"type":"function","function":{"name":`...)
			b = appendString(b, c.name)
			b = append(b, `,"arguments":`...)
			// The chat package decodes string arguments into the object the
			// templates iterate.
			args := c.args
			if strings.TrimSpace(args) == "" {
				args = "{}"
			}
			b = appendString(b, args)
			b = append(b, "}}"...)
		}
		b = append(b, ']')
	}
	if m.toolCallID != "" {
		b = append(b, `,"tool_call_id":`...)
		b = appendString(b, m.toolCallID)
	}
	if m.name != "" {
		b = append(b, `,"name":`...)
		b = appendString(b, m.name)
	}
	return append(b, '}')
}

// appendConvMsgs appends msgs to a JSON array's elements (no brackets),
// comma-separated, continuing after n elements already written.
func appendConvMsgs(b []byte, n int, msgs []convMsg) []byte {
	for i := range msgs {
		if n+i > 0 {
			b = append(b, ',')
		}
		b = appendConvMsg(b, &msgs[i])
	}
	return b
}

// convTool is a function tool offered to the model.
type convTool struct {
	name, description string
	params            json.RawMessage // a JSON schema object, or nil
	strict            bool            // the arguments must follow params exactly
	param             string          // params' field, for errors
}

// applyConvTools sets req's tools (OpenAI's form, for the template) and
// tool list (for the call parser).
func applyConvTools(req *chatRequest, tools []convTool) {
	if len(tools) == 0 {
		return
	}
	b := []byte{'['}
	for i, t := range tools {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"type":"function","function":{"name":`...)
		b = appendString(b, t.name)
		if t.description != "" {
			b = append(b, `,"description":`...)
			b = appendString(b, t.description)
		}
		if len(t.params) > 0 {
			b = append(b, `,"parameters":`...)
			b = append(b, t.params...)
		}
		b = append(b, "}}"...)
		req.toolList = append(req.toolList, toolcall.Tool{Name: t.name, Parameters: t.params})
		req.toolStrict = append(req.toolStrict, t.strict)
		req.toolParam = append(req.toolParam, t.param)
	}
	req.tools = json.RawMessage(append(b, ']'))
}

// checkToolChoice validates a forced tool choice against the tools, as
// decodeTools does for chat.
func checkToolChoice(req *chatRequest, param string) *APIError {
	if (req.toolChoice == "required" || req.toolChoice == "function") && len(req.toolList) == 0 {
		return badRequest(param, "%s forces a tool call but no function tools are offered", param)
	}
	if req.toolChoice == "function" && !hasTool(req.toolList, req.toolName) {
		return badRequest(param, "%s names tool %q, which is not in tools", param, req.toolName)
	}
	return nil
}

// newConvRequest is a chat request with the defaults the other APIs share.
func newConvRequest() *chatRequest {
	return &chatRequest{thinkBudget: -1, parallelToolCalls: true, addGenerationPrompt: true, toolChoice: "auto",
		gen: genParams{maxTokens: -1, skipSpecialTokens: true}}
}

// clampToContext cuts a job's max_tokens to what its prompt leaves of the
// context. Agents ask for far more output than a local model's context
// holds (Claude Code asks for 32,000 tokens); for these APIs max_tokens is
// a cap, not a reservation, so a long request is answered (ending with
// max_tokens) instead of refused. A prompt that fills the context alone
// still gets the scheduler's error.
func (s *Server) clampToContext(j *job) {
	if left := s.ctxLen - len(j.prompt); left >= 1 && j.maxTokens > left {
		j.maxTokens = left
	}
}
