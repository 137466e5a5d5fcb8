package server

import (
	"math"
	"strings"

	"github.com/gofiber/fiber/v2"
	"github.com/tidwall/gjson"
)

// handleHealth serves GET /health: 200 {"status":"ok"} while the engine
// accepts work (open without an API key, for load balancers).
func (s *Server) handleHealth(c *fiber.Ctx) error {
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	return c.SendString(`{"status":"ok"}`)
}

// handleMetrics serves GET /metrics (Prometheus text) and
// GET /metrics?format=json.
func (s *Server) handleMetrics(c *fiber.Ctx) error {
	if c.Query("format") == "json" {
		c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
		return c.Send(s.appendMetricsJSON(nil))
	}
	c.Set(fiber.HeaderContentType, "text/plain; version=0.0.4; charset=utf-8")
	return c.Send(s.appendPrometheus(nil))
}

func (s *Server) appendModel(b []byte) []byte {
	b = append(b, `{"id":`...)
	b = appendString(b, s.modelName)
	b = append(b, `,"object":"model","created":`...)
	b = appendInt(b, s.created)
	b = append(b, `,"owned_by":"infernix","max_model_len":`...)
	b = appendInt(b, int64(s.ctxLen))
	return append(b, '}')
}

// handleModels serves GET /v1/models.
func (s *Server) handleModels(c *fiber.Ctx) error {
	b := append([]byte(nil), `{"object":"list","data":[`...)
	b = s.appendModel(b)
	b = append(b, "]}"...)
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	return c.Send(b)
}

// handleModel serves GET /v1/models/{id}.
func (s *Server) handleModel(c *fiber.Ctx) error {
	if id := c.Params("+"); id != s.modelName {
		return notFound("model " + quote(id) + " does not exist; this server serves " + quote(s.modelName))
	}
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	return c.Send(s.appendModel(nil))
}

func quote(s string) string { return string(appendString(nil, s)) }

// handleTokenize serves POST /tokenize (vLLM's shape): {"prompt": text} or
// {"messages": [...], "tools"?, "chat_template_kwargs"?,
// "add_generation_prompt"?} → {"count", "max_model_len", "tokens"} plus
// "token_strs" with "return_token_strs": true.
func (s *Server) handleTokenize(c *fiber.Ctx) error {
	root, err := parseBody(string(c.Body()))
	if err != nil {
		return err
	}
	f := fieldsOf(root)
	var text string
	switch {
	case present(f["messages"]):
		req := &chatRequest{addGenerationPrompt: true}
		if err := decodeConversation(f, req); err != nil {
			return err
		}
		p, err := s.renderChat(req, -1)
		if err != nil {
			return err
		}
		text = p.text
	case present(f["prompt"]):
		p := f["prompt"]
		if p.Type != gjson.String {
			return fieldError("prompt", "must be a string")
		}
		text = p.Str
	default:
		return badRequest("prompt", "send \"prompt\" (text) or \"messages\" (a chat)")
	}
	strs, _, e := optBool(f, "return_token_strs", "return_token_strs")
	if e != nil {
		return e
	}
	ids := s.eng.Tokenizer.Encode(text)
	b := append([]byte(nil), `{"count":`...)
	b = appendInt(b, int64(len(ids)))
	b = append(b, `,"max_model_len":`...)
	b = appendInt(b, int64(s.ctxLen))
	b = append(b, `,"tokens":[`...)
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendInt(b, int64(id))
	}
	b = append(b, ']')
	if strs {
		b = append(b, `,"token_strs":[`...)
		for i, id := range ids {
			if i > 0 {
				b = append(b, ',')
			}
			tok, _ := s.eng.Tokenizer.Token(id)
			b = appendString(b, tok)
		}
		b = append(b, ']')
	}
	b = append(b, '}')
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	return c.Send(b)
}

// handleDetokenize serves POST /detokenize: {"tokens": [...]} →
// {"prompt": text}.
func (s *Server) handleDetokenize(c *fiber.Ctx) error {
	root, err := parseBody(string(c.Body()))
	if err != nil {
		return err
	}
	f := fieldsOf(root)
	if !present(f["tokens"]) {
		return badRequest("tokens", "tokens is required (an array of token ids)")
	}
	ids, err := tokenIDs(f["tokens"], "tokens", s.eng.Tokenizer.VocabSize())
	if err != nil {
		return err
	}
	b := append([]byte(nil), `{"prompt":`...)
	b = appendString(b, s.eng.Tokenizer.Decode(ids, false))
	b = append(b, '}')
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	return c.Send(b)
}

// handleApplyTemplate serves POST /apply-template (llama-server's shape):
// a chat request's messages, tools and chat_template_kwargs → {"prompt":
// the rendered text}, including any forced tool-call opening.
func (s *Server) handleApplyTemplate(c *fiber.Ctx) error {
	root, err := parseBody(string(c.Body()))
	if err != nil {
		return err
	}
	f := fieldsOf(root)
	req := &chatRequest{addGenerationPrompt: true, thinkBudget: -1}
	if err := decodeConversation(f, req); err != nil {
		return err
	}
	if v, set, e := optString(f, "reasoning_effort", "reasoning_effort"); e != nil {
		return e
	} else if set {
		req.reasoningEffort = strings.ToLower(v)
	}
	for _, name := range []string{"thinking_budget", "max_thinking_tokens"} {
		if v, set, e := optInt(f, name, name, 0, math.MaxInt32); e != nil {
			return e
		} else if set {
			req.thinkBudget = int(v)
		}
	}
	p, err := s.renderChat(req, s.thinkingBudget(req))
	if err != nil {
		return err
	}
	b := append([]byte(nil), `{"prompt":`...)
	b = appendString(b, p.text)
	b = append(b, '}')
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	return c.Send(b)
}
