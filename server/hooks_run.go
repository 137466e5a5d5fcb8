package server

import (
	"fmt"
	"maps"
	"strings"

	"github.com/gofiber/fiber/v2"
	"github.com/tidwall/gjson"

	"github.com/infernix/infernix/engine/toolcall"
)

// jobHooks is one request's hook state: its read-only view, and (when an
// editor or observer wants it) the reply collected from the outputs.
type jobHooks struct {
	req     *HookRequest
	collect bool
	// hold: an editor is configured, so the outputs are held back until
	// it has run and then sent, edited, to the encoder (emit).
	hold    bool
	noCalls bool // the API has no tool calls (completions): call edits are ignored
	held    []heldOutput
	emit    func(*output) error

	content, reasoning strings.Builder
	calls              []toolcall.Call
}

// heldOutput is a copy of an output kept until the editor has run.
type heldOutput struct {
	kind     outKind
	text, id string
	name     string
	index    int
	logprobs []tokenLogprob
}

// hooksOn reports whether any hook is configured.
func (s *Server) hooksOn() bool {
	h := s.cfg.Hooks
	return h != nil && (len(h.Filters) > 0 || h.Router != nil || h.Thinking != nil || h.Sampling != nil ||
		h.Grammar != nil || h.Tools != nil || h.Editor != nil || len(h.Observers) > 0)
}

// hookError is the 500 a failed hook answers: the implementation's error
// names the hook and the script position.
func (s *Server) hookError(hook string, err error) *APIError {
	s.log.Error("hook failed", "hook", hook, "error", err.Error())
	return &APIError{Status: 500, Type: "server_error", Code: "hook_error", Message: err.Error()}
}

// rejection turns a hook's refusal into an API error of the right type.
func rejection(r *Rejection) *APIError {
	st := r.Status
	if st < 400 || st > 599 {
		st = 400
	}
	typ := "invalid_request_error"
	switch {
	case st == 401:
		typ = "authentication_error"
	case st == 403:
		typ = "permission_error"
	case st == 429:
		typ = "rate_limit_error"
	case st >= 500:
		typ = "server_error"
	}
	msg := r.Message
	if msg == "" {
		msg = "the request was rejected by a server hook"
	}
	e := &APIError{Status: st, Type: typ, Code: "rejected", Message: msg}
	if st == 429 || st == 503 {
		e.RetryAfter = 1
	}
	return e
}

// newHookRequest builds the hooks' view of a chat request.
func (s *Server) newHookRequest(req *chatRequest) *HookRequest {
	hr := &HookRequest{Endpoint: req.hookEndpoint, Model: req.gen.model, ServedModel: s.modelName, APIKey: req.hookKey, User: req.gen.user,
		Stream: req.stream, MaxTokens: req.gen.maxTokens, ReasoningEffort: req.reasoningEffort,
		ThinkingBudget: req.thinkBudget, Temperature: req.gen.temperature, TopP: req.gen.topP,
		ToolFormat: s.toolFormat.String()}
	if hr.Endpoint == "" {
		hr.Endpoint = "/v1/chat/completions"
	}
	for _, t := range req.toolList {
		hr.Tools = append(hr.Tools, t.Name)
	}
	gjson.ParseBytes(req.messages).ForEach(func(_, m gjson.Result) bool {
		hr.Messages = append(hr.Messages, HookMessage{Role: m.Get("role").Str, Content: m.Get("content").Str})
		return true
	})
	return hr
}

// requestHooks runs the filters and the router, applying the route's
// overrides to req. nil, nil: no hooks.
func (s *Server) requestHooks(req *chatRequest) (*jobHooks, *APIError) {
	if !s.hooksOn() {
		return nil, nil
	}
	h := s.cfg.Hooks
	jh := &jobHooks{req: s.newHookRequest(req), collect: h.Editor != nil || len(h.Observers) > 0, hold: h.Editor != nil}
	for _, f := range h.Filters {
		rej, err := f.FilterRequest(jh.req)
		if err != nil {
			return nil, s.hookError("on_request", err)
		}
		if rej != nil {
			return nil, rejection(rej)
		}
	}
	if h.Router == nil {
		return jh, nil
	}
	rt, err := h.Router.Route(jh.req)
	if err != nil {
		return nil, s.hookError("route", err)
	}
	if rt.Reject != nil {
		return nil, rejection(rt.Reject)
	}
	if rt.Model != "" && rt.Model != s.modelName {
		return nil, &APIError{Status: 404, Type: "invalid_request_error", Param: "model", Code: "model_not_found",
			Message: fmt.Sprintf("model %q is routed to %q, which this server does not serve (it serves %q)", req.gen.model, rt.Model, s.modelName)}
	}
	if rt.Model != "" {
		req.gen.model = rt.Model // responses that echo the asked name report the route
	}
	if rt.MaxTokens != nil {
		req.gen.maxTokens = max(*rt.MaxTokens, 1)
		jh.req.MaxTokens = req.gen.maxTokens
	}
	if rt.ThinkingBudget != nil {
		req.thinkBudget = max(*rt.ThinkingBudget, -1)
		jh.req.ThinkingBudget = req.thinkBudget
	}
	if rt.ReasoningEffort != nil {
		switch e := *rt.ReasoningEffort; e {
		case "", "none", "minimal", "low", "medium", "high", "xhigh":
			req.reasoningEffort = e
			jh.req.ReasoningEffort = e
		default:
			return nil, s.hookError("route", fmt.Errorf("hook route: reasoning_effort %q is not one of none, minimal, low, medium, high, xhigh", e))
		}
	}
	return jh, nil
}

