package constrain

import (
	"fmt"

	"github.com/infernix/infernix/engine/sched"
)

var _ sched.Intermittent = (*Gate)(nil)

// Gate is a grammar in force only from a trigger token to the end of one
// document, any number of times: a tool call's body after the model opens
// it with <tool_call>, whose arguments must then follow the tool's schema.
// Between documents the output is free. It implements sched.Intermittent
// and is not safe for concurrent use.
type Gate struct {
	g       *Grammar
	v       *Vocab
	trigger int32
	m       *Matcher // nil while free
	// close, when >= 0, must follow each document, after at most
	// maxCloseSpace bytes of whitespace (closing: the document is done
	// and close not yet written; spaced: those bytes so far).
	close   int32
	closing bool
	spaced  int
}

// maxCloseSpace bounds the whitespace between a document and its close
// token (Qwen writes one newline before </tool_call>).
const maxCloseSpace = 2

// NewGate watches for trigger (a token id; negative: only Open arms it).
// close (negative: none) is a token that must end each document: the
// output is free again only after it.
func (g *Grammar) NewGate(v *Vocab, trigger, close int32) *Gate {
	return &Gate{g: g, v: v, trigger: trigger, close: close}
}

// Open puts a document in force now, already past prefix: text the prompt
// wrote for the model (a forced call's prefilled opening).
func (t *Gate) Open(prefix []byte) error {
	m := t.g.Matcher(t.v)
	if err := m.Feed(prefix); err != nil {
		return fmt.Errorf("constrained decoding: the prefilled %q does not open the grammar: %w", prefix, err)
	}
	t.m = m
	return nil
}

// Free implements sched.Intermittent.
func (t *Gate) Free() bool { return t.m == nil && !t.closing }

// Words is the mask length Allowed needs.
func (t *Gate) Words() int { return t.v.words }

// Allowed implements sched.Constraint. While free every token is allowed.
func (t *Gate) Allowed(mask []uint64) bool {
	if t.closing {
		clear(mask)
		if t.spaced < maxCloseSpace {
			for _, id := range t.v.spaces() {
				if t.spaced+len(t.v.bytesOf(id)) <= maxCloseSpace {
					mask[id>>6] |= 1 << (id & 63)
				}
			}
		}
		if int(t.close) < t.v.size {
			mask[t.close>>6] |= 1 << (t.close & 63)
		}
		return false
	}
	if t.m == nil {
		for i := range mask {
			mask[i] = ^uint64(0)
		}
		return true
	}
	return t.m.Allowed(mask)
}

// Accept implements sched.Constraint: while free it only watches for the
// trigger; in force, it advances the document and frees the output once
// the document is complete.
func (t *Gate) Accept(tok int32) error {
	if t.closing {
		b := t.v.bytesOf(tok)
		switch {
		case tok == t.close:
			t.closing, t.spaced = false, 0
		case len(b) > 0 && t.spaced+len(b) <= maxCloseSpace && allSpace(b):
			t.spaced += len(b)
		default:
			return fmt.Errorf("constrained decoding: token %d (%q) where the call must close", tok, b)
		}
		return nil
	}
	if t.m == nil {
		if tok == t.trigger && tok >= 0 {
			t.m = t.g.Matcher(t.v)
		}
		return nil
	}
	if err := t.m.Accept(tok); err != nil {
		return err
	}
	if t.m.Done() {
		t.closing, t.spaced = t.close >= 0, t.m.trailing()
		t.m = nil
	}
	return nil
}

func allSpace(b []byte) bool {
	for _, c := range b {
		if !isWS(c) {
			return false
		}
	}
	return true
}
