package server

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/infernix/infernix/engine/toolcall"
)

// chatRequest is a decoded and validated OpenAI chat-completions request
// (also the input of /apply-template and /tokenize with messages). Raw JSON
// pieces keep the client's key order and number forms for the template.
type chatRequest struct {
	messages json.RawMessage // normalised array (see normalizeMessages)
	tools    json.RawMessage // the client's tools array, or nil
	toolList []toolcall.Tool
	// toolStrict[i]: toolList[i] asked for strict arguments (strict: true);
	// toolParam[i] names its parameters' field, for errors.
	toolStrict []bool
	toolParam  []string
	// toolChoice is auto, none, required or function (then toolName).
	toolChoice, toolName string
	parallelToolCalls    bool
	kwargs               map[string]json.RawMessage
	addGenerationPrompt  bool

	gen genParams
	// thinkBudget < 0: none given (the server default applies).
	thinkBudget     int
	reasoningEffort string
	stream          bool
	includeUsage    bool
	logprobs        bool
	topLogprobs     int
	// hookKey and hookEndpoint are the client's API key and the API path,
	// for hooks (set by the handler; copies, not request buffers).
	hookKey, hookEndpoint string
	outputFormat
}

// genParams are the generation fields shared by chat and completions.
// Unset sampling fields stay nil: the model's generation_config applies.
type genParams struct {
	model                             string
	maxTokens                         int    // -1: not given
	maxTokensParam                    string // the field maxTokens came from, for errors ("": max_tokens)
	temperature, topP, minP           *float64
	topK                              *int
	presencePenalty, frequencyPenalty *float64
	repetitionPenalty                 *float64
	seed                              *uint64
	stop                              []string
	stopTokenIDs                      []int32
	logitBias                         map[int32]float32
	ignoreEOS                         bool
	skipSpecialTokens                 bool
	tokensAsIDs                       bool // return_tokens_as_token_ids: log-prob tokens as "token_id:N"
	user                              string
}

// Limits bound what a request may ask for.
const (
	maxStopStrings = 16
	maxStopLen     = 1024
	maxTopLogprobs = 20
)

// decodeChat decodes a chat-completions body. vocab bounds token ids
// (logit_bias, stop_token_ids).
func decodeChat(body string, vocab int) (*chatRequest, *APIError) {
	root, err := parseBody(body)
	if err != nil {
		return nil, err
	}
	f := fieldsOf(root)
	req := &chatRequest{thinkBudget: -1, parallelToolCalls: true, addGenerationPrompt: true}
	if err := decodeConversation(f, req); err != nil {
		return nil, err
	}
	if err := decodeGen(f, &req.gen, vocab, true); err != nil {
		return nil, err
	}
	if v, set, err := optInt(f, "n", "n", 1, math.MaxInt32); err != nil {
		return nil, err
	} else if set && v != 1 {
		return nil, badRequest("n", "n > 1 is not supported: send one request per completion")
	}
	var e *APIError
	if req.stream, _, e = optBool(f, "stream", "stream"); e != nil {
		return nil, e
	}
	if so := f["stream_options"]; present(so) {
		if !so.IsObject() {
			return nil, fieldError("stream_options", "must be an object")
		}
		if req.includeUsage, _, e = optBool(fieldsOf(so), "include_usage", "stream_options.include_usage"); e != nil {
			return nil, e
		}
	}
	if req.logprobs, _, e = optBool(f, "logprobs", "logprobs"); e != nil {
		return nil, e
	}
	if v, set, e := optInt(f, "top_logprobs", "top_logprobs", 0, maxTopLogprobs); e != nil {
		return nil, e
	} else if set {
		if !req.logprobs && v > 0 {
			return nil, badRequest("top_logprobs", "top_logprobs needs logprobs: true")
		}
		req.topLogprobs = int(v)
	}
	if err := decodeResponseFormat(f, req); err != nil {
		return nil, err
	}
	if err := decodeGuided(f, &req.outputFormat); err != nil {
		return nil, err
	}
	for _, name := range []string{"thinking_budget", "max_thinking_tokens"} {
		if v, set, e := optInt(f, name, name, 0, math.MaxInt32); e != nil {
			return nil, e
		} else if set {
			req.thinkBudget = int(v)
		}
	}
	if v, set, e := optString(f, "reasoning_effort", "reasoning_effort"); e != nil {
		return nil, e
	} else if set {
		switch v {
		case "none", "minimal", "low", "medium", "high", "xhigh":
			req.reasoningEffort = v
		default:
			return nil, badRequest("reasoning_effort", "reasoning_effort must be one of none, minimal, low, medium, high, got %q", v)
		}
	}
	for _, unsupported := range []string{"audio", "prediction", "functions", "function_call", "modalities"} {
		if r := f[unsupported]; present(r) && !(unsupported == "modalities" && isTextOnly(r)) {
			return nil, badRequest(unsupported, "%s is not supported by this server", unsupported)
		}
	}
	return req, nil
}

