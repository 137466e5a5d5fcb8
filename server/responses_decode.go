package server

import (
	"encoding/json"
	"math"
	"strconv"

	"github.com/tidwall/gjson"
)

// responsesRequest is a decoded OpenAI Responses request.
type responsesRequest struct {
	chat         *chatRequest
	model        string
	stream       bool
	store        bool
	previousID   string
	instructions string
	hasInstr     bool
	input        []convMsg // this request's input, for the stored conversation
	effort       string
	maxOutput    int // -1: not given
	// Echoed in the response object as the client sent them.
	toolsRaw, toolChoiceRaw, metadataRaw string
	formatRaw                            string // text.format, "" for the default
}

// Item types of other vendors' hosted tools that may appear in an input
// (Codex replays its whole history); they have no counterpart in the
// template and are skipped.
var skippedItems = map[string]bool{
	"web_search_call": true, "file_search_call": true, "computer_call": true, "computer_call_output": true,
	"code_interpreter_call": true, "image_generation_call": true, "local_shell_call": true,
	"local_shell_call_output": true, "mcp_call": true, "mcp_list_tools": true, "mcp_approval_request": true,
	"mcp_approval_response": true, "custom_tool_call": true, "custom_tool_call_output": true,
	"item_reference": true, "compaction": true,
}

