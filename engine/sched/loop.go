package sched

import (
	"fmt"
	"runtime"
	"time"

	"github.com/infernix/infernix/engine/backend"
	"github.com/infernix/infernix/engine/kv"
	"github.com/infernix/infernix/engine/sample"
)

// idlePoll is how often an idle loop rechecks cancellations of lanes that
// wait for their consumer.
const idlePoll = 5 * time.Millisecond

func (s *Scheduler) loop() {
	runtime.LockOSThread()
	defer close(s.done)
	defer s.saveAll() // graceful end: the prefix cache reaches the disk
	for {
		s.mu.Lock()
		abort := s.abort
		s.mu.Unlock()
		if abort {
			s.abortAll()
			return
		}
		select {
		case f := <-s.calls:
			f()
			continue
		default:
		}
		s.admit()
		s.dropCancelled()
		s.saveDue()
		if len(s.running) == 0 {
			s.mu.Lock()
			closed := s.closed && len(s.waiting) == 0
			s.mu.Unlock()
			if closed {
				return
			}
			select {
			case <-s.wake:
			case f := <-s.calls:
				f()
			case <-s.saveWait():
			}
			continue
		}
		if !s.step() {
			select {
			case <-s.wake:
			case f := <-s.calls:
				f()
			case <-time.After(idlePoll):
			}
		}
	}
}

// abortAll ends every queued and running request as cancelled.
func (s *Scheduler) abortAll() {
	for len(s.running) > 0 {
		s.finish(s.running[0], "cancelled", ErrClosed)
	}
	s.mu.Lock()
	waiting := s.waiting
	s.waiting = nil
	s.mu.Unlock()
	for _, l := range waiting {
		s.final(l, "cancelled", ErrClosed)
	}
}

// admit moves waiting requests into free lanes, oldest first.
func (s *Scheduler) admit() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.waiting) > 0 && len(s.running) < s.cfg.MaxLanes {
		l := s.waiting[0]
		s.waiting = s.waiting[1:]
		if l.started.IsZero() {
			l.started = time.Now()
		}
		s.seq++
		l.admitted = s.seq
		l.running = true
		if s.freeSlots != nil {
			l.slot = s.freeSlots[len(s.freeSlots)-1]
			s.freeSlots = s.freeSlots[:len(s.freeSlots)-1]
		}
		s.reuse(l)
		s.running = append(s.running, l)
	}
	s.busy = len(s.running)
}

func (s *Scheduler) dropCancelled() {
	for i := 0; i < len(s.running); i++ {
		l := s.running[i]
		if l.ctx.Err() != nil {
			s.finish(l, "cancelled", nil)
			i--
		}
	}
	s.mu.Lock()
	for i := 0; i < len(s.waiting); i++ {
		l := s.waiting[i]
		if l.ctx.Err() != nil {
			s.waiting = append(s.waiting[:i], s.waiting[i+1:]...)
			i--
			s.final(l, "cancelled", nil)
		}
	}
	s.mu.Unlock()
}

// room reports whether a lane's consumer can take another event and the final.
func room(l *lane) bool { return cap(l.events)-len(l.events) >= 3 }