func isTextOnly(r gjson.Result) bool {
	ok := r.IsArray()
	r.ForEach(func(_, v gjson.Result) bool {
		ok = ok && v.Str == "text"
		return ok
	})
	return ok
}

// decodeConversation reads what the chat template needs: messages, tools,
// tool_choice, parallel_tool_calls, chat_template_kwargs and
// add_generation_prompt.
func decodeConversation(f fields, req *chatRequest) *APIError {
	msgs, err := normalizeMessages(f["messages"])
	if err != nil {
		return err
	}
	req.messages = msgs
	if err := decodeTools(f, req); err != nil {
		return err
	}
	if kw := f["chat_template_kwargs"]; present(kw) {
		if !kw.IsObject() {
			return fieldError("chat_template_kwargs", "must be an object")
		}
		req.kwargs = map[string]json.RawMessage{}
		kw.ForEach(func(k, v gjson.Result) bool {
			req.kwargs[k.Str] = json.RawMessage(v.Raw)
			return true
		})
	}
	var e *APIError
	var set bool
	var agp bool
	if agp, set, e = optBool(f, "add_generation_prompt", "add_generation_prompt"); e != nil {
		return e
	} else if set {
		req.addGenerationPrompt = agp
	}
	return nil
}

// normalizeMessages validates the messages array and rewrites it into the
// form every Qwen template accepts, keeping all other keys and their order:
// content given as text parts becomes one string (parts joined by "\n", as
// vLLM does), null or absent content becomes "" (the Qwen3 template applies
// string methods to it), and role "developer" becomes "system".
func normalizeMessages(r gjson.Result) (json.RawMessage, *APIError) {
	if !present(r) {
		return nil, badRequest("messages", "messages is required")
	}
	if !r.IsArray() {
		return nil, fieldError("messages", "must be an array of message objects")
	}
	out := make([]byte, 0, len(r.Raw)+64)
	out = append(out, '[')
	var err *APIError
	i := 0
	r.ForEach(func(_, m gjson.Result) bool {
		p := "messages[" + strconv.Itoa(i) + "]"
		if i > 0 {
			out = append(out, ',')
		}
		out, err = appendMessage(out, m, p)
		i++
		return err == nil
	})
	if err != nil {
		return nil, err
	}
	if i == 0 {
		return nil, badRequest("messages", "messages must not be empty")
	}
	return append(out, ']'), nil
}

func appendMessage(out []byte, m gjson.Result, p string) ([]byte, *APIError) {
	if !m.IsObject() {
		return nil, fieldError(p, "must be an object with role and content")
	}
	f := fieldsOf(m)
	role, set, err := optString(f, "role", p+".role")
	if err != nil {
		return nil, err
	}
	if !set {
		return nil, badRequest(p+".role", "%s.role is required", p)
	}
	switch role {
	case "system", "user", "assistant", "tool":
	case "developer":
		role = "system"
	default:
		return nil, badRequest(p+".role", "%s.role must be system, developer, user, assistant or tool, got %q", p, role)
	}
	content, cerr := messageContent(f["content"], p+".content")
	if cerr != nil {
		return nil, cerr
	}
	tc := f["tool_calls"]
	if present(tc) {
		if role != "assistant" {
			return nil, badRequest(p+".tool_calls", "%s.tool_calls is only allowed in assistant messages", p)
		}
		if err := checkToolCalls(tc, p+".tool_calls"); err != nil {
			return nil, err
		}
	}
	if !present(f["content"]) && role != "assistant" {
		return nil, badRequest(p+".content", "%s.content is required for %s messages", p, role)
	}
	if rc := f["reasoning_content"]; present(rc) && rc.Type != gjson.String {
		return nil, fieldError(p+".reasoning_content", "must be a string")
	}
	out = append(out, '{')
	n := 0
	wroteContent := false
	m.ForEach(func(k, v gjson.Result) bool {
		// The last duplicate wins, as in fieldsOf.
		if fv := f[k.Str]; fv.Index != v.Index {
			return true
		}
		if n > 0 {
			out = append(out, ',')
		}
		n++
		out = appendString(out, k.Str)
		out = append(out, ':')
		switch k.Str {
		case "role":
			out = appendString(out, role)
		case "content":
			out = appendString(out, content)
			wroteContent = true
		default:
			out = append(out, v.Raw...)
		}
		return true
	})
	if !wroteContent {
		if n > 0 {
			out = append(out, ',')
		}
		out = append(out, `"content":""`...)
	}
	return append(out, '}'), nil
}