// complHooks runs the request-level hooks for /v1/completions: the
// filters and the router (its max_tokens override is applied to req; its
// thinking_budget and reasoning_effort do not apply). The hooks see the
// prompt as one user message. nil, nil: no hooks.
func (s *Server) complHooks(req *complRequest, prompt string, ids []int32, key string) (*jobHooks, *APIError) {
	if !s.hooksOn() {
		return nil, nil
	}
	if prompt == "" && ids != nil {
		prompt = s.eng.Tokenizer.Decode(ids, req.gen.skipSpecialTokens)
	}
	msgs := append([]byte(`[{"role":"user","content":`), appendString(nil, prompt)...)
	cr := &chatRequest{messages: append(msgs, "}]"...), gen: req.gen, thinkBudget: -1, stream: req.stream,
		hookKey: key, hookEndpoint: "/v1/completions"}
	jh, err := s.requestHooks(cr)
	if err != nil {
		return nil, err
	}
	req.gen.model, req.gen.maxTokens = cr.gen.model, cr.gen.maxTokens
	jh.noCalls = true
	return jh, nil
}

// budgetHook lets the thinking_budget hook replace the resolved budget.
func (s *Server) budgetHook(jh *jobHooks, budget int) (int, *APIError) {
	if jh == nil || s.cfg.Hooks.Thinking == nil {
		return budget, nil
	}
	b, ok, err := s.cfg.Hooks.Thinking.ThinkingBudget(jh.req)
	if err != nil {
		return 0, s.hookError("thinking_budget", err)
	}
	if !ok {
		return budget, nil
	}
	return max(b, -1), nil
}

// jobHooksApply runs the sampling and grammar hooks on a built job and
// attaches the hook state to it.
func (s *Server) jobHooksApply(jh *jobHooks, j *job) *APIError {
	if jh == nil {
		return nil
	}
	j.hooks = jh
	h := s.cfg.Hooks
	if h.Sampling != nil {
		ov, err := h.Sampling.Sampling(jh.req)
		if err != nil {
			return s.hookError("sampling", err)
		}
		s.applySampling(j, &ov)
	}
	if h.Grammar != nil {
		g, err := h.Grammar.Grammar(jh.req)
		if err != nil {
			return s.hookError("grammar", err)
		}
		if e := s.hookGrammar(j, g); e != nil {
			return e
		}
	}
	return nil
}

func (s *Server) applySampling(j *job, ov *SamplingOverrides) {
	p := &j.sampling
	set := func(dst *float32, v *float64) {
		if v != nil {
			*dst = float32(*v)
		}
	}
	set(&p.Temperature, ov.Temperature)
	set(&p.TopP, ov.TopP)
	set(&p.MinP, ov.MinP)
	set(&p.PresencePenalty, ov.PresencePenalty)
	set(&p.FrequencyPenalty, ov.FrequencyPenalty)
	set(&p.RepetitionPenalty, ov.RepetitionPenalty)
	if ov.TopK != nil {
		p.TopK = *ov.TopK
	}
	if len(ov.LogitBias) > 0 {
		lb := maps.Clone(p.LogitBias) // the request's map may be shared
		if lb == nil {
			lb = make(map[int32]float32, len(ov.LogitBias))
		}
		for text, bias := range ov.LogitBias {
			if ids := s.eng.Tokenizer.Encode(text); len(ids) > 0 {
				lb[ids[0]] = float32(bias)
			}
		}
		p.LogitBias = lb
	}
	if len(ov.Stop) > 0 {
		j.stop = append(append([]string(nil), j.stop...), ov.Stop...)
	}
}

// toolParser is what the pipeline feeds the reply's content to.
type toolParser interface {
	Feed(chunk string) []toolcall.Event
	Finish() []toolcall.Event
}

