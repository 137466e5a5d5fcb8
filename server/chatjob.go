package server

import (
	"encoding/json"
	"strings"

	"github.com/infernix/infernix/engine/chat"
	"github.com/infernix/infernix/engine/reasoning"
	"github.com/infernix/infernix/engine/toolcall"
)

// Thinking budgets for reasoning_effort (when the request sets no explicit
// thinking_budget): none and minimal turn thinking off; low and medium cap
// it; high and xhigh leave it uncapped (the server default still applies).
var effortBudget = map[string]int{"low": 512, "medium": 2048}

// thinkingBudget resolves the request's budget: thinking_budget or
// max_thinking_tokens, else reasoning_effort, else the server default
// (< 0: none).
func (s *Server) thinkingBudget(req *chatRequest) int {
	switch {
	case req.thinkBudget >= 0:
		return req.thinkBudget
	case req.reasoningEffort == "none" || req.reasoningEffort == "minimal":
		return 0
	}
	if b, ok := effortBudget[req.reasoningEffort]; ok {
		return b
	}
	if s.cfg.DefaultThinkingBudget > 0 {
		return s.cfg.DefaultThinkingBudget
	}
	return -1
}

// prompt is a rendered chat prompt.
type prompt struct {
	text string // the whole prompt: the template's output plus prefill
	// prefill is what the server appended after the template's generation
	// prompt (a think block closed early, a forced call's opening); the
	// output parsers see it as the start of the reply.
	prefill string
	// openInPrompt: the template's generation prompt left <think> open.
	openInPrompt bool
	// inThink: the reply starts inside the think block (openInPrompt and no
	// prefill closed it).
	inThink bool
}

// renderChat renders the request through the chat template.
//
// A thinking budget of 0 turns thinking off: the template is rendered with
// enable_thinking false, and should it still open <think>, the prefill
// closes it. A forced tool call (tool_choice required or a named function)
// is made without constrained decoding by prefilling the call's opening,
// after closing an open think block.
func (s *Server) renderChat(req *chatRequest, budget int) (*prompt, *APIError) {
	t := s.eng.Template
	if t == nil {
		return nil, errNoTemplate
	}
	tools, kwargs := templateArgs(req, budget)
	out, rerr := t.Render(chat.Request{Messages: req.messages, Tools: tools, AddGenerationPrompt: req.addGenerationPrompt,
		Kwargs: kwargs, BOSToken: s.eng.BOS(), EOSToken: s.eng.EOS()})
	if rerr != nil {
		return nil, &APIError{Status: 400, Type: "invalid_request_error", Param: "messages", Code: "template_error",
			Message: "the chat template rejected the request: " + rerr.Error()}
	}
	p := &prompt{}
	if !req.addGenerationPrompt {
		p.text = out
		return p, nil
	}
	if s.thinkOpen >= 0 {
		p.openInPrompt = reasoning.OpenInPrompt(out, s.thinkOpenText)
		p.inThink = p.openInPrompt
	}
	forced := req.toolChoice == "required" || req.toolChoice == "function"
	switch {
	case p.openInPrompt && (forced || budget == 0):
		p.prefill = reasoning.ForcedClose
		p.inThink = false
	case forced && s.thinkOpen >= 0 && !strings.HasSuffix(strings.TrimRight(out, " \t\r\n"), s.thinkCloseText):
		// Thinking on under a template that leaves the opener to the model
		// (Qwen3): a forced call skips the reasoning as the template itself
		// does with thinking off, with an empty block, so that the call
		// opens where the model was trained to open one.
		p.prefill = s.thinkOpenText + "\n\n" + s.thinkCloseText + "\n\n"
	}
	if forced {
		p.prefill += s.forcedCallOpening(req)
	}
	p.text = out + p.prefill
	return p, nil
}

// templateArgs are the tools and kwargs the template renders req with: no
// tools under tool_choice none (none offered, none parsed), and
// enable_thinking false under a thinking budget of 0.
func templateArgs(req *chatRequest, budget int) (json.RawMessage, map[string]json.RawMessage) {
	tools := req.tools
	if req.toolChoice == "none" {
		tools = nil
	}
	kwargs := req.kwargs
	if budget == 0 {
		kwargs = make(map[string]json.RawMessage, len(req.kwargs)+1)
		for k, v := range req.kwargs {
			kwargs[k] = v
		}
		kwargs["enable_thinking"] = json.RawMessage("false")
	}
	return tools, kwargs
}

// forcedCallOpening is the start of a call in the model's format: the
// opening tag, and for a named function its name.
func (s *Server) forcedCallOpening(req *chatRequest) string {
	var b strings.Builder
	b.WriteString(toolCallTag + "\n")
	if req.toolChoice == "function" {
		if s.toolFormat == toolcall.FormatXML {
			b.WriteString("<function=" + req.toolName + ">\n")
		} else {
			// End on a pre-tokenizer boundary: after `":` the model writes the
			// ` {"` token it always wrote there; a trailing space would be a
			// token it never saw in that place.
			nameJSON := appendString(nil, req.toolName)
			b.WriteString(`{"name": ` + string(nameJSON) + `, "arguments":`)
		}
	}
	return b.String()
}

// chatJob turns a decoded chat request into a job.
func (s *Server) chatJob(req *chatRequest) (*job, *APIError) {
	jh, err := s.requestHooks(req)
	if err != nil {
		return nil, err
	}
	budget := s.thinkingBudget(req)
	if budget, err = s.budgetHook(jh, budget); err != nil {
		return nil, err
	}
	p, err := s.renderChat(req, budget)
	if err != nil {
		return nil, err
	}
	ids := s.eng.Tokenizer.Encode(p.text)
	j := &job{
		prompt:         ids,
		prefill:        p.prefill,
		maxTokens:      s.maxTokensFor(req.gen.maxTokens, len(ids)),
		maxTokensParam: req.gen.maxTokensParam,
		sampling:       s.samplingParams(&req.gen),
		ignoreEOS:      req.gen.ignoreEOS,
		stop:           req.gen.stop,
		stopTokens:     req.gen.stopTokenIDs,
		logprobs:       -1,
		skipSpecial:    req.gen.skipSpecialTokens,
		thinkBudget:    budget,
	}
	if s.eng.Sched != nil && s.eng.Sched.KeepsSnapshots() {
		j.sharedPrefix = s.sharedPrefix(req, budget, ids)
	}
	if req.logprobs {
		j.logprobs = req.topLogprobs
	}
	if s.thinkOpen >= 0 {
		j.reasoning = true
		j.openInPrompt = p.openInPrompt
		j.inThink = p.inThink
		j.thinkClosed = strings.HasSuffix(strings.TrimRight(p.text, " \t\r\n"), s.thinkCloseText)
	}
	if len(req.toolList) > 0 && req.toolChoice != "none" {
		j.parseTools = true
		j.toolFormat = s.toolFormat
		j.tools = req.toolList
		j.singleCall = !req.parallelToolCalls
	}
	j.forcedCall = req.toolChoice == "required" || req.toolChoice == "function"
	if req.formatParam != "" && !j.forcedCall {
		if j.grammar, err = s.outputGrammar(&req.outputFormat); err != nil {
			return nil, err
		}
	}
	if j.grammar == nil && j.parseTools {
		if err := s.callConstraint(req, j); err != nil {
			return nil, err
		}
	}
	if err := s.jobHooksApply(jh, j); err != nil {
		return nil, err
	}
	return j, nil
}
