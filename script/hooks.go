package script

import (
	"encoding/json"
	"fmt"
	"time"

	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"

	"github.com/infernix/infernix/engine/toolcall"
	"github.com/infernix/infernix/server"
)

// HookError is a failed hook call: it raised, ran out of steps or time, or
// returned a value of the wrong type. Pos is the script file:line at fault
// (the raise, or the hook's def for a wrong return value).
type HookError struct {
	Hook, Pos, Msg string
	Backtrace      string
}

func (e *HookError) Error() string {
	return fmt.Sprintf("script hook %s failed at %s: %s", e.Hook, e.Pos, e.Msg)
}

// The engine implements every Starlark-backed server hook.
var (
	_ server.Router            = (*Engine)(nil)
	_ server.ThinkingBudgeter  = (*Engine)(nil)
	_ server.SamplingOverrider = (*Engine)(nil)
	_ server.GrammarProvider   = (*Engine)(nil)
	_ server.ToolCallParser    = (*Engine)(nil)
	_ server.ResponseEditor    = (*Engine)(nil)
)

// call runs hook name with args. ok false: the hook is not defined.
func (e *Engine) call(name string, args ...starlark.Value) (v starlark.Value, h hookFn, ok bool, err error) {
	h, ok = e.cur.Load().hooks[name]
	if !ok {
		return nil, h, false, nil
	}
	th := &starlark.Thread{Name: name, Print: e.print}
	th.SetMaxExecutionSteps(e.opts.MaxSteps)
	th.SetLocal(loggerKey, e.log)
	setClock(th, time.Now())
	stop := time.AfterFunc(e.opts.Timeout, func() { th.Cancel(fmt.Sprintf("timeout: the call ran longer than %s", e.opts.Timeout)) })
	v, err = starlark.Call(th, h.fn, starlark.Tuple(args), nil)
	stop.Stop()
	if err != nil {
		he := &HookError{Hook: name, Pos: h.pos, Msg: err.Error()}
		if ee, isEval := err.(*starlark.EvalError); isEval {
			he.Pos, he.Msg, he.Backtrace = framePos(ee.CallStack), ee.Msg, ee.Backtrace()
		}
		e.log.Error("script hook failed", "hook", name, "at", he.Pos, "error", he.Msg, "backtrace", he.Backtrace)
		return nil, h, true, he
	}
	return v, h, true, nil
}

// badReturn is the error for a hook's wrong return value.
func (e *Engine) badReturn(name string, h hookFn, format string, args ...any) error {
	he := &HookError{Hook: name, Pos: h.pos, Msg: "returned " + fmt.Sprintf(format, args...)}
	e.log.Error("script hook failed", "hook", name, "at", he.Pos, "error", he.Msg)
	return he
}

// Route calls route(request): None keeps the request, a string names the
// model, a dict may hold model, error and status (a rejection),
// max_tokens, thinking_budget and reasoning_effort.
func (e *Engine) Route(r *server.HookRequest) (server.RouteResult, error) {
	var rt server.RouteResult
	v, h, ok, err := e.call("route", requestValue(r))
	if !ok || err != nil {
		return rt, err
	}
	switch v := v.(type) {
	case starlark.NoneType:
		return rt, nil
	case starlark.String:
		rt.Model = string(v)
		return rt, nil
	case *starlark.Dict:
		d := dictReader{d: v}
		rt.Model = d.str("model")
		if msg := d.str("error"); msg != "" || d.has("status") {
			rt.Reject = &server.Rejection{Status: d.intOr("status", 400), Message: msg}
		}
		rt.MaxTokens = d.optInt("max_tokens")
		rt.ThinkingBudget = d.optInt("thinking_budget")
		if d.has("reasoning_effort") {
			s := d.str("reasoning_effort")
			rt.ReasoningEffort = &s
		}
		if err := d.done("model", "error", "status", "max_tokens", "thinking_budget", "reasoning_effort"); err != nil {
			return rt, e.badReturn("route", h, "%v", err)
		}
		return rt, nil
	}
	return rt, e.badReturn("route", h, "%s, want None, a model name string or a dict", v.Type())
}

// ThinkingBudget calls thinking_budget(request): an int or None.
func (e *Engine) ThinkingBudget(r *server.HookRequest) (int, bool, error) {
	v, h, ok, err := e.call("thinking_budget", requestValue(r))
	if !ok || err != nil || v == starlark.None {
		return 0, false, err
	}
	n, ierr := starlark.AsInt32(v)
	if ierr != nil {
		return 0, false, e.badReturn("thinking_budget", h, "%s, want an int token count or None", v.Type())
	}
	return n, true, nil
}

