package server

import (
	"context"
	"errors"
	"github.com/infernix/infernix/engine/constrain"
	"net"
	"time"

	"github.com/infernix/infernix/engine/sample"
	"github.com/infernix/infernix/engine/sched"
	"github.com/infernix/infernix/engine/toolcall"
)

// job is one generation, independent of the API that asked for it: the
// prompt as token ids plus how to run and how to interpret the output.
type job struct {
	prompt []int32
	// prefill is assistant text the server appended to the rendered prompt
	// (a forced tool call's opening); it is fed to the output parsers as if
	// the model had generated it, so the client sees a complete call.
	prefill   string
	maxTokens int
	// maxTokensParam is the request field maxTokens came from, for the
	// context-length error ("": max_tokens).
	maxTokensParam string
	sampling       sample.Params
	ignoreEOS      bool
	stop           []string
	stopTokens     []int32 // the request's own stop ids, on top of the model's
	// logprobs < 0: none; else alternatives per token (0 = chosen only).
	logprobs       int
	promptLogprobs bool
	promptTop      int
	skipSpecial    bool

	// Reasoning: split <think>…</think> into reasoning output.
	reasoning    bool
	openInPrompt bool // the rendered prompt ends inside <think> (for the splitter)
	inThink      bool // the engine starts inside the think block (openInPrompt unless the prefill closed it)
	thinkClosed  bool // the prompt ends with a closed think block (thinking off): the reply cannot open one
	thinkBudget  int  // < 0: none

	// Tool calls: parse them out of the content.
	parseTools bool
	toolFormat toolcall.Format
	tools      []toolcall.Tool
	singleCall bool // parallel_tool_calls false: end after the first call

	hooks *jobHooks // nil without hooks

	// grammar constrains the answer (constrained.go); nil: none.
	// forcedCall: a forced tool call's opening is prefilled, and no answer
	// grammar applies.
	grammar    *constrain.Grammar
	forcedCall bool
	// callGrammar constrains tool calls' bodies (JSON tool format): from
	// the start under a forced call (callPrefix: what the prompt already
	// wrote of the body), and after each <tool_call> the model writes when
	// some tool is strict. grammar, when set, takes precedence.
	callGrammar *constrain.Grammar
	callPrefix  string

	// sharedPrefix is how many leading prompt tokens are the system prompt
	// and tools (0: unknown; sched.Request.SharedPrefix).
	sharedPrefix int
}

// outKind says what an output carries.
type outKind uint8

const (
	outContent   outKind = iota // text: answer text
	outReasoning                // text: thinking text
	outCallStart                // index, id, name: a tool call begins
	outCallArgs                 // index, text: a fragment of the call's arguments JSON
)

// output is one step of a generation's output as the encoders see it. It is
// reused between calls: encoders must copy what they keep.
type output struct {
	kind  outKind
	text  string
	index int
	id    string
	name  string
	// logprobs are the tokens accounted for since the previous output
	// (valid during the callback).
	logprobs []tokenLogprob
}

// tokenLogprob is one generated token's log-prob and alternatives.
type tokenLogprob struct {
	id      int32
	logprob float32
	top     []sample.TokenLogProb
}

// result is how a generation ended.
type result struct {
	// finish is stop, length, tool_calls, cancelled or error.
	finish                                 string
	promptTokens, completionTokens, cached int
	stats                                  sched.Stats
	promptLogprobs                         []sched.PromptLogprob
	tailLogprobs                           []tokenLogprob // not attached to any output
	calls                                  int
	stopString                             string            // the stop string that matched
	err                                    error             // engine failure (finish = error)
	writeErr                               error             // the client went away
	tags                                   map[string]string // on_response's tags, for the request log
}

// peerPoll is how often a running request checks that its client is still
// connected (the scheduler frees the lane within one step of cancellation).
const peerPoll = 25 * time.Millisecond

// generation is a submitted job.
type generation struct {
	s       *Server
	job     *job
	ctx     context.Context
	cancel  context.CancelFunc
	events  <-chan sched.Event
	conn    net.Conn // probed for disconnects; may be nil
	arrived time.Time
}

// submit validates the job against the engine and queues it. Errors are
// client errors (context too long, queue full) ready to send.
func (s *Server) submit(j *job, conn net.Conn, arrived time.Time) (*generation, *APIError) {
	if err := j.sampling.ValidateVocab(s.vocab); err != nil {
		return nil, samplingError(err)
	}
	stops := j.stopTokens
	if !j.ignoreEOS {
		stops = append(append([]int32(nil), s.stopTokens...), j.stopTokens...)
	}
	r := &sched.Request{Prompt: j.prompt, MaxTokens: j.maxTokens, Sampling: j.sampling, StopTokens: stops,
		Logprobs: j.logprobs, PromptLogprobs: j.promptLogprobs, PromptTop: j.promptTop,
		ThinkBudget: -1, ThinkOpen: -1, ThinkClose: -1, SharedPrefix: j.sharedPrefix}
	if j.reasoning && s.thinkOpen >= 0 && s.thinkClose >= 0 {
		r.ThinkOpen, r.ThinkClose, r.InThink = s.thinkOpen, s.thinkClose, j.inThink
		r.MayOpenThink = !j.inThink && !j.thinkClosed
		if j.thinkBudget >= 0 {
			r.ThinkBudget, r.ForceClose = j.thinkBudget, s.forceClose
		}
	}
	switch {
	case j.grammar != nil:
		r.Constraint = j.grammar.Matcher(s.constraintVocab())
	case j.callGrammar != nil:
		gate := j.callGrammar.NewGate(s.constraintVocab(), s.toolCallOpen, s.toolCallClose)
		if j.forcedCall {
			if err := gate.Open([]byte(j.callPrefix)); err != nil {
				return nil, &APIError{Status: 500, Type: "server_error", Message: err.Error()}
			}
		}
		r.Constraint = gate
	}
	ctx, cancel := context.WithCancel(s.baseCtx)
	events, err := s.eng.Sched.Submit(ctx, r)
	if err != nil {
		cancel()
		return nil, submitError(err, j.maxTokensParam)
	}
	return &generation{s: s, job: j, ctx: ctx, cancel: cancel, events: events, conn: conn, arrived: arrived}, nil
}

