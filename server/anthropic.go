package server

import (
	"bufio"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
)

// The Anthropic Messages API: POST /v1/messages (whole or streamed) and
// POST /v1/messages/count_tokens, with errors in Anthropic's shape. The
// anthropic-version header is accepted whatever its value; keys come as
// x-api-key (see auth.go).

// isAnthropicPath says whether errors on path take Anthropic's shape.
func isAnthropicPath(path string) bool {
	return path == "/v1/messages" || strings.HasPrefix(path, "/v1/messages/")
}

// anthropicErrorType maps a status to Anthropic's error type.
func anthropicErrorType(e *APIError) string {
	switch e.Status {
	case 400:
		return "invalid_request_error"
	case 401:
		return "authentication_error"
	case 403:
		return "permission_error"
	case 404:
		return "not_found_error"
	case 413:
		return "request_too_large"
	case 429:
		return "rate_limit_error"
	case 503, 529:
		return "overloaded_error"
	}
	if e.Status >= 500 {
		return "api_error"
	}
	return "invalid_request_error"
}

// appendAnthropicError appends {"type":"error","error":{"type","message"}}.
func appendAnthropicError(b []byte, e *APIError) []byte {
	b = append(b, `{"type":"error","error":{"type":`...)
	b = appendString(b, anthropicErrorType(e))
	b = append(b, `,"message":`...)
	b = appendString(b, e.Message)
	return append(b, "}}"...)
}

// sendAnthropicError writes e as the response in Anthropic's shape.
func sendAnthropicError(c *fiber.Ctx, e *APIError) error {
	if e.RetryAfter > 0 {
		c.Set(fiber.HeaderRetryAfter, strconv.Itoa(e.RetryAfter))
	}
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSONCharsetUTF8)
	return c.Status(e.Status).Send(appendAnthropicError(nil, e))
}

// handleMessages serves POST /v1/messages.
func (s *Server) handleMessages(c *fiber.Ctx) error {
	arrived := time.Now()
	ar, err := decodeAnthropic(string(c.Body()), false)
	if err != nil {
		return err
	}
	if err := s.checkModel(ar.model); err != nil {
		return err
	}
	ar.chat.hookKey, ar.chat.hookEndpoint = strings.Clone(requestKey(c)), "/v1/messages"
	ar.chat.stream = ar.stream // for the hooks' request.stream
	j, prefilled, err := s.anthropicJob(ar)
	if err != nil {
		return err
	}
	s.clampToContext(j)
	enc := &anthropicEncoder{s: s, id: newID("msg_"), model: s.responseModel(ar.model), keepSpace: prefilled}
	ri := info(c)
	ri.entry.ID, ri.entry.Model, ri.entry.Stream = enc.id, s.modelName, ar.stream
	ri.entry.PromptTokens = len(j.prompt)
	g, err := s.submit(j, c.Context().Conn(), arrived)
	if err != nil {
		return err
	}
	if !ar.stream {
		res := g.run(enc.emit)
		fillEntry(&ri.entry, res)
		if res.writeErr != nil {
			return nil
		}
		if res.finish == "error" {
			return engineError(res)
		}
		c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSONCharsetUTF8)
		return c.Send(enc.appendMessage(nil, res))
	}
	ri.deferred = true
	entry := ri.entry
	setSSEHeaders(c)
	promptTokens := len(j.prompt)
	c.Context().SetBodyStreamWriter(func(w *bufio.Writer) {
		s.guardStreamAs(w, true, func() {
			enc.w = w
			enc.start(promptTokens)
			res := g.run(enc.emit)
			if res.writeErr == nil {
				enc.end(res)
			}
			entry.Status = 200
			fillEntry(&entry, res)
			s.logRequest(&entry)
		})
	})
	return nil
}

// handleCountTokens serves POST /v1/messages/count_tokens: the prompt's
// length as this server would render it.
func (s *Server) handleCountTokens(c *fiber.Ctx) error {
	ar, err := decodeAnthropic(string(c.Body()), true)
	if err != nil {
		return err
	}
	if err := s.checkModel(ar.model); err != nil {
		return err
	}
	p, err := s.renderChat(ar.chat, s.thinkingBudget(ar.chat))
	if err != nil {
		return err
	}
	n := len(s.eng.Tokenizer.Encode(p.text))
	b := append([]byte(`{"input_tokens":`), strconv.Itoa(n)...)
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	return c.Send(append(b, '}'))
}

// anthropicJob makes the request's job. A final assistant message is a
// prefill the model continues (Anthropic answers with the continuation
// only): the prompt is the conversation before it, the generation prompt,
// then its text, which the output parsers do not see. That needs a reply
// that starts outside a think block and no forced tool call; otherwise the
// message is rendered as an ordinary earlier turn.
func (s *Server) anthropicJob(ar *anthropicRequest) (j *job, prefilled bool, err *APIError) {
	if ar.prefill != "" {
		full := ar.chat.messages
		ar.chat.messages = ar.prefillMsgs
		j, err = s.chatJob(ar.chat)
		ar.chat.messages = full
		if err != nil {
			return nil, false, err
		}
		if !j.openInPrompt && j.prefill == "" {
			j.prompt = append(j.prompt, s.eng.Tokenizer.Encode(ar.prefill)...)
			return j, true, nil
		}
	}
	j, err = s.chatJob(ar.chat)
	return j, false, err
}