// Sampling calls sampling(request): None or a dict of overrides.
func (e *Engine) Sampling(r *server.HookRequest) (server.SamplingOverrides, error) {
	var ov server.SamplingOverrides
	v, h, ok, err := e.call("sampling", requestValue(r))
	if !ok || err != nil || v == starlark.None {
		return ov, err
	}
	dv, isDict := v.(*starlark.Dict)
	if !isDict {
		return ov, e.badReturn("sampling", h, "%s, want None or a dict", v.Type())
	}
	d := dictReader{d: dv}
	ov.Temperature, ov.TopP, ov.MinP = d.optFloat("temperature"), d.optFloat("top_p"), d.optFloat("min_p")
	ov.PresencePenalty, ov.FrequencyPenalty = d.optFloat("presence_penalty"), d.optFloat("frequency_penalty")
	ov.RepetitionPenalty = d.optFloat("repetition_penalty")
	ov.TopK = d.optInt("top_k")
	if lb, found := d.get("logit_bias"); found {
		m, ok := lb.(*starlark.Dict)
		if !ok {
			d.fail("logit_bias is a %s, want a dict of token text to number", lb.Type())
		} else {
			ov.LogitBias = map[string]float64{}
			for _, it := range m.Items() {
				k, kok := starlark.AsString(it[0])
				f, fok := starlark.AsFloat(it[1])
				if !kok || !fok {
					d.fail("logit_bias maps %s to %s, want string to number", it[0].Type(), it[1].Type())
					break
				}
				ov.LogitBias[k] = f
			}
		}
	}
	if st, found := d.get("stop"); found {
		if s, ok := starlark.AsString(st); ok {
			ov.Stop = []string{s}
		} else if l, err := stringList(st); err == nil {
			ov.Stop = l
		} else {
			d.fail("stop: %v", err)
		}
	}
	if err := d.done("temperature", "top_p", "min_p", "top_k", "presence_penalty", "frequency_penalty",
		"repetition_penalty", "logit_bias", "stop"); err != nil {
		return ov, e.badReturn("sampling", h, "%v", err)
	}
	return ov, nil
}

// Grammar calls grammar(request): None, a grammar string, or a dict (a
// JSON schema, returned as JSON text).
func (e *Engine) Grammar(r *server.HookRequest) (string, error) {
	v, h, ok, err := e.call("grammar", requestValue(r))
	if !ok || err != nil || v == starlark.None {
		return "", err
	}
	switch v := v.(type) {
	case starlark.String:
		return string(v), nil
	case *starlark.Dict:
		b, err := appendJSON(nil, v, 0)
		if err != nil {
			return "", e.badReturn("grammar", h, "a schema that is not JSON: %v", err)
		}
		return string(b), nil
	}
	return "", e.badReturn("grammar", h, "%s, want None, a grammar string or a JSON schema dict", v.Type())
}

// Handles reports whether parse_tool_calls is defined for format (json or
// xml): TOOL_FORMATS, when a script sets it, lists the formats.
func (e *Engine) Handles(format string) bool {
	p := e.cur.Load()
	if _, ok := p.hooks["parse_tool_calls"]; !ok {
		return false
	}
	if p.toolFormats == nil {
		return true
	}
	for _, f := range p.toolFormats {
		if f == format {
			return true
		}
	}
	return false
}

// ParseToolCalls calls parse_tool_calls(text, tools), which returns
// (calls, remaining_text); each call is a dict with name and arguments (a
// dict encoded in order, or a JSON object text).
func (e *Engine) ParseToolCalls(text string, tools []toolcall.Tool) ([]toolcall.Call, string, error) {
	v, h, ok, err := e.call("parse_tool_calls", starlark.String(text), toolsValue(tools))
	if !ok {
		return nil, text, nil
	}
	if err != nil {
		return nil, "", err
	}
	t, isTuple := v.(starlark.Tuple)
	if !isTuple || len(t) != 2 {
		return nil, "", e.badReturn("parse_tool_calls", h, "%s, want a (calls, remaining_text) tuple", v.Type())
	}
	rest, isStr := starlark.AsString(t[1])
	if !isStr {
		return nil, "", e.badReturn("parse_tool_calls", h, "remaining_text of type %s, want a string", t[1].Type())
	}
	calls, cerr := decodeCalls(t[0])
	if cerr != nil {
		return nil, "", e.badReturn("parse_tool_calls", h, "%v", cerr)
	}
	return calls, rest, nil
}

