package server

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
)

// The OpenAI Responses API: POST /v1/responses (whole or streamed),
// GET and DELETE /v1/responses/{id}, over the chat-completions core.
// Responses made with store (the default) are kept in the server's
// ResponseStore, so that a request can continue one with
// previous_response_id.

func responseNotFound(id, param string) *APIError {
	e := &APIError{Status: 404, Type: "invalid_request_error", Param: param, Code: "not_found",
		Message: "no response with id " + quote(id) + " is stored on this server"}
	if param != "" {
		e.Code = "previous_response_not_found"
	}
	return e
}

func storeError(err error) *APIError {
	return &APIError{Status: 500, Type: "server_error", Code: "store_error", Message: "the response store failed: " + err.Error()}
}

// handleResponses serves POST /v1/responses.
func (s *Server) handleResponses(c *fiber.Ctx) error {
	arrived := time.Now()
	rr, err := decodeResponses(string(c.Body()))
	if err != nil {
		return err
	}
	if err := s.checkModel(rr.model); err != nil {
		return err
	}
	// The messages: instructions, the stored conversation, the new input.
	var prior []byte // elements of the stored conversation array
	if rr.previousID != "" {
		prev, gerr := s.cfg.ResponseStore.Get(rr.previousID)
		switch {
		case errors.Is(gerr, ErrResponseNotFound):
			return responseNotFound(rr.previousID, "previous_response_id")
		case gerr != nil:
			return storeError(gerr)
		}
		prior = arrayElements(prev.Conversation)
	}
	msgs := []byte{'['}
	n := 0
	if rr.hasInstr && rr.instructions != "" {
		msgs = appendConvMsg(msgs, &convMsg{role: "system", content: rr.instructions})
		n++
	}
	if len(prior) > 0 {
		if n > 0 {
			msgs = append(msgs, ',')
		}
		msgs = append(msgs, prior...)
		n++
	}
	msgs = appendConvMsgs(msgs, n, rr.input)
	rr.chat.messages = json.RawMessage(append(msgs, ']'))

	rr.chat.hookKey, rr.chat.hookEndpoint = strings.Clone(requestKey(c)), "/v1/responses"
	rr.chat.stream = rr.stream // for the hooks' request.stream
	j, err := s.chatJob(rr.chat)
	if err != nil {
		return err
	}
	s.clampToContext(j)
	enc := &responsesEncoder{s: s, req: rr, id: newID("resp_"), created: arrived.Unix(), model: s.responseModel(rr.model)}
	ri := info(c)
	ri.entry.ID, ri.entry.Model, ri.entry.Stream = enc.id, s.modelName, rr.stream
	ri.entry.PromptTokens = len(j.prompt)
	g, err := s.submit(j, c.Context().Conn(), arrived)
	if err != nil {
		return err
	}
	save := func(final []byte) error {
		if !rr.store {
			return nil
		}
		conv := append([]byte{'['}, prior...)
		k := 0
		if len(prior) > 0 {
			k = 1
		}
		conv = appendConvMsgs(conv, k, rr.input)
		conv = appendConvMsgs(conv, 1, enc.conversation())
		return s.cfg.ResponseStore.Put(&StoredResponse{ID: enc.id, Response: final, Conversation: append(conv, ']')})
	}
	if !rr.stream {
		res := g.run(enc.emit)
		fillEntry(&ri.entry, res)
		if res.writeErr != nil {
			return nil
		}
		if res.finish == "error" {
			return engineError(res)
		}
		final := enc.appendResponse(nil, res)
		if err := save(final); err != nil {
			return storeError(err)
		}
		c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSONCharsetUTF8)
		return c.Send(final)
	}
	ri.deferred = true
	entry := ri.entry
	setSSEHeaders(c)
	c.Context().SetBodyStreamWriter(func(w *bufio.Writer) {
		s.guardStream(w, func() {
			enc.w = w
			enc.start()
			res := g.run(enc.emit)
			if res.writeErr == nil {
				if res.finish != "error" {
					// Stored before the last event: a client may continue
					// the response (previous_response_id) as soon as it
					// reads response.completed.
					enc.beforeFinal = func(final []byte) {
						if err := save(final); err != nil {
							s.log.Error("storing a response", "id", enc.id, "error", err)
						}
					}
				}
				enc.end(res)
			}
			entry.Status = 200
			fillEntry(&entry, res)
			s.logRequest(&entry)
		})
	})
	return nil
}

// handleGetResponse serves GET /v1/responses/{id}.
func (s *Server) handleGetResponse(c *fiber.Ctx) error {
	id := c.Params("id")
	r, err := s.cfg.ResponseStore.Get(id)
	switch {
	case errors.Is(err, ErrResponseNotFound):
		return responseNotFound(id, "")
	case err != nil:
		return storeError(err)
	}
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSONCharsetUTF8)
	return c.Send(r.Response)
}

// handleDeleteResponse serves DELETE /v1/responses/{id}.
func (s *Server) handleDeleteResponse(c *fiber.Ctx) error {
	id := c.Params("id")
	err := s.cfg.ResponseStore.Delete(id)
	switch {
	case errors.Is(err, ErrResponseNotFound):
		return responseNotFound(id, "")
	case err != nil:
		return storeError(err)
	}
	b := append([]byte(`{"id":`), quote(id)...)
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSONCharsetUTF8)
	return c.Send(append(b, `,"object":"response","deleted":true}`...))
}

// arrayElements returns the elements of a JSON array as raw text (without
// the brackets), nil for an empty or malformed array.
func arrayElements(arr []byte) []byte {
	arr = bytes.TrimSpace(arr)
	if len(arr) < 2 || arr[0] != '[' || arr[len(arr)-1] != ']' || !json.Valid(arr) {
		return nil
	}
	inner := bytes.TrimSpace(arr[1 : len(arr)-1])
	if len(inner) == 0 {
		return nil
	}
	return inner
}
