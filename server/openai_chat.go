package server

import (
	"bufio"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
)

// handleChat serves POST /v1/chat/completions.
func (s *Server) handleChat(c *fiber.Ctx) error {
	arrived := time.Now()
	req, err := decodeChat(string(c.Body()), s.vocab)
	if err != nil {
		return err
	}
	req.hookKey, req.hookEndpoint = strings.Clone(requestKey(c)), "/v1/chat/completions"
	j, err := s.chatJob(req)
	if err != nil {
		return err
	}
	ri := info(c)
	enc := &chatEncoder{s: s, id: newID("chatcmpl-"), created: arrived.Unix(), logprobs: req.logprobs, asIDs: req.gen.tokensAsIDs,
		usageNull: req.stream && req.includeUsage}
	ri.entry.ID, ri.entry.Model, ri.entry.Stream = enc.id, s.modelName, req.stream
	ri.entry.PromptTokens = len(j.prompt)
	g, err := s.submit(j, c.Context().Conn(), arrived)
	if err != nil {
		return err
	}
	if !req.stream {
		res := g.run(enc.collect)
		fillEntry(&ri.entry, res)
		if res.writeErr != nil {
			return nil // nobody is listening
		}
		if res.finish == "error" {
			return engineError(res)
		}
		c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSONCharsetUTF8)
		return c.Send(enc.appendResponse(nil, res))
	}
	ri.deferred = true
	entry := ri.entry // c is recycled once the handler returns
	setSSEHeaders(c)
	includeUsage := req.includeUsage
	c.Context().SetBodyStreamWriter(func(w *bufio.Writer) {
		s.guardStream(w, func() {
			enc.w = w
			enc.writeRole()
			res := g.run(enc.stream)
			if res.writeErr == nil {
				enc.writeEnd(res, includeUsage)
			}
			entry.Status = 200
			fillEntry(&entry, res)
			s.logRequest(&entry)
		})
	})
	return nil
}

func setSSEHeaders(c *fiber.Ctx) {
	c.Set(fiber.HeaderContentType, "text/event-stream; charset=utf-8")
	c.Set(fiber.HeaderCacheControl, "no-cache")
	c.Set("X-Accel-Buffering", "no") // proxies must not buffer the stream
}

// engineError is the error for a generation the engine failed.
func engineError(res *result) *APIError {
	if ae, ok := res.err.(*APIError); ok {
		return ae // a hook failed
	}
	msg := "generation failed"
	if res.err != nil {
		msg = res.err.Error()
	}
	return &APIError{Status: 500, Type: "server_error", Code: "engine_error", Message: msg}
}

// fillEntry copies a result into a request-log entry.
func fillEntry(e *LogEntry, res *result) {
	st := &res.stats
	e.PromptTokens, e.CompletionTokens, e.CachedTokens = res.promptTokens, res.completionTokens, res.cached
	e.FinishReason = res.finish
	e.Tags = res.tags
	e.Preemptions = st.Preemptions
	e.Timings = LogTimings{Queue: ms(st.Queue), Prefill: ms(st.Prefill), TTFT: ms(st.TTFT), Decode: ms(st.Decode), Total: ms(st.Total)}
	switch {
	case res.err != nil:
		m := res.err.Error()
		e.Error = &m
	case res.writeErr != nil:
		m := res.writeErr.Error()
		e.Error = &m
	}
}

// chatEncoder writes OpenAI chat-completion responses: whole (collect then
// appendResponse) or as SSE chunks (writeRole, stream, writeEnd). Chunks are
// built by appending into one reused buffer from a prefix made once.
type chatEncoder struct {
	s        *Server
	id       string
	created  int64
	logprobs bool
	asIDs    bool // token strings as "token_id:N"
	// usageNull: stream_options.include_usage, under which every chunk
	// before the usage chunk carries "usage": null, as OpenAI's do.
	usageNull bool

	// non-streaming (reasoning also when streaming: for its token count)
	content, reasoning strings.Builder
	calls              []collectedCall
	lps                []tokenLogprob

	// streaming
	w      *bufio.Writer
	prefix []byte // data: {"id":…,"choices":[{"index":0,
	buf    []byte
}

type collectedCall struct {
	id, name string
	args     strings.Builder
}

func (e *chatEncoder) collect(o *output) error {
	switch o.kind {
	case outContent:
		e.content.WriteString(o.text)
	case outReasoning:
		e.reasoning.WriteString(o.text)
	case outCallStart:
		for len(e.calls) <= o.index {
			e.calls = append(e.calls, collectedCall{})
		}
		e.calls[o.index].id, e.calls[o.index].name = o.id, o.name
	case outCallArgs:
		if o.index < len(e.calls) {
			e.calls[o.index].args.WriteString(o.text)
		}
	}
	if e.logprobs {
		e.lps = append(e.lps, o.logprobs...)
	}
	return nil
}