// EditResponse calls on_response(request, response): None, or a dict with
// content (a string), tool_calls (a list, replacing the calls) and tags
// (a dict of strings).
func (e *Engine) EditResponse(r *server.HookRequest, resp *server.HookResponse) (server.ResponseEdit, error) {
	var ed server.ResponseEdit
	v, h, ok, err := e.call("on_response", requestValue(r), responseValue(resp))
	if !ok || err != nil || v == starlark.None {
		return ed, err
	}
	dv, isDict := v.(*starlark.Dict)
	if !isDict {
		return ed, e.badReturn("on_response", h, "%s, want None or a dict", v.Type())
	}
	d := dictReader{d: dv}
	if d.has("content") {
		s := d.str("content")
		ed.Content = &s
	}
	if tc, found := d.get("tool_calls"); found {
		calls, cerr := decodeCalls(tc)
		if cerr != nil {
			d.fail("%v", cerr)
		}
		ed.ToolCalls, ed.ReplaceCalls = calls, true
	}
	if tg, found := d.get("tags"); found {
		m, isMap := tg.(*starlark.Dict)
		if !isMap {
			d.fail("tags is a %s, want a dict of strings", tg.Type())
		} else {
			ed.Tags = map[string]string{}
			for _, it := range m.Items() {
				k, kok := starlark.AsString(it[0])
				s, sok := starlark.AsString(it[1])
				if !kok || !sok {
					d.fail("tags maps %s to %s, want string to string", it[0].Type(), it[1].Type())
					break
				}
				ed.Tags[k] = s
			}
		}
	}
	if err := d.done("content", "tool_calls", "tags"); err != nil {
		return ed, e.badReturn("on_response", h, "%v", err)
	}
	return ed, nil
}

// requestValue is the read-only struct scripts see as request.
func requestValue(r *server.HookRequest) starlark.Value {
	msgs := make(starlark.Tuple, len(r.Messages))
	for i, m := range r.Messages {
		msgs[i] = starlarkstruct.FromStringDict(starlarkstruct.Default, starlark.StringDict{
			"role": starlark.String(m.Role), "content": starlark.String(m.Content)})
	}
	tools := make(starlark.Tuple, len(r.Tools))
	for i, t := range r.Tools {
		tools[i] = starlark.String(t)
	}
	return starlarkstruct.FromStringDict(starlarkstruct.Default, starlark.StringDict{
		"endpoint":         starlark.String(r.Endpoint),
		"model":            starlark.String(r.Model),
		"served_model":     starlark.String(r.ServedModel),
		"api_key":          starlark.String(r.APIKey),
		"user":             starlark.String(r.User),
		"stream":           starlark.Bool(r.Stream),
		"max_tokens":       optIntValue(r.MaxTokens),
		"reasoning_effort": optStringValue(r.ReasoningEffort),
		"thinking_budget":  optIntValue(r.ThinkingBudget),
		"temperature":      optFloatValue(r.Temperature),
		"top_p":            optFloatValue(r.TopP),
		"tool_format":      starlark.String(r.ToolFormat),
		"tools":            tools,
		"messages":         msgs,
	})
}

func optIntValue(n int) starlark.Value {
	if n < 0 {
		return starlark.None
	}
	return starlark.MakeInt(n)
}

func optStringValue(s string) starlark.Value {
	if s == "" {
		return starlark.None
	}
	return starlark.String(s)
}

func optFloatValue(f *float64) starlark.Value {
	if f == nil {
		return starlark.None
	}
	return starlark.Float(*f)
}

// responseValue is the read-only struct scripts see as response.
func responseValue(r *server.HookResponse) starlark.Value {
	return starlarkstruct.FromStringDict(starlarkstruct.Default, starlark.StringDict{
		"content":           starlark.String(r.Content),
		"reasoning":         starlark.String(r.Reasoning),
		"tool_calls":        callsValue(r.ToolCalls),
		"finish_reason":     starlark.String(r.Finish),
		"prompt_tokens":     starlark.MakeInt(r.PromptTokens),
		"completion_tokens": starlark.MakeInt(r.CompletionTokens),
	})
}

func callsValue(calls []toolcall.Call) starlark.Value {
	t := make(starlark.Tuple, len(calls))
	for i, c := range calls {
		t[i] = starlarkstruct.FromStringDict(starlarkstruct.Default, starlark.StringDict{
			"name": starlark.String(c.Name), "arguments": starlark.String(c.Arguments)})
	}
	return t
}

// toolsValue gives each tool as struct(name, parameters) with the schema
// decoded into frozen Starlark values.
func toolsValue(tools []toolcall.Tool) starlark.Value {
	t := make(starlark.Tuple, len(tools))
	for i, tl := range tools {
		var params starlark.Value = starlark.None
		if len(tl.Parameters) > 0 {
			var x any
			if json.Unmarshal(tl.Parameters, &x) == nil {
				params = fromGo(x)
			}
		}
		t[i] = starlarkstruct.FromStringDict(starlarkstruct.Default, starlark.StringDict{
			"name": starlark.String(tl.Name), "parameters": params})
	}
	t.Freeze()
	return t
}