// messageContent returns a message's text: a string, null (""), or text
// parts joined by "\n". Image, audio, video and file parts get a 400: this
// server has no multimodal models.
func messageContent(r gjson.Result, p string) (string, *APIError) {
	switch {
	case !present(r):
		return "", nil
	case r.Type == gjson.String:
		return r.Str, nil
	case !r.IsArray():
		return "", fieldError(p, "must be a string or an array of content parts")
	}
	var parts []string
	var err *APIError
	j := 0
	r.ForEach(func(_, part gjson.Result) bool {
		pp := p + "[" + strconv.Itoa(j) + "]"
		j++
		if !part.IsObject() {
			err = fieldError(pp, "must be a content part object like {\"type\": \"text\", \"text\": \"...\"}")
			return false
		}
		pf := fieldsOf(part)
		typ := pf["type"].Str
		switch typ {
		case "text", "input_text", "output_text", "refusal":
			key := "text"
			if typ == "refusal" {
				key = "refusal"
			}
			t := pf[key]
			if t.Type != gjson.String {
				err = badRequest(pp+"."+key, "%s.%s must be a string", pp, key)
				return false
			}
			parts = append(parts, t.Str)
		case "image_url", "input_image", "image":
			err = &APIError{Status: 400, Type: "invalid_request_error", Param: pp, Code: "image_not_supported",
				Message: pp + ": this model has no vision: image inputs are not supported"}
			return false
		case "input_audio", "audio_url", "audio", "video_url", "video", "file", "input_file":
			err = badRequest(pp, "%s: %s content is not supported: this model reads text only", pp, typ)
			return false
		default:
			err = badRequest(pp+".type", "%s.type must be \"text\", got %q", pp, typ)
			return false
		}
		return true
	})
	if err != nil {
		return "", err
	}
	return strings.Join(parts, "\n"), nil
}

func checkToolCalls(tc gjson.Result, p string) *APIError {
	if !tc.IsArray() {
		return fieldError(p, "must be an array")
	}
	var err *APIError
	i := 0
	tc.ForEach(func(_, call gjson.Result) bool {
		cp := p + "[" + strconv.Itoa(i) + "]"
		i++
		if !call.IsObject() {
			err = fieldError(cp, "must be an object")
			return false
		}
		fn := fieldsOf(call)["function"]
		if !fn.IsObject() {
			err = badRequest(cp+".function", "%s.function is required (an object with name and arguments)", cp)
			return false
		}
		ff := fieldsOf(fn)
		if name := ff["name"]; name.Type != gjson.String || name.Str == "" {
			err = badRequest(cp+".function.name", "%s.function.name must be a non-empty string", cp)
			return false
		}
		if a := ff["arguments"]; present(a) && a.Type != gjson.String && !a.IsObject() {
			err = badRequest(cp+".function.arguments", "%s.function.arguments must be a JSON string or an object", cp)
			return false
		}
		return true
	})
	return err
}