// appendHead appends the fields every chat object starts with.
func (e *chatEncoder) appendHead(b []byte, object string) []byte {
	b = append(b, `{"id":`...)
	b = appendString(b, e.id)
	b = append(b, `,"object":"`...)
	b = append(b, object...)
	b = append(b, `","created":`...)
	b = appendInt(b, e.created)
	b = append(b, `,"model":`...)
	b = appendString(b, e.s.modelName)
	return b
}

func (e *chatEncoder) appendResponse(b []byte, res *result) []byte {
	b = e.appendHead(b, "chat.completion")
	b = append(b, `,"choices":[{"index":0,"message":{"role":"assistant","content":`...)
	if e.content.Len() == 0 && len(e.calls) > 0 {
		b = append(b, "null"...)
	} else {
		b = appendString(b, e.content.String())
	}
	if e.reasoning.Len() > 0 {
		b = append(b, `,"reasoning_content":`...)
		b = appendString(b, e.reasoning.String())
		b = append(b, `,"reasoning":`...)
		b = appendString(b, e.reasoning.String())
	}
	if len(e.calls) > 0 {
		b = append(b, `,"tool_calls":[`...)
		for i := range e.calls {
			cc := &e.calls[i]
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"id":`...)
			b = appendString(b, cc.id)
			b = append(b, `,"type":"function","function":{"name":`...)
			b = appendString(b, cc.name)
			b = append(b, `,"arguments":`...)
			args := cc.args.String()
			if args == "" {
				args = "{}"
			}
			b = appendString(b, args)
			b = append(b, "}}"...)
		}
		b = append(b, ']')
	}
	b = append(b, `},"logprobs":`...)
	if e.logprobs {
		b = e.appendLogprobs(b, append(e.lps, res.tailLogprobs...))
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"finish_reason":`...)
	b = appendString(b, openAIFinish(res.finish))
	if res.stopString != "" {
		b = append(b, `,"stop_reason":`...)
		b = appendString(b, res.stopString)
	}
	b = append(b, `}],"usage":`...)
	b = appendChatUsage(b, res, e.reasoningTokens())
	return append(b, '}')
}

// reasoningTokens counts the reasoning output's tokens for
// usage.completion_tokens_details (re-encoded, as the Responses API's
// encoder does: the pipeline does not count tokens per output kind).
func (e *chatEncoder) reasoningTokens() int {
	if e.reasoning.Len() == 0 || e.s == nil || e.s.eng == nil || e.s.eng.Tokenizer == nil {
		return 0
	}
	return len(e.s.eng.Tokenizer.Encode(e.reasoning.String()))
}

// appendChatUsage is appendUsage with completion_tokens_details, which
// chat completions report (reasoning_tokens: the thinking's share of
// completion_tokens).
func appendChatUsage(b []byte, res *result, reasoningTokens int) []byte {
	b = appendUsage(b, res)
	b = append(b[:len(b)-1], `,"completion_tokens_details":{"reasoning_tokens":`...)
	b = appendInt(b, int64(reasoningTokens))
	return append(b, "}}"...)
}

// openAIFinish maps the engine's reasons to OpenAI's; a cancelled request
// that still answers (a server shutdown) reads as a length cut.
func openAIFinish(f string) string {
	switch f {
	case "stop", "length", "tool_calls":
		return f
	case "cancelled":
		return "length"
	default:
		return "stop"
	}
}

func appendUsage(b []byte, res *result) []byte {
	b = append(b, `{"prompt_tokens":`...)
	b = appendInt(b, int64(res.promptTokens))
	b = append(b, `,"completion_tokens":`...)
	b = appendInt(b, int64(res.completionTokens))
	b = append(b, `,"total_tokens":`...)
	b = appendInt(b, int64(res.promptTokens+res.completionTokens))
	b = append(b, `,"prompt_tokens_details":{"cached_tokens":`...)
	b = appendInt(b, int64(res.cached))
	return append(b, "}}"...)
}

// appendLogprobs appends {"content":[{token, logprob, bytes, top_logprobs}]}.
func (e *chatEncoder) appendLogprobs(b []byte, lps []tokenLogprob) []byte {
	b = append(b, `{"content":[`...)
	for i := range lps {
		if i > 0 {
			b = append(b, ',')
		}
		lp := &lps[i]
		b = e.s.appendTokenLogprob(b, lp.id, lp.logprob, e.asIDs)
		b = b[:len(b)-1] // reopen the object for top_logprobs
		b = append(b, `,"top_logprobs":[`...)
		for k, t := range lp.top {
			if k > 0 {
				b = append(b, ',')
			}
			b = e.s.appendTokenLogprob(b, t.ID, t.LogProb, e.asIDs)
		}
		b = append(b, "]}"...)
	}
	return append(b, `],"refusal":null}`...)
}

// appendTokenLogprob appends {"token":…,"logprob":…,"bytes":[…]}.
func (s *Server) appendTokenLogprob(b []byte, id int32, lp float32, asID bool) []byte {
	raw := s.eng.Tokenizer.TokenBytes(id)
	b = append(b, `{"token":`...)
	if asID {
		b = append(b, `"token_id:`...)
		b = appendInt(b, int64(id))
		b = append(b, '"')
	} else {
		b = appendString(b, bytesView(raw))
	}
	b = append(b, `,"logprob":`...)
	b = appendFloat(b, float64(lp), 32)
	b = append(b, `,"bytes":[`...)
	for i, c := range raw {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendInt(b, int64(c))
	}
	return append(b, "]}"...)
}

// writeRole sends the first chunk: the assistant role with empty content.
func (e *chatEncoder) writeRole() {
	b := e.appendHead(append(e.buf[:0], "data: "...), "chat.completion.chunk")
	b = append(b, `,"choices":[{"index":0,`...)
	e.prefix = append(e.prefix[:0], b...)
	b = append(b, `"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]`...)
	b = closeChunk(b, e.usageNull)
	e.buf = b
	e.w.Write(b)
	e.w.Flush()
}

// stream writes one output as a chunk and flushes it to the client.
func (e *chatEncoder) stream(o *output) error {
	b := append(e.buf[:0], e.prefix...)
	b = append(b, `"delta":{`...)
	switch o.kind {
	case outContent:
		b = append(b, `"content":`...)
		b = appendString(b, o.text)
	case outReasoning:
		e.reasoning.WriteString(o.text) // for the usage chunk's reasoning_tokens
		b = append(b, `"reasoning_content":`...)
		b = appendString(b, o.text)
		b = append(b, `,"reasoning":`...)
		b = appendString(b, o.text)
	case outCallStart:
		b = append(b, `"tool_calls":[{"index":`...)
		b = appendInt(b, int64(o.index))
		b = append(b, `,"id":`...)
		b = appendString(b, o.id)
		b = append(b, `,"type":"function","function":{"name":`...)
		b = appendString(b, o.name)
		b = append(b, `,"arguments":""}}]`...)
	case outCallArgs:
		b = append(b, `"tool_calls":[{"index":`...)
		b = appendInt(b, int64(o.index))
		b = append(b, `,"function":{"arguments":`...)
		b = appendString(b, o.text)
		b = append(b, "}}]"...)
	}
	b = append(b, `},"logprobs":`...)
	if e.logprobs && len(o.logprobs) > 0 {
		b = e.appendLogprobs(b, o.logprobs)
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"finish_reason":null}]`...)
	b = closeChunk(b, e.usageNull)
	e.buf = b
	if _, err := e.w.Write(b); err != nil {
		return err
	}
	return e.w.Flush()
}

// closeChunk ends a chunk whose choices array is closed: with
// "usage": null when the stream ends with a usage chunk.
func closeChunk(b []byte, usageNull bool) []byte {
	if usageNull {
		b = append(b, `,"usage":null`...)
	}
	return append(b, "}\n\n"...)
}

// writeEnd sends the finish chunk (or an error event), the usage chunk when
// asked for, and [DONE].
func (e *chatEncoder) writeEnd(res *result, includeUsage bool) {
	b := e.buf[:0]
	if res.finish == "error" {
		b = append(b, "data: "...)
		b = appendErrorJSON(b, engineError(res))
		b = append(b, "\n\n"...)
	} else {
		b = append(b, e.prefix...)
		b = append(b, `"delta":{},"logprobs":`...)
		if e.logprobs && len(res.tailLogprobs) > 0 {
			b = e.appendLogprobs(b, res.tailLogprobs)
		} else {
			b = append(b, "null"...)
		}
		b = append(b, `,"finish_reason":`...)
		b = appendString(b, openAIFinish(res.finish))
		if res.stopString != "" {
			b = append(b, `,"stop_reason":`...)
			b = appendString(b, res.stopString)
		}
		b = append(b, "}]"...)
		b = closeChunk(b, e.usageNull)
		if includeUsage {
			b = append(b, "data: "...)
			b = e.appendHead(b, "chat.completion.chunk")
			b = append(b, `,"choices":[],"usage":`...)
			b = appendChatUsage(b, res, e.reasoningTokens())
			b = append(b, "}\n\n"...)
		}
	}
	b = append(b, "data: [DONE]\n\n"...)
	e.buf = b
	e.w.Write(b)
	e.w.Flush()
}