// step runs one forward over decode tokens of every ready lane plus prefill
// chunks, then samples. It returns false when no lane could make progress.
func (s *Scheduler) step() bool {
	b := &s.batch
	b.Tokens, b.Outputs = b.Tokens[:0], b.Outputs[:0]
	b.Attn.Seq, b.Attn.Pos, b.Attn.Blocks = b.Attn.Seq[:0], b.Attn.Pos[:0], b.Attn.Blocks[:0]
	b.Attn.Slots = b.Attn.Slots[:0]
	s.outIdx = s.outIdx[:0]
	budget := s.m.MaxBatchTokens()
	prefill := s.cfg.PrefillChunk
	planned := s.plan[:0]
	s.planN = s.planN[:0]
	s.planDraft = s.planDraft[:0]
	// Decode lanes first (one token each) for latency, then prefill chunks.
	s.snap = append(s.snap[:0], s.running...)
	for pass := 0; pass < 2; pass++ {
		for _, l := range s.snap {
			if !l.running {
				continue // preempted or finished while planning this step
			}
			remaining := len(l.tokens) - l.computed
			isDecode := remaining == 1
			if (pass == 0) != isDecode || !room(l) || budget == 0 {
				continue
			}
			// The lane's last token needs a row of logits: a lane that
			// would compute it in a step whose rows are taken waits.
			rows := maxOutputs - len(b.Outputs)
			if isDecode && rows <= 0 {
				continue
			}
			n := 1
			var drafts []int32
			if isDecode && s.cfg.SpecTokens > 0 {
				drafts = s.draft(l, min(budget, rows)-1)
			}
			if !isDecode {
				n = min(remaining, budget, prefill)
				if l.req.PromptLogprobs && l.computed < l.nPrompt {
					n = min(n, rows)
				}
				if s.snaps != nil {
					n = s.stopAtSnapshot(l, n)
				}
				if rows <= 0 && l.computed+n == len(l.tokens) {
					n--
				}
				if n <= 0 {
					continue
				}
			}
			if !s.reserve(l, l.computed+n) {
				continue
			}
			seqIdx := int32(len(b.Attn.Blocks))
			b.Attn.Blocks = append(b.Attn.Blocks, l.blocks)
			if l.slot >= 0 {
				b.Attn.Slots = append(b.Attn.Slots, l.slot)
			}
			for i := 0; i < n; i++ {
				pos := l.computed + i
				b.Tokens = append(b.Tokens, l.tokens[pos])
				b.Attn.Seq = append(b.Attn.Seq, seqIdx)
				b.Attn.Pos = append(b.Attn.Pos, int32(pos))
				wantAll := l.req.PromptLogprobs && pos < l.nPrompt
				last := pos == len(l.tokens)-1
				if (wantAll || last) && len(b.Outputs) < maxOutputs {
					b.Outputs = append(b.Outputs, int32(len(b.Tokens)-1))
					s.outIdx = append(s.outIdx, l)
				}
			}
			// A speculating lane's drafts follow its last token, each
			// with its row of logits.
			for i, d := range drafts {
				b.Tokens = append(b.Tokens, d)
				b.Attn.Seq = append(b.Attn.Seq, seqIdx)
				b.Attn.Pos = append(b.Attn.Pos, int32(l.computed+1+i))
				b.Outputs = append(b.Outputs, int32(len(b.Tokens)-1))
				s.outIdx = append(s.outIdx, l)
			}
			n += len(drafts)
			budget -= n
			if !isDecode {
				prefill -= n
			}
			planned = append(planned, l)
			s.plan = planned
			s.planN = append(s.planN, n)
			s.planDraft = append(s.planDraft, drafts)
		}
	}
	s.plan = planned
	if len(b.Tokens) == 0 {
		return false
	}
	device := s.planSampling()
	var err error
	if device {
		err = s.ds.ForwardSample(b, s.sreq, s.sres[:len(s.sreq)])
	} else {
		err = s.m.Forward(b, s.logits)
	}
	if err != nil {
		for _, l := range planned {
			s.finish(l, "error", fmt.Errorf("forward pass failed: %w", err))
		}
		return true
	}
	// Consume the outputs lane by lane, in batch order.
	row := 0
	for i, l := range planned {
		if drafts := s.planDraft[i]; len(drafts) > 0 {
			// Its last token's KV is computed; each draft's counts once
			// sampling keeps it (emitSpec).
			first := row
			row += 1 + len(drafts)
			l.computed++
			s.register(l)
			s.emitSpec(l, first, drafts, device)
			continue
		}
		last := -1
		for row < len(s.outIdx) && s.outIdx[row] == l {
			pos := int(b.Attn.Pos[b.Outputs[row]])
			// A preempted lane recomputes positions it already scored.
			if !device && l.req.PromptLogprobs && pos+1 < l.nPrompt && pos == len(l.promptLP) {
				s.scorePrompt(l, s.logits[row*s.vocab:(row+1)*s.vocab], l.tokens[pos+1])
			}
			if pos == len(l.tokens)-1 {
				last = row
			}
			row++
		}
		l.computed += s.planN[i]
		s.register(l)
		s.snapshotAfterStep(l)
		if l.computed >= l.nPrompt && l.prefillDone.IsZero() {
			l.prefillDone = time.Now()
			if l.req.PromptLogprobs {
				l.events <- Event{PromptLogprobs: l.promptLP}
			}
		}
		switch {
		case last < 0:
		case device:
			s.emit(l, &s.sres[last])
		default:
			s.hreq[0] = s.request(l)
			backend.SampleHost(s.logits[last*s.vocab:(last+1)*s.vocab], s.vocab, s.hreq[:], s.hres[:])
			s.emit(l, &s.hres[0])
		}
	}
	return true
}