// newToolParser is the built-in parser, or the script's when it handles
// the job's format.
func (s *Server) newToolParser(j *job) toolParser {
	if h := s.cfg.Hooks; h != nil && h.Tools != nil && h.Tools.Handles(j.toolFormat.String()) {
		if st, ok := h.Tools.(ToolCallStreamer); ok && j.hooks != nil && j.hooks.req.Stream && st.StreamsToolCalls(j.toolFormat.String()) {
			return &hookToolParser{stream: st.NewToolCallStream(j.tools)}
		}
		return &hookToolParser{p: h.Tools, tools: j.tools}
	}
	return toolcall.NewParser(j.toolFormat, j.tools)
}

// hookToolParser runs a script's parser: a stream's pieces as they are
// decided, or else the whole content at the end.
type hookToolParser struct {
	p      ToolCallParser
	stream ToolCallStream
	tools  []toolcall.Tool
	buf    strings.Builder
	err    error
	ncalls int
	evs    []toolcall.Event
}

func (h *hookToolParser) Feed(chunk string) []toolcall.Event {
	if h.stream != nil {
		return h.feedStream(chunk, false)
	}
	h.buf.WriteString(chunk)
	return nil
}

// feedStream turns the stream's pieces into parser events (a call's
// arguments in one fragment). After an error nothing more is parsed.
func (h *hookToolParser) feedStream(chunk string, final bool) []toolcall.Event {
	if h.err != nil {
		return nil
	}
	pieces, err := h.stream.Feed(chunk, final)
	if err != nil {
		h.err = err
		return nil
	}
	h.evs = h.evs[:0]
	for _, pc := range pieces {
		if pc.Call == nil {
			if pc.Content != "" {
				h.evs = append(h.evs, toolcall.Event{Kind: toolcall.Content, Text: pc.Content})
			}
			continue
		}
		i := h.ncalls
		h.ncalls++
		h.evs = append(h.evs, toolcall.Event{Kind: toolcall.CallStart, Index: i, Name: pc.Call.Name},
			toolcall.Event{Kind: toolcall.CallArgs, Index: i, ArgsDelta: pc.Call.Arguments},
			toolcall.Event{Kind: toolcall.CallEnd, Index: i})
	}
	return h.evs
}

func (h *hookToolParser) Finish() []toolcall.Event {
	if h.stream != nil {
		return h.feedStream("", true)
	}
	calls, rest, err := h.p.ParseToolCalls(h.buf.String(), h.tools)
	if err != nil {
		h.err = err
		return nil
	}
	evs := make([]toolcall.Event, 0, 1+3*len(calls))
	if rest != "" {
		evs = append(evs, toolcall.Event{Kind: toolcall.Content, Text: rest})
	}
	for i, c := range calls {
		evs = append(evs, toolcall.Event{Kind: toolcall.CallStart, Index: i, Name: c.Name},
			toolcall.Event{Kind: toolcall.CallArgs, Index: i, ArgsDelta: c.Arguments},
			toolcall.Event{Kind: toolcall.CallEnd, Index: i})
	}
	return evs
}

// wrapEmit collects the reply for the editor and observers. With an editor
// the outputs are held back (streamed or not): finishHooks sends them once
// the editor has run.
func (j *job) wrapEmit(emit func(*output) error) func(*output) error {
	jh := j.hooks
	if jh == nil || !jh.collect {
		return emit
	}
	jh.emit = emit
	return func(o *output) error {
		switch o.kind {
		case outContent:
			jh.content.WriteString(o.text)
		case outReasoning:
			jh.reasoning.WriteString(o.text)
		case outCallStart:
			for len(jh.calls) <= o.index {
				jh.calls = append(jh.calls, toolcall.Call{})
			}
			jh.calls[o.index].Name = o.name
		case outCallArgs:
			if o.index < len(jh.calls) {
				jh.calls[o.index].Arguments += o.text
			}
		}
		if jh.hold {
			jh.held = append(jh.held, heldOutput{kind: o.kind, text: strings.Clone(o.text), id: strings.Clone(o.id),
				name: strings.Clone(o.name), index: o.index, logprobs: append([]tokenLogprob(nil), o.logprobs...)})
			return nil
		}
		return emit(o)
	}
}