func samplingError(err error) *APIError {
	msg := err.Error()
	param := msg
	for i := 0; i < len(msg); i++ {
		if msg[i] == ' ' {
			param = msg[:i]
			break
		}
	}
	return badRequest(param, "%s", msg)
}

func submitError(err error, maxTokensParam string) *APIError {
	if maxTokensParam == "" {
		maxTokensParam = "max_tokens"
	}
	var ce *sched.ContextError
	switch {
	case errors.Is(err, sched.ErrQueueFull):
		return &APIError{Status: 429, Type: "rate_limit_error", Code: "queue_full", RetryAfter: 1,
			Message: "the server is busy: its request queue is full (--max-queue); retry shortly"}
	case errors.As(err, &ce):
		e := &APIError{Status: 400, Type: "invalid_request_error", Param: maxTokensParam, Code: "context_length_exceeded",
			Message: ce.Error() + "; shorten the prompt or lower " + maxTokensParam}
		if ce.Prompt >= ce.Context {
			e.Param = "" // the prompt alone does not fit: no max_tokens helps
			e.Message = ce.Error() + "; the prompt alone does not fit: shorten it"
		}
		return e
	case errors.Is(err, sched.ErrClosed):
		return &APIError{Status: 503, Type: "server_error", Code: "shutting_down", RetryAfter: 5, Message: "the server is shutting down"}
	default:
		return badRequest("", "%s", err.Error())
	}
}

// run consumes the generation's events until the end, turning tokens into
// outputs passed to emit (in order, on this goroutine), and returns the
// result. An emit error (the client went away) cancels the request; so does
// a matched stop string, the single allowed tool call ending, or a detected
// disconnect. run always drains the event channel, so the scheduler never
// waits on it.
func (g *generation) run(emit func(*output) error) *result {
	defer g.cancel()
	s, j := g.s, g.job
	emit = j.wrapEmit(emit)
	res := &result{}
	p := newPipeline(s, j, emit)
	if j.prefill != "" {
		p.push(j.prefill)
	}
	stopSet := sample.NewStopTokens(s.stopTokens...)
	if j.ignoreEOS {
		stopSet = sample.NewStopTokens()
	}
	extraStops := sample.NewStopTokens(j.stopTokens...)
	var tick <-chan time.Time
	if g.conn != nil {
		t := time.NewTicker(peerPoll)
		defer t.Stop()
		tick = t.C
	}
	dec := s.eng.Tokenizer.NewStreamDecoder(j.skipSpecial)
	var last time.Time
	var final sched.Event
	awaitScores := j.promptLogprobs
	for {
		var ev sched.Event
		var ok bool
		select {
		case ev, ok = <-g.events:
		case <-tick:
			if !p.stopped && peerClosed(g.conn) {
				res.writeErr = errClientGone
				p.stop()
				g.cancel()
			}
			continue
		}
		if !ok {
			break
		}
		if ev.Done {
			final = ev
			break
		}
		if ev.PromptLogprobs != nil || awaitScores {
			// The prompt's scores come first, once; a one-token prompt has
			// none (a nil slice), which is no generated token either.
			awaitScores = false
			res.promptLogprobs = ev.PromptLogprobs
			continue
		}
		now := time.Now()
		if last.IsZero() {
			s.met.ttft.observe(now.Sub(g.arrived).Seconds())
		} else {
			s.met.itl.observe(now.Sub(last).Seconds())
		}
		last = now
		s.met.generatedTokens.Add(1)
		if p.stopped {
			continue // after a stop: wait for the scheduler's final event
		}
		if j.logprobs >= 0 {
			p.pending = append(p.pending, tokenLogprob{id: ev.Token, logprob: ev.Logprob, top: ev.Top})
		}
		if !ev.Forced && (stopSet.Has(ev.Token) || extraStops.Has(ev.Token)) {
			continue // the stop token is not text
		}
		if text := dec.Add(ev.Token); text != "" {
			p.push(text)
		}
		if p.stopped {
			g.cancel()
		}
	}
	if !p.stopped {
		if text := dec.Flush(); text != "" {
			p.push(text)
		}
		p.finish()
	}
	st := final.Stats
	res.stats = st
	res.promptTokens, res.completionTokens, res.cached = st.PromptTokens, st.GeneratedTokens, st.CachedTokens
	res.calls = p.calls
	res.tailLogprobs = p.pending
	res.stopString = p.matched
	if p.err != nil && res.writeErr == nil {
		res.writeErr = p.err
	}
	switch {
	case p.stopMatched:
		res.finish = "stop"
	case p.singleDone:
		res.finish = "tool_calls"
	case final.Finish == "":
		res.finish = "error"
		res.err = errors.New("the engine ended the request without a final event")
	default:
		res.finish = final.Finish
		res.err = final.Err
	}
	if res.finish == "stop" && p.calls > 0 {
		res.finish = "tool_calls"
	}
	if res.writeErr != nil && res.finish != "error" {
		res.finish = "cancelled"
	}
	s.finishHooks(j, p, res)
	s.met.finished(&st)
	return res
}

var errClientGone = errors.New("the client closed the connection")
