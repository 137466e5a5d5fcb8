package sched

// Constraint limits what a request may generate: constrained decoding (JSON
// of a schema, engine/constrain). The scheduler consults it for every
// sampled token outside a think block; tokens the thinking budget inserts,
// and the think block itself, are not constrained. While a constraint is
// in force the lane samples on the host (device samplers apply no masks).
//
// Invariants the scheduler keeps: Allowed is called before each constrained
// draw and Accept after it with the drawn token, unless that token is a
// stop token (which ends the request) or the think block's opening token
// (allowed as the first token when Request.MayOpenThink is set).
type Constraint interface {
	// Allowed overwrites mask (bit id%64 of mask[id/64]; at least as many
	// words as the model's vocabulary needs) with the tokens allowed next,
	// and reports whether the output may end here; the scheduler then also
	// allows the stop tokens.
	Allowed(mask []uint64) (canEnd bool)
	// Accept advances past a generated token. An error (a token Allowed did
	// not allow) ends the request with it.
	Accept(tok int32) error
}

// Intermittent is a Constraint in force only at times (a tool call's
// arguments, from the token that opens the call to the end of its body).
// While Free reports true the lane draws without a mask (on the device
// where it can) and Allowed is not called; Accept still sees every token
// the invariants above name, so that the constraint can tell when it is
// in force again.
type Intermittent interface {
	Constraint
	Free() bool
}

// constrain sets l's sampler mask for its next draw: Request.Constraint's
// tokens, with the stop tokens when the output may end (or when nothing
// else is allowed, the only way out), or no mask inside a think block.
func (s *Scheduler) constrain(l *lane) {
	c := l.req.Constraint
	if c == nil {
		return
	}
	if l.inThink || len(l.forced) > 0 {
		l.sampler.SetMask(nil)
		return
	}
	if ic, ok := c.(Intermittent); ok && ic.Free() {
		l.sampler.SetMask(nil)
		return
	}
	if l.maskFor != l.gen+1 {
		if words := (s.vocab + 63) / 64; len(l.mask) < words {
			l.mask = make([]uint64, words)
		}
		end := c.Allowed(l.mask)
		if open := l.req.ThinkOpen; l.mayOpenThink() && int(open) < s.vocab {
			l.mask[open>>6] |= 1 << (open & 63)
		}
		if end || !anySet(l.mask) {
			for t := range l.stop {
				if t >= 0 && int(t) < s.vocab {
					l.mask[t>>6] |= 1 << (t & 63)
				}
			}
		}
		l.maskFor = l.gen + 1
	}
	l.sampler.SetMask(l.mask)
}

func anySet(m []uint64) bool {
	for _, w := range m {
		if w != 0 {
			return true
		}
	}
	return false
}

// constrained reports whether a generated token advances l's constraint
// (see Constraint's invariants); call it before the token updates l.
func (l *lane) constrained(ev *Event) bool {
	if l.req.Constraint == nil || ev.Forced || l.inThink || l.stop[ev.Token] {
		return false
	}
	return !(l.mayOpenThink() && ev.Token == l.req.ThinkOpen)
}

// mayOpenThink reports whether l's next token may open its think block
// although a constraint is in force.
func (l *lane) mayOpenThink() bool {
	open := l.req.ThinkOpen
	return l.req.MayOpenThink && l.gen == 0 && open >= 0 && open != l.req.ThinkClose
}