// decodeTools reads tools, tool_choice and parallel_tool_calls.
func decodeTools(f fields, req *chatRequest) *APIError {
	if t := f["tools"]; present(t) {
		if !t.IsArray() {
			return fieldError("tools", "must be an array of {\"type\": \"function\", \"function\": {...}}")
		}
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
			if typ := tf["type"]; present(typ) && typ.Str != "function" {
				err = badRequest(p+".type", "%s.type must be \"function\", got %s", p, typ.Raw)
				return false
			}
			fn := tf["function"]
			if !fn.IsObject() {
				err = badRequest(p+".function", "%s.function is required (an object with name, description, parameters)", p)
				return false
			}
			ff := fieldsOf(fn)
			name := ff["name"]
			if name.Type != gjson.String || name.Str == "" {
				err = badRequest(p+".function.name", "%s.function.name must be a non-empty string", p)
				return false
			}
			params := ff["parameters"]
			if present(params) && !params.IsObject() {
				err = badRequest(p+".function.parameters", "%s.function.parameters must be a JSON schema object", p)
				return false
			}
			var raw json.RawMessage
			if present(params) {
				raw = json.RawMessage(params.Raw)
			}
			strict, _, e := optBool(ff, "strict", p+".function.strict")
			if e != nil {
				err = e
				return false
			}
			req.toolList = append(req.toolList, toolcall.Tool{Name: name.Str, Parameters: raw})
			req.toolStrict = append(req.toolStrict, strict)
			req.toolParam = append(req.toolParam, p+".function.parameters")
			return true
		})
		if err != nil {
			return err
		}
		if len(req.toolList) > 0 {
			req.tools = json.RawMessage(t.Raw)
		}
	}
	req.toolChoice = "auto"
	if tc := f["tool_choice"]; present(tc) {
		switch {
		case tc.Type == gjson.String:
			switch tc.Str {
			case "auto", "none", "required":
				req.toolChoice = tc.Str
			default:
				return badRequest("tool_choice", "tool_choice must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}, got %q", tc.Str)
			}
		case tc.IsObject():
			name := tc.Get("function.name")
			if name.Type != gjson.String || name.Str == "" {
				return badRequest("tool_choice.function.name", "tool_choice.function.name must be a non-empty string")
			}
			req.toolChoice, req.toolName = "function", name.Str
		default:
			return fieldError("tool_choice", "must be a string or an object")
		}
	}
	if req.toolChoice == "required" || req.toolChoice == "function" {
		if len(req.toolList) == 0 {
			return badRequest("tool_choice", "tool_choice %q needs a non-empty tools list", req.toolChoice)
		}
	}
	if req.toolChoice == "function" && !hasTool(req.toolList, req.toolName) {
		return badRequest("tool_choice.function.name", "tool_choice names function %q, which is not in tools", req.toolName)
	}
	if v, set, e := optBool(f, "parallel_tool_calls", "parallel_tool_calls"); e != nil {
		return e
	} else if set {
		req.parallelToolCalls = v
	}
	return nil
}

func hasTool(tools []toolcall.Tool, name string) bool {
	for _, t := range tools {
		if t.Name == name {
			return true
		}
	}
	return false
}

// decodeResponseFormat reads response_format: text, json_object (any JSON
// object) or json_schema (json_schema.schema; absent: any JSON value). The
// schema compiles in chatJob.
func decodeResponseFormat(f fields, req *chatRequest) *APIError {
	rf := f["response_format"]
	if !present(rf) {
		return nil
	}
	if !rf.IsObject() {
		return fieldError("response_format", "must be an object like {\"type\": \"text\"}")
	}
	switch t := rf.Get("type"); t.Str {
	case "text":
		return nil
	case "json_object":
		req.format, req.formatParam = jsonObjectSchema, "response_format"
		return nil
	case "json_schema":
		js := rf.Get("json_schema")
		if !js.IsObject() {
			return fieldError("response_format.json_schema", "must be an object with the schema under \"schema\"")
		}
		req.format, req.formatParam = "true", "response_format.json_schema.schema"
		if sc := js.Get("schema"); sc.Exists() {
			req.format = sc.Raw
		}
		if st := js.Get("strict"); st.Exists() && st.Type != gjson.Null {
			if !st.IsBool() {
				return fieldError("response_format.json_schema.strict", "must be a boolean (true or false)")
			}
			req.formatStrict = st.Bool()
		}
		return nil
	default:
		return badRequest("response_format.type", "response_format.type must be \"text\", \"json_object\" or \"json_schema\", got %s", t.Raw)
	}
}

// jsonObjectSchema is json_object's: any object.
const jsonObjectSchema = `{"type":"object"}`

