package server

import (
	"bufio"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gofiber/fiber/v2"

	"github.com/infernix/infernix/engine/sched"
)

// handleCompletions serves POST /v1/completions: a raw prompt (text or
// token ids), no chat template, no reasoning or tool parsing. echo with
// logprobs and max_tokens 0 scores the prompt.
func (s *Server) handleCompletions(c *fiber.Ctx) error {
	arrived := time.Now()
	req, err := decodeCompletion(string(c.Body()), s.vocab)
	if err != nil {
		return err
	}
	ids, promptText := req.promptIDs, req.prompt
	if ids == nil {
		ids = s.eng.Tokenizer.Encode(promptText)
		if len(ids) == 0 {
			return badRequest("prompt", "the prompt encodes to no tokens")
		}
	} else if req.echo {
		promptText = s.eng.Tokenizer.Decode(ids, req.gen.skipSpecialTokens)
	}
	jh, aerr := s.complHooks(req, promptText, ids, strings.Clone(requestKey(c)))
	if aerr != nil {
		return aerr
	}
	j := &job{
		prompt:         ids,
		maxTokens:      req.gen.maxTokens,
		maxTokensParam: req.gen.maxTokensParam,
		sampling:       s.samplingParams(&req.gen),
		ignoreEOS:      req.gen.ignoreEOS,
		stop:           req.gen.stop,
		stopTokens:     req.gen.stopTokenIDs,
		logprobs:       req.logprobs,
		skipSpecial:    req.gen.skipSpecialTokens,
		thinkBudget:    -1,
	}
	if req.echo && req.logprobs >= 0 && !req.stream {
		j.promptLogprobs, j.promptTop = true, req.logprobs
	}
	if req.formatParam != "" {
		if j.grammar, aerr = s.outputGrammar(&req.outputFormat); aerr != nil {
			return aerr
		}
	}
	if aerr := s.jobHooksApply(jh, j); aerr != nil {
		return aerr
	}
	ri := info(c)
	enc := &complEncoder{s: s, id: newID("cmpl-"), created: arrived.Unix(), logprobs: req.logprobs >= 0, asIDs: req.gen.tokensAsIDs,
		usageNull: req.stream && req.includeUse}
	ri.entry.ID, ri.entry.Model, ri.entry.Stream = enc.id, s.modelName, req.stream
	ri.entry.PromptTokens = len(ids)
	g, aerr := s.submit(j, c.Context().Conn(), arrived)
	if aerr != nil {
		return aerr
	}
	if req.echo {
		enc.echo = promptText
	}
	if !req.stream {
		res := g.run(enc.collect)
		fillEntry(&ri.entry, res)
		if res.writeErr != nil {
			return nil
		}
		if res.finish == "error" {
			return engineError(res)
		}
		c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSONCharsetUTF8)
		return c.Send(enc.appendResponse(nil, res, ids))
	}
	ri.deferred = true
	entry := ri.entry
	setSSEHeaders(c)
	includeUsage := req.includeUse
	c.Context().SetBodyStreamWriter(func(w *bufio.Writer) {
		s.guardStream(w, func() {
			enc.w = w
			if enc.echo != "" {
				enc.stream(&output{kind: outContent, text: enc.echo})
			}
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

// complEncoder writes text_completion objects.
type complEncoder struct {
	s        *Server
	id       string
	created  int64
	logprobs bool
	asIDs    bool
	echo     string
	// usageNull: stream_options.include_usage (see chatEncoder).
	usageNull bool

	text strings.Builder
	lps  []tokenLogprob

	w      *bufio.Writer
	prefix []byte
	buf    []byte
	offset int // characters streamed so far (text_offset)
}

func (e *complEncoder) collect(o *output) error {
	e.text.WriteString(o.text)
	if e.logprobs {
		e.lps = append(e.lps, o.logprobs...)
	}
	return nil
}

func (e *complEncoder) appendHead(b []byte) []byte {
	b = append(b, `{"id":`...)
	b = appendString(b, e.id)
	b = append(b, `,"object":"text_completion","created":`...)
	b = appendInt(b, e.created)
	b = append(b, `,"model":`...)
	b = appendString(b, e.s.modelName)
	return b
}

func (e *complEncoder) appendResponse(b []byte, res *result, prompt []int32) []byte {
	b = e.appendHead(b)
	b = append(b, `,"choices":[{"index":0,"text":`...)
	b = appendString(b, e.echo+e.text.String())
	b = append(b, `,"logprobs":`...)
	if e.logprobs {
		lg := legacyLogprobs{asIDs: e.asIDs}
		if e.echo != "" {
			lg.addPrompt(e.s, prompt, res.promptLogprobs)
		}
		lg.addGenerated(e.s, append(e.lps, res.tailLogprobs...))
		b = lg.appendJSON(b, 0)
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
	b = appendUsage(b, res)
	return append(b, '}')
}

func (e *complEncoder) stream(o *output) error {
	if e.prefix == nil {
		e.prefix = append(e.appendHead(append([]byte(nil), "data: "...)), `,"choices":[{"index":0,"text":`...)
	}
	b := append(e.buf[:0], e.prefix...)
	b = appendString(b, o.text)
	b = append(b, `,"logprobs":`...)
	if e.logprobs && len(o.logprobs) > 0 {
		lg := legacyLogprobs{asIDs: e.asIDs}
		lg.addGenerated(e.s, o.logprobs)
		b = lg.appendJSON(b, e.offset)
	} else {
		b = append(b, "null"...)
	}
	e.offset += utf8.RuneCountInString(o.text)
	b = append(b, `,"finish_reason":null}]`...)
	b = closeChunk(b, e.usageNull)
	e.buf = b
	if _, err := e.w.Write(b); err != nil {
		return err
	}
	return e.w.Flush()
}

func (e *complEncoder) writeEnd(res *result, includeUsage bool) {
	if e.prefix == nil {
		e.prefix = append(e.appendHead(append([]byte(nil), "data: "...)), `,"choices":[{"index":0,"text":`...)
	}
	b := e.buf[:0]
	if res.finish == "error" {
		b = append(b, "data: "...)
		b = appendErrorJSON(b, engineError(res))
		b = append(b, "\n\n"...)
	} else {
		b = append(b, e.prefix...)
		b = append(b, `"","logprobs":null,"finish_reason":`...)
		b = appendString(b, openAIFinish(res.finish))
		b = append(b, "}]"...)
		b = closeChunk(b, e.usageNull)
		if includeUsage {
			b = append(b, "data: "...)
			b = e.appendHead(b)
			b = append(b, `,"choices":[],"usage":`...)
			b = appendUsage(b, res)
			b = append(b, "}\n\n"...)
		}
	}
	b = append(b, "data: [DONE]\n\n"...)
	e.buf = b
	e.w.Write(b)
	e.w.Flush()
}

// legacyLogprobs is the completions API's log-prob object: parallel lists
// of token strings, their log-probs, the alternatives as {token: logprob},
// and each token's character offset in the text. Entries without a value
// (the first prompt token) are null.
type legacyLogprobs struct {
	asIDs  bool // token strings as "token_id:N"
	tokens []string
	widths []int // characters of each token's text (for text_offset)
	lps    []*float32
	tops   [][]topEntry
}

type topEntry struct {
	tok string
	lp  float32
}

func (l *legacyLogprobs) tokenString(s *Server, id int32) string {
	if l.asIDs {
		return "token_id:" + strconv.Itoa(int(id))
	}
	return string(s.eng.Tokenizer.TokenBytes(id))
}

func (l *legacyLogprobs) add(s *Server, id int32, lp *float32, top []topEntry) {
	l.tokens = append(l.tokens, l.tokenString(s, id))
	l.widths = append(l.widths, utf8.RuneCount(s.eng.Tokenizer.TokenBytes(id)))
	l.lps = append(l.lps, lp)
	l.tops = append(l.tops, top)
}

func (l *legacyLogprobs) addPrompt(s *Server, prompt []int32, scored []sched.PromptLogprob) {
	for i, id := range prompt {
		if i == 0 || i-1 >= len(scored) {
			l.add(s, id, nil, nil)
			continue
		}
		p := scored[i-1]
		lp := p.Logprob
		top := make([]topEntry, 0, len(p.Top))
		for _, t := range p.Top {
			top = append(top, topEntry{l.tokenString(s, t.ID), t.LogProb})
		}
		l.add(s, id, &lp, top)
	}
}

func (l *legacyLogprobs) addGenerated(s *Server, lps []tokenLogprob) {
	for _, t := range lps {
		lp := t.logprob
		top := make([]topEntry, 0, len(t.top))
		for _, a := range t.top {
			top = append(top, topEntry{l.tokenString(s, a.ID), a.LogProb})
		}
		l.add(s, t.id, &lp, top)
	}
}

func (l *legacyLogprobs) appendJSON(b []byte, offset int) []byte {
	b = append(b, `{"tokens":[`...)
	for i, t := range l.tokens {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, t)
	}
	b = append(b, `],"token_logprobs":[`...)
	for i, lp := range l.lps {
		if i > 0 {
			b = append(b, ',')
		}
		if lp == nil {
			b = append(b, "null"...)
		} else {
			b = appendFloat(b, float64(*lp), 32)
		}
	}
	b = append(b, `],"top_logprobs":[`...)
	for i, top := range l.tops {
		if i > 0 {
			b = append(b, ',')
		}
		if l.lps[i] == nil {
			b = append(b, "null"...)
			continue
		}
		b = append(b, '{')
		for k, t := range top {
			if k > 0 {
				b = append(b, ',')
			}
			b = appendString(b, t.tok)
			b = append(b, ':')
			b = appendFloat(b, float64(t.lp), 32)
		}
		b = append(b, '}')
	}
	b = append(b, `],"text_offset":[`...)
	for i, w := range l.widths {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendInt(b, int64(offset))
		offset += w
	}
	return append(b, "]}"...)
}