// planSampling decides whether this step's tokens are chosen by the model
// on its device (model.Sampling) and, if so, fills s.sreq, one request per
// output row. It draws nothing: the samplers' streams advance only when
// the rows are served. Prompt scoring needs whole rows of logits, so a
// step holding such rows runs on the host, as does one with a request
// beyond the device's limits.
func (s *Scheduler) planSampling() bool {
	if s.ds == nil || len(s.outIdx) > s.dsLim.Rows {
		return false
	}
	b := &s.batch
	s.sreq = s.sreq[:0]
	for row, l := range s.outIdx {
		pos := int(b.Attn.Pos[b.Outputs[row]])
		// A row that is neither scored nor sampled (a recomputed prompt
		// position of a preempted lane): the given token, no log-probs,
		// costs nothing.
		r := backend.SampleRequest{Force: 0, Logprobs: -1}
		switch {
		case l.req.PromptLogprobs && pos+1 < l.nPrompt:
			return false
		case pos > len(l.tokens)-1 && !l.sampler.HistoryFree():
			// A draft's row: sampled before the tokens ahead of it are
			// accepted, which only a draw that ignores them allows.
			return false
		case pos >= len(l.tokens)-1:
			r = s.request(l)
		}
		if !s.dsLim.Serves(&r) {
			return false
		}
		s.sreq = append(s.sreq, r)
	}
	return true
}

func (s *Scheduler) scorePrompt(l *lane, logits []float32, next int32) {
	p := PromptLogprob{Token: next, Logprob: sample.LogProbOf(logits, next)}
	if l.req.PromptTop > 0 {
		p.Top = sample.TopLogProbs(logits, l.req.PromptTop, nil)
	}
	l.promptLP = append(l.promptLP, p)
}

// request is what l's next token asks of the sampler: a draw, or the
// thinking budget's next forced token (its log-probs only), or nothing when
// the request generates no tokens.
func (s *Scheduler) request(l *lane) backend.SampleRequest {
	r := backend.SampleRequest{Sampler: l.sampler, Logprobs: l.req.Logprobs, Force: -1}
	switch {
	case l.req.MaxTokens == 0:
		r.Force, r.Logprobs = 0, -1
	case len(l.forced) > 0:
		r.Force = l.forced[0]
	}
	s.constrain(l)
	return r
}

// emit sends l's next token, chosen for request(l) on either path.
func (s *Scheduler) emit(l *lane, res *backend.SampleResult) {
	if l.req.MaxTokens == 0 {
		s.finish(l, "length", nil)
		return
	}
	ev := Event{Token: res.Token}
	if len(l.forced) > 0 {
		l.forced = l.forced[1:]
		ev.Forced = true
	}
	if l.req.Logprobs >= 0 {
		// Log-probs describe the model's distribution, not the edited one.
		ev.Logprob = res.LogProb
		if l.req.Logprobs > 0 {
			ev.Top = append([]sample.TokenLogProb(nil), res.Top...)
		}
	}
	s.accept(l, ev)
}

// accept records a token, applies the thinking budget and stop conditions,
// and sends the event.
func (s *Scheduler) accept(l *lane, ev Event) {
	tok := ev.Token
	if l.constrained(&ev) {
		if err := l.req.Constraint.Accept(tok); err != nil {
			s.finish(l, "error", err)
			return
		}
	}
	l.sampler.Accept(tok)
	l.tokens = append(l.tokens, tok)
	l.gen++
	if l.firstTok.IsZero() {
		l.firstTok = time.Now()
	}
	switch {
	case l.req.ThinkOpen >= 0 && tok == l.req.ThinkOpen && l.req.ThinkOpen != l.req.ThinkClose:
		l.inThink = true
	case tok == l.req.ThinkClose:
		l.inThink = false
		l.forced = nil
	case l.inThink:
		l.thinkN++
	}
	if l.inThink && l.budget >= 0 && l.thinkN >= l.budget && len(l.forced) == 0 {
		l.forced = append(l.forced, l.req.ForceClose...)
		l.budget = -1
	}
	stop := l.stop[tok] && !ev.Forced
	l.events <- ev
	switch {
	case stop:
		s.finish(l, "stop", nil)
	case l.gen >= l.req.MaxTokens:
		s.finish(l, "length", nil)
	case len(l.tokens) >= s.cfg.MaxContext:
		s.finish(l, "length", nil)
	}
}

