package server

import (
	"github.com/infernix/infernix/engine/reasoning"
	"github.com/infernix/infernix/engine/sample"
	"github.com/infernix/infernix/engine/toolcall"
)

// pipeline turns decoded text into outputs, in this order:
//
//	text → reasoning splitter → reasoning outputs
//	                          → content → tool-call parser → call outputs
//	                                                       → content → stop strings → content outputs
//
// so client stop strings match only the answer (never the thinking or a
// call), and calls inside the thinking stay thinking. Before a call output
// the stop matcher's held-back text is released: a stop string cannot span
// a tool call, and the order of outputs is kept.
type pipeline struct {
	emit  func(*output) error
	split *reasoning.Splitter
	tools toolParser
	stops *sample.StopMatcher

	singleCall bool
	newID      func() string
	ids        []string // call ids by parser index

	stopped     bool // no more outputs: stop string, single call done, client gone
	stopMatched bool
	singleDone  bool
	matched     string
	calls       int
	err         error

	pending []tokenLogprob
	out     output
}

func newPipeline(s *Server, j *job, emit func(*output) error) *pipeline {
	p := &pipeline{emit: emit, singleCall: j.singleCall, newID: newCallID}
	if j.reasoning {
		p.split = reasoning.NewSplitter(j.openInPrompt, s.thinkOpenText, s.thinkCloseText)
	}
	if j.parseTools {
		p.tools = s.newToolParser(j)
	}
	if len(j.stop) > 0 {
		p.stops = sample.NewStopMatcher(j.stop)
	}
	return p
}

// stop ends output (the client is gone or generation was cut).
func (p *pipeline) stop() { p.stopped = true }

// push feeds newly decoded text.
func (p *pipeline) push(text string) {
	if p.stopped {
		return
	}
	if p.split == nil {
		p.content(text)
		return
	}
	r, c := p.split.Feed(text)
	p.reasoningOut(r)
	p.content(c)
}

// finish flushes everything held back at the end of generation.
func (p *pipeline) finish() {
	if p.split != nil && !p.stopped {
		r, c := p.split.Finish()
		p.reasoningOut(r)
		p.content(c)
	}
	if p.tools != nil && !p.stopped {
		p.toolEvents(p.tools.Finish())
	}
	if p.stops != nil && !p.stopped {
		p.send(outContent, p.stops.Flush())
	}
}

func (p *pipeline) reasoningOut(text string) {
	if text != "" && !p.stopped {
		p.send(outReasoning, text)
	}
}

func (p *pipeline) content(text string) {
	if text == "" || p.stopped {
		return
	}
	if p.tools == nil {
		p.answer(text)
		return
	}
	p.toolEvents(p.tools.Feed(text))
}

func (p *pipeline) toolEvents(evs []toolcall.Event) {
	for _, ev := range evs {
		if p.stopped {
			return
		}
		switch ev.Kind {
		case toolcall.Content:
			p.answer(ev.Text)
		case toolcall.CallStart:
			p.releaseHeld()
			for len(p.ids) <= ev.Index {
				p.ids = append(p.ids, "")
			}
			p.ids[ev.Index] = p.newID()
			p.calls++
			p.out = output{kind: outCallStart, index: ev.Index, id: p.ids[ev.Index], name: ev.Name}
			p.deliver()
		case toolcall.CallArgs:
			if ev.ArgsDelta != "" {
				p.out = output{kind: outCallArgs, index: ev.Index, text: ev.ArgsDelta}
				p.deliver()
			}
		case toolcall.CallEnd:
			if p.singleCall {
				p.singleDone = true
				p.stopped = true
			}
		}
	}
}

// answer passes content through the stop strings.
func (p *pipeline) answer(text string) {
	if p.stops == nil {
		p.send(outContent, text)
		return
	}
	out, stopped := p.stops.Feed(text)
	p.send(outContent, out)
	if stopped {
		p.stopMatched = true
		p.matched = p.stops.Matched()
		p.stopped = true
	}
}

// releaseHeld emits the text the stop matcher holds before a call begins.
func (p *pipeline) releaseHeld() {
	if p.stops != nil {
		p.send(outContent, p.stops.Flush())
	}
}

func (p *pipeline) send(kind outKind, text string) {
	if text == "" {
		return
	}
	p.out = output{kind: kind, text: text}
	p.deliver()
}

// deliver hands p.out to the encoder with the pending log-probs (tokens
// whose text is all held back stay pending and end in the result's
// tailLogprobs).
func (p *pipeline) deliver() {
	if p.err != nil {
		return
	}
	p.out.logprobs = p.pending
	if err := p.emit(&p.out); err != nil && p.err == nil {
		p.err = err
		p.stopped = true
	}
	p.pending = p.pending[:0]
}