// decodeGen reads the sampling and length fields shared by the APIs.
// chat selects chat's names (max_completion_tokens) and limits.
func decodeGen(f fields, g *genParams, vocab int, chat bool) *APIError {
	g.maxTokens = -1
	g.skipSpecialTokens = true
	var e *APIError
	if g.model, _, e = optString(f, "model", "model"); e != nil {
		return e
	}
	names := []string{"max_tokens"}
	if chat {
		names = append(names, "max_completion_tokens")
	}
	for _, name := range names {
		lo := int64(0)
		if chat {
			lo = 1
		}
		if v, set, e := optInt(f, name, name, lo, math.MaxInt32); e != nil {
			return e
		} else if set {
			g.maxTokens, g.maxTokensParam = int(v), name
		}
	}
	floats := []struct {
		key string
		dst **float64
	}{
		{"temperature", &g.temperature}, {"top_p", &g.topP}, {"min_p", &g.minP},
		{"presence_penalty", &g.presencePenalty}, {"frequency_penalty", &g.frequencyPenalty},
		{"repetition_penalty", &g.repetitionPenalty},
	}
	for _, fl := range floats {
		if v, set, e := optFloat(f, fl.key, fl.key); e != nil {
			return e
		} else if set {
			v := v
			*fl.dst = &v
		}
	}
	if v, set, e := optInt(f, "top_k", "top_k", -1, math.MaxInt32); e != nil {
		return e
	} else if set {
		k := int(v)
		g.topK = &k
	}
	if v, set, e := optInt(f, "seed", "seed", math.MinInt64, math.MaxInt64); e != nil {
		return e
	} else if set {
		s := uint64(v)
		g.seed = &s
	}
	if st := f["stop"]; present(st) {
		switch {
		case st.Type == gjson.String:
			if st.Str != "" {
				g.stop = []string{st.Str}
			}
		case st.IsArray():
			var err *APIError
			i := 0
			st.ForEach(func(_, v gjson.Result) bool {
				p := "stop[" + strconv.Itoa(i) + "]"
				i++
				if v.Type != gjson.String {
					err = fieldError(p, "must be a string")
					return false
				}
				if v.Str != "" {
					g.stop = append(g.stop, v.Str)
				}
				return true
			})
			if err != nil {
				return err
			}
		default:
			return fieldError("stop", "must be a string or an array of strings")
		}
		if len(g.stop) > maxStopStrings {
			return badRequest("stop", "stop holds %d strings; at most %d are allowed", len(g.stop), maxStopStrings)
		}
		for i, s := range g.stop {
			if len(s) > maxStopLen {
				return badRequest("stop", "stop[%d] is %d bytes long; at most %d are allowed", i, len(s), maxStopLen)
			}
		}
	}
	if st := f["stop_token_ids"]; present(st) {
		ids, err := tokenIDs(st, "stop_token_ids", vocab)
		if err != nil {
			return err
		}
		g.stopTokenIDs = ids
	}
	if lb := f["logit_bias"]; present(lb) {
		if !lb.IsObject() {
			return fieldError("logit_bias", "must be an object mapping token ids to numbers")
		}
		g.logitBias = map[int32]float32{}
		var err *APIError
		lb.ForEach(func(k, v gjson.Result) bool {
			p := "logit_bias[" + strconv.Quote(k.Str) + "]"
			id, perr := strconv.ParseInt(k.Str, 10, 32)
			if perr != nil || id < 0 {
				err = badRequest("logit_bias", "logit_bias keys must be token ids (non-negative integers as strings), got %q", k.Str)
				return false
			}
			if int(id) >= vocab {
				err = badRequest("logit_bias", "logit_bias token id %d is outside the vocabulary (size %d)", id, vocab)
				return false
			}
			if v.Type != gjson.Number {
				err = fieldError(p, "must be a number in [-100, 100]")
				return false
			}
			g.logitBias[int32(id)] = float32(v.Num)
			return true
		})
		if err != nil {
			return err
		}
	}
	if g.ignoreEOS, _, e = optBool(f, "ignore_eos", "ignore_eos"); e != nil {
		return e
	}
	if v, set, e := optBool(f, "skip_special_tokens", "skip_special_tokens"); e != nil {
		return e
	} else if set {
		g.skipSpecialTokens = v
	}
	if g.tokensAsIDs, _, e = optBool(f, "return_tokens_as_token_ids", "return_tokens_as_token_ids"); e != nil {
		return e
	}
	if g.user, _, e = optString(f, "user", "user"); e != nil {
		return e
	}
	return nil
}