// reserve makes sure l owns blocks for n tokens, preempting younger lanes
// when the pool is exhausted. It returns false if l itself had to wait.
func (s *Scheduler) reserve(l *lane, n int) bool {
	need := kv.BlocksFor(n) - len(l.blocks)
	if need <= 0 {
		return true
	}
	for {
		var ok bool
		if l.blocks, ok = s.alloc.Alloc(l.blocks, need); ok {
			return true
		}
		if s.pc != nil && s.pc.Evict(need-s.alloc.FreeCount()) > 0 {
			continue // idle cached blocks go before any running lane
		}
		victim := s.youngestOther(l)
		if victim == nil {
			if len(s.running) == 1 {
				s.finish(l, "error", fmt.Errorf("the KV cache (%d blocks) cannot hold this sequence of %d tokens", s.alloc.Total(), n))
			}
			return false
		}
		s.preempt(victim)
	}
}

// youngestOther is the youngest lane admitted after l that holds blocks and
// has no tokens in the batch being built (nil: none).
func (s *Scheduler) youngestOther(l *lane) *lane {
	var y *lane
	for _, o := range s.running {
		// Only lanes younger than l: an older lane keeps its blocks (l
		// waits, or is preempted itself when an older lane needs them).
		if o != l && o.admitted > l.admitted && len(o.blocks) > 0 && (y == nil || o.admitted > y.admitted) && !s.planned(o) {
			y = o
		}
	}
	return y
}

// planned reports whether o already has tokens in the batch being built (its
// blocks must then stay).
func (s *Scheduler) planned(o *lane) bool {
	for _, p := range s.plan {
		if p == o {
			return true
		}
	}
	return false
}

// preempt frees a lane's KV and puts it back at the head of the queue; when
// readmitted it resumes from the prefix cache's longest prefix of its prompt
// and generated tokens (its own indexed blocks, unless evicted meanwhile) and
// recomputes the rest.
func (s *Scheduler) preempt(l *lane) {
	s.releaseBlocks(l)
	l.computed = 0
	l.preempted++
	s.removeRunning(l)
	s.mu.Lock()
	s.waiting = append([]*lane{l}, s.waiting...)
	s.busy = len(s.running)
	s.mu.Unlock()
}

func (s *Scheduler) removeRunning(l *lane) {
	l.running = false
	if l.slot >= 0 {
		if r, ok := s.m.(slotReleaser); ok {
			r.ReleaseSlot(int(l.slot))
		}
		s.freeSlots = append(s.freeSlots, l.slot)
		l.slot = -1
	}
	for i, o := range s.running {
		if o == l {
			s.running = append(s.running[:i], s.running[i+1:]...)
			return
		}
	}
}

// finish releases a running lane and sends its final event.
func (s *Scheduler) finish(l *lane, reason string, err error) {
	s.releaseBlocks(l)
	s.removeRunning(l)
	s.mu.Lock()
	s.busy = len(s.running)
	s.mu.Unlock()
	s.final(l, reason, err)
}

func (s *Scheduler) final(l *lane, reason string, err error) {
	now := time.Now()
	st := Stats{PromptTokens: l.nPrompt, GeneratedTokens: l.gen, CachedTokens: max(l.cached, 0), Preemptions: l.preempted, Total: now.Sub(l.submitted)}
	if !l.started.IsZero() {
		st.Queue = l.started.Sub(l.submitted)
	}
	if !l.prefillDone.IsZero() {
		st.Prefill = l.prefillDone.Sub(l.started)
	}
	if !l.firstTok.IsZero() {
		st.TTFT = l.firstTok.Sub(l.submitted)
		st.Decode = now.Sub(l.firstTok)
	}
	// Running lanes always have room (see room); a cancelled lane's consumer
	// may have gone with the channel full, so make room rather than block.
	if len(l.events) == cap(l.events) {
		select {
		case <-l.events:
		default:
		}
	}
	l.events <- Event{Done: true, Finish: reason, Err: err, Stats: st}
	close(l.events)
}