// decodeResponses decodes a POST /v1/responses body.
func decodeResponses(body string) (*responsesRequest, *APIError) {
	root, err := parseBody(body)
	if err != nil {
		return nil, err
	}
	f := fieldsOf(root)
	req := newConvRequest()
	rr := &responsesRequest{chat: req, store: true, maxOutput: -1}
	var e *APIError
	if rr.model, _, e = optString(f, "model", "model"); e != nil {
		return nil, e
	}
	req.gen.model = rr.model
	if rr.instructions, rr.hasInstr, e = optString(f, "instructions", "instructions"); e != nil {
		return nil, e
	}
	if rr.previousID, _, e = optString(f, "previous_response_id", "previous_response_id"); e != nil {
		return nil, e
	}
	if v, set, e := optBool(f, "store", "store"); e != nil {
		return nil, e
	} else if set {
		rr.store = v
	}
	if rr.stream, _, e = optBool(f, "stream", "stream"); e != nil {
		return nil, e
	}
	if rr.input, e = decodeInput(f["input"]); e != nil {
		return nil, e
	}
	if v, set, e := optInt(f, "max_output_tokens", "max_output_tokens", 1, math.MaxInt32); e != nil {
		return nil, e
	} else if set {
		rr.maxOutput = int(v)
		req.gen.maxTokens, req.gen.maxTokensParam = int(v), "max_output_tokens"
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
	if r := f["reasoning"]; present(r) {
		if !r.IsObject() {
			return nil, fieldError("reasoning", "must be an object like {\"effort\": \"medium\"}")
		}
		if v, set, e := optString(fieldsOf(r), "effort", "reasoning.effort"); e != nil {
			return nil, e
		} else if set {
			switch v {
			case "none", "minimal", "low", "medium", "high", "xhigh":
				rr.effort, req.reasoningEffort = v, v
			default:
				return nil, badRequest("reasoning.effort", "reasoning.effort must be one of none, minimal, low, medium, high, xhigh, got %q", v)
			}
		}
	}
	if e := decodeResponsesTools(f, rr); e != nil {
		return nil, e
	}
	if v, set, e := optBool(f, "parallel_tool_calls", "parallel_tool_calls"); e != nil {
		return nil, e
	} else if set {
		req.parallelToolCalls = v
	}
	if t := f["text"]; present(t) {
		switch ft := t.Get("format.type"); {
		case !ft.Exists() || ft.Str == "text":
		case ft.Str == "json_object":
			req.format, req.formatParam = jsonObjectSchema, "text.format"
		case ft.Str == "json_schema":
			sc := t.Get("format.schema")
			if !sc.Exists() {
				return nil, badRequest("text.format.schema", "text.format.schema is required with type json_schema")
			}
			req.format, req.formatParam = sc.Raw, "text.format.schema"
			if st := t.Get("format.strict"); st.Exists() && st.Type != gjson.Null {
				if !st.IsBool() {
					return nil, fieldError("text.format.strict", "must be a boolean (true or false)")
				}
				req.formatStrict = st.Bool()
			}
		default:
			return nil, badRequest("text.format.type", "text.format.type must be \"text\", \"json_object\" or \"json_schema\", got %s", ft.Raw)
		}
		if f := t.Get("format"); f.IsObject() {
			rr.formatRaw = f.Raw
		}
	}
	if md := f["metadata"]; present(md) {
		if !md.IsObject() {
			return nil, fieldError("metadata", "must be an object")
		}
		rr.metadataRaw = md.Raw
	}
	return rr, nil
}

// decodeInput translates input (a string or a list of items) into chat
// messages: function_call items join the assistant message before them,
// reasoning items become the next assistant message's reasoning_content,
// function_call_output items become tool messages.
func decodeInput(r gjson.Result) ([]convMsg, *APIError) {
	switch {
	case !present(r):
		return nil, badRequest("input", "input is required")
	case r.Type == gjson.String:
		return []convMsg{{role: "user", content: r.Str}}, nil
	case !r.IsArray():
		return nil, fieldError("input", "must be a string or an array of input items")
	}
	var msgs []convMsg
	var reasoning string
	var err *APIError
	// assistant returns the assistant message calls attach to.
	assistant := func() *convMsg {
		if n := len(msgs); n > 0 && msgs[n-1].role == "assistant" {
			return &msgs[n-1]
		}
		msgs = append(msgs, convMsg{role: "assistant", reasoning: reasoning})
		reasoning = ""
		return &msgs[len(msgs)-1]
	}
	i := 0
	r.ForEach(func(_, it gjson.Result) bool {
		p := "input[" + strconv.Itoa(i) + "]"
		i++
		if !it.IsObject() {
			err = fieldError(p, "must be an input item object")
			return false
		}
		f := fieldsOf(it)
		typ := f["type"].Str
		if typ == "" && present(f["role"]) {
			typ = "message"
		}
		switch {
		case typ == "message":
			role := f["role"].Str
			switch role {
			case "user", "system", "assistant":
			case "developer":
				role = "system"
			default:
				err = badRequest(p+".role", "%s.role must be user, assistant, system or developer, got %s", p, orNull(f["role"]))
				return false
			}
			var text string
			if text, err = messageContent(f["content"], p+".content"); err != nil {
				return false
			}
			if role == "assistant" {
				a := assistant()
				if a.content != "" {
					a.content += "\n"
				}
				a.content += text
				return true
			}
			msgs = append(msgs, convMsg{role: role, content: text})
		case typ == "function_call":
			name := f["name"]
			if name.Type != gjson.String || name.Str == "" {
				err = fieldError(p+".name", "must be a non-empty string")
				return false
			}
			args := f["arguments"]
			if present(args) && args.Type != gjson.String {
				err = fieldError(p+".arguments", "must be a JSON string")
				return false
			}
			a := assistant()
			a.calls = append(a.calls, convCall{id: f["call_id"].Str, name: name.Str, args: args.Str})
		case typ == "function_call_output":
			out := f["output"]
			var text string
			switch {
			case out.Type == gjson.String:
				text = out.Str
			case out.IsArray():
				if text, err = messageContent(out, p+".output"); err != nil {
					return false
				}
			default:
				err = fieldError(p+".output", "must be a string or an array of content parts")
				return false
			}
			msgs = append(msgs, convMsg{role: "tool", content: text, toolCallID: f["call_id"].Str})
		case typ == "reasoning":
			reasoning += reasoningItemText(f)
		case skippedItems[typ]:
		default:
			err = badRequest(p+".type", "%s.type %q is not a supported input item", p, typ)
			return false
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	if len(msgs) == 0 {
		return nil, badRequest("input", "input holds no message")
	}
	return msgs, nil
}

// reasoningItemText is a reasoning item's text: its reasoning_text content,
// else its summary.
func reasoningItemText(f fields) string {
	var out string
	for _, key := range []string{"content", "summary"} {
		f[key].ForEach(func(_, part gjson.Result) bool {
			out += part.Get("text").Str
			return true
		})
		if out != "" {
			break
		}
	}
	return out
}

// decodeResponsesTools reads function tools (flat: name, description,
// parameters) and tool_choice; hosted tools (web_search, file_search, …)
// and custom tools are accepted and not offered to the model.
func decodeResponsesTools(f fields, rr *responsesRequest) *APIError {
	req := rr.chat
	var tools []convTool
	if t := f["tools"]; present(t) {
		if !t.IsArray() {
			return fieldError("tools", "must be an array of tool objects")
		}
		rr.toolsRaw = t.Raw
		var err *APIError
		i := 0
		t.ForEach(func(_, tool gjson.Result) bool {
			p := "tools[" + strconv.Itoa(i) + "]"
			i++
			if !tool.IsObject() {
				err = fieldError(p, "must be an object")
				return false
			}
			tf := fieldsOf(tool)
			if tf["type"].Str != "function" {
				return true // hosted or custom tool
			}
			name := tf["name"]
			if name.Type != gjson.String || name.Str == "" {
				err = fieldError(p+".name", "must be a non-empty string")
				return false
			}
			params := tf["parameters"]
			if present(params) && !params.IsObject() {
				err = fieldError(p+".parameters", "must be a JSON schema object")
				return false
			}
			var raw json.RawMessage
			if present(params) {
				raw = json.RawMessage(params.Raw)
			}
			strict, _, e := optBool(tf, "strict", p+".strict")
			if e != nil {
				err = e
				return false
			}
			tools = append(tools, convTool{name: name.Str, description: tf["description"].Str, params: raw, strict: strict, param: p + ".parameters"})
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
	rr.toolChoiceRaw = tc.Raw
	switch {
	case tc.Type == gjson.String:
		switch tc.Str {
		case "auto", "none", "required":
			req.toolChoice = tc.Str
		default:
			return badRequest("tool_choice", "tool_choice must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", \"name\": ...}, got %q", tc.Str)
		}
	case tc.IsObject():
		tf := fieldsOf(tc)
		if tf["type"].Str != "function" {
			return nil // a hosted tool or allowed_tools: the model chooses
		}
		name := tf["name"]
		if name.Type != gjson.String || name.Str == "" {
			return fieldError("tool_choice.name", "must be a non-empty string")
		}
		req.toolChoice, req.toolName = "function", name.Str
	default:
		return fieldError("tool_choice", "must be a string or an object")
	}
	return checkToolChoice(req, "tool_choice")
}