// release sends the held outputs to the encoder, with the editor's edit
// (nil: unchanged): an edited content replaces the content outputs (as one
// output, where the first content or call was, carrying their logprobs),
// replaced calls are sent after it with new ids. A failed send ends the
// reply as cancelled.
func (s *Server) release(jh *jobHooks, ed *ResponseEdit, res *result) {
	held := jh.held
	jh.held = nil
	newContent := ed != nil && ed.Content != nil
	newCalls := ed != nil && ed.ReplaceCalls && !jh.noCalls
	var o output
	send := func(h *heldOutput) bool {
		o = output{kind: h.kind, text: h.text, index: h.index, id: h.id, name: h.name, logprobs: h.logprobs}
		if err := jh.emit(&o); err != nil {
			res.writeErr = err
			if res.finish != "error" {
				res.finish = "cancelled"
			}
			return false
		}
		return true
	}
	var lps []tokenLogprob // the replaced content's
	for i := range held {
		if held[i].kind == outContent && newContent {
			lps = append(lps, held[i].logprobs...)
		}
	}
	placed := !newContent
	place := func() bool {
		placed = true
		if *ed.Content == "" {
			res.tailLogprobs = append(lps, res.tailLogprobs...)
			return true
		}
		return send(&heldOutput{kind: outContent, text: *ed.Content, logprobs: lps})
	}
	for i := range held {
		h := &held[i]
		switch h.kind {
		case outContent:
			if newContent {
				if !placed && !place() {
					return
				}
				continue
			}
		case outCallStart, outCallArgs:
			if !placed && !place() {
				return
			}
			if newCalls {
				if len(h.logprobs) > 0 {
					res.tailLogprobs = append(append([]tokenLogprob(nil), h.logprobs...), res.tailLogprobs...)
				}
				continue
			}
		}
		if !send(h) {
			return
		}
	}
	if !placed && !place() {
		return
	}
	if newCalls {
		for i, c := range ed.ToolCalls {
			if !send(&heldOutput{kind: outCallStart, index: i, id: newCallID(), name: c.Name}) ||
				!send(&heldOutput{kind: outCallArgs, index: i, text: c.Arguments}) {
				return
			}
		}
	}
}

// finishHooks runs at the end of a generation: it fails the result when
// the script tool parser failed, then runs the editor, sends the held
// (edited) outputs, and runs the observers.
func (s *Server) finishHooks(j *job, p *pipeline, res *result) {
	if hp, ok := p.tools.(*hookToolParser); ok && hp.err != nil {
		res.finish, res.err = "error", s.hookError("parse_tool_calls", hp.err)
	}
	jh := j.hooks
	if jh == nil || !jh.collect {
		return
	}
	for i := range jh.calls {
		if jh.calls[i].Arguments == "" {
			jh.calls[i].Arguments = "{}"
		}
	}
	resp := &HookResponse{Content: jh.content.String(), Reasoning: jh.reasoning.String(), ToolCalls: jh.calls,
		Finish: res.finish, PromptTokens: res.promptTokens, CompletionTokens: res.completionTokens}
	h := s.cfg.Hooks
	var edit *ResponseEdit
	if h.Editor != nil && res.finish != "error" && res.writeErr == nil {
		ed, err := h.Editor.EditResponse(jh.req, resp)
		if err != nil {
			// nothing of the reply is sent: the editor may have been
			// meant to redact it
			res.finish, res.err = "error", s.hookError("on_response", err)
			jh.held = nil
			return
		}
		edit = &ed
		if ed.Content != nil {
			resp.Content = *ed.Content
		}
		if ed.ReplaceCalls && !jh.noCalls {
			resp.ToolCalls = ed.ToolCalls
			res.calls = len(ed.ToolCalls)
			switch {
			case len(ed.ToolCalls) > 0:
				res.finish = "tool_calls"
			case res.finish == "tool_calls":
				res.finish = "stop"
			}
			resp.Finish = res.finish
		}
		if len(ed.Tags) > 0 {
			resp.Tags = ed.Tags
			res.tags = ed.Tags
			s.log.Info("response tags", "tags", ed.Tags)
		}
	}
	if jh.hold && res.writeErr == nil {
		s.release(jh, edit, res)
	}
	for _, o := range h.Observers {
		if err := o.ObserveCompletion(jh.req, resp); err != nil {
			s.log.Error("on_complete hook failed", "error", err.Error())
		}
	}
}

// handlePlugin serves /plugins/<name>/<path> through the plugin handlers.
func (s *Server) handlePlugin(c *fiber.Ctx) error {
	h := s.cfg.Hooks
	if h == nil || h.HTTP == nil {
		return notFound("no plugin handles " + c.Path())
	}
	rest := strings.TrimPrefix(c.Path(), "/plugins/")
	name, path, _ := strings.Cut(rest, "/")
	r := &PluginRequest{Plugin: strings.Clone(name), Path: "/" + path, Method: strings.Clone(c.Method()),
		Query: string(c.Request().URI().QueryString()), APIKey: strings.Clone(requestKey(c)),
		Body: append([]byte(nil), c.Body()...)}
	resp, found, err := h.HTTP.ServePlugin(r)
	if err != nil {
		return s.hookError("plugin "+r.Plugin, err)
	}
	if !found {
		return notFound("no plugin handles " + c.Path())
	}
	if resp.Status == 0 {
		resp.Status = 200
	}
	ct := resp.ContentType
	if ct == "" {
		ct = fiber.MIMETextPlainCharsetUTF8
	}
	c.Set(fiber.HeaderContentType, ct)
	return c.Status(resp.Status).Send(resp.Body)
}