// fromGo converts a decoded JSON value (key order is lost by
// encoding/json; schemas do not depend on it).
func fromGo(x any) starlark.Value {
	switch x := x.(type) {
	case nil:
		return starlark.None
	case bool:
		return starlark.Bool(x)
	case float64:
		if x == float64(int64(x)) {
			return starlark.MakeInt64(int64(x))
		}
		return starlark.Float(x)
	case string:
		return starlark.String(x)
	case []any:
		l := make([]starlark.Value, len(x))
		for i, v := range x {
			l[i] = fromGo(v)
		}
		return starlark.NewList(l)
	case map[string]any:
		d := starlark.NewDict(len(x))
		for k, v := range x {
			d.SetKey(starlark.String(k), fromGo(v))
		}
		return d
	}
	return starlark.None
}

// decodeCalls reads a list of {"name": str, "arguments": dict or str}.
func decodeCalls(v starlark.Value) ([]toolcall.Call, error) {
	it, ok := v.(starlark.Iterable)
	if !ok {
		return nil, fmt.Errorf("calls of type %s, want a list of dicts", v.Type())
	}
	var calls []toolcall.Call
	iter := it.Iterate()
	defer iter.Done()
	var x starlark.Value
	for i := 0; iter.Next(&x); i++ {
		dv, ok := x.(*starlark.Dict)
		if !ok {
			return nil, fmt.Errorf("call %d is a %s, want a dict with name and arguments", i, x.Type())
		}
		d := dictReader{d: dv}
		c := toolcall.Call{Name: d.str("name")}
		if c.Name == "" && d.err == nil {
			d.fail("call %d has no name", i)
		}
		if a, found := d.get("arguments"); found {
			switch a := a.(type) {
			case starlark.String:
				var m map[string]json.RawMessage
				if json.Unmarshal([]byte(a), &m) != nil || m == nil { // "null" decodes to a nil map
					d.fail("call %d: arguments %q is not a JSON object", i, string(a))
				}
				c.Arguments = string(a)
			case *starlark.Dict:
				b, err := appendJSON(nil, a, 0)
				if err != nil {
					d.fail("call %d: arguments: %v", i, err)
				}
				c.Arguments = string(b)
			default:
				d.fail("call %d: arguments is a %s, want a dict or a JSON object string", i, a.Type())
			}
		} else {
			c.Arguments = "{}"
		}
		if err := d.done("name", "arguments"); err != nil {
			return nil, err
		}
		calls = append(calls, c)
	}
	return calls, nil
}

// dictReader reads a returned dict's keys, keeping the first type error
// (done also reports unknown keys).
type dictReader struct {
	d   *starlark.Dict
	err error
}

func (r *dictReader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf(format, args...)
	}
}

func (r *dictReader) get(key string) (starlark.Value, bool) {
	v, found, _ := r.d.Get(starlark.String(key))
	return v, found
}

func (r *dictReader) has(key string) bool {
	_, found, _ := r.d.Get(starlark.String(key))
	return found
}

func (r *dictReader) str(key string) string {
	v, found := r.get(key)
	if !found || v == starlark.None {
		return ""
	}
	s, ok := starlark.AsString(v)
	if !ok {
		r.fail("%s is a %s, want a string", key, v.Type())
	}
	return s
}

func (r *dictReader) optInt(key string) *int {
	v, found := r.get(key)
	if !found || v == starlark.None {
		return nil
	}
	n, err := starlark.AsInt32(v)
	if err != nil {
		r.fail("%s is a %s, want an int", key, v.Type())
		return nil
	}
	return &n
}

func (r *dictReader) intOr(key string, d int) int {
	if p := r.optInt(key); p != nil {
		return *p
	}
	return d
}

func (r *dictReader) optFloat(key string) *float64 {
	v, found := r.get(key)
	if !found || v == starlark.None {
		return nil
	}
	f, ok := starlark.AsFloat(v)
	if !ok {
		r.fail("%s is a %s, want a number", key, v.Type())
		return nil
	}
	return &f
}

// done returns the first error, or names a key outside known.
func (r *dictReader) done(known ...string) error {
	if r.err != nil {
		return r.err
	}
	for _, k := range r.d.Keys() {
		s, ok := starlark.AsString(k)
		found := false
		for _, kn := range known {
			found = found || (ok && s == kn)
		}
		if !found {
			return fmt.Errorf("a dict with unknown key %s (known: %v)", k, known)
		}
	}
	return nil
}

// stringList reads a list or tuple of strings.
func stringList(v starlark.Value) ([]string, error) {
	it, ok := v.(starlark.Iterable)
	if !ok || v.Type() == "string" {
		return nil, fmt.Errorf("%s, want a list of strings", v.Type())
	}
	out := []string{}
	iter := it.Iterate()
	defer iter.Done()
	var x starlark.Value
	for iter.Next(&x) {
		s, ok := starlark.AsString(x)
		if !ok {
			return nil, fmt.Errorf("a list holding a %s, want strings", x.Type())
		}
		out = append(out, s)
	}
	return out, nil
}
