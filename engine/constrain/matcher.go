package constrain

import (
	"fmt"

	"github.com/infernix/infernix/engine/sched"
)

var _ sched.Constraint = (*Matcher)(nil)

// Matcher is one sequence's position in a grammar. It is not safe for
// concurrent use.
type Matcher struct {
	g     *Grammar
	v     *Vocab
	state []config
	bufA  []config
	bufB  []config
	w     walker
	key   []byte
}

// Matcher starts a sequence of g over vocabulary v.
func (g *Grammar) Matcher(v *Vocab) *Matcher {
	if g.initial != nil {
		return &Matcher{g: g, v: v, state: append([]config(nil), g.initial...)}
	}
	return &Matcher{g: g, v: v, state: []config{start(g.root)}}
}

// Words is the mask length Allowed needs.
func (m *Matcher) Words() int { return m.v.words }

// Allowed implements sched.Constraint.
func (m *Matcher) Allowed(mask []uint64) bool {
	clear(mask)
	m.key = stateKey(m.key[:0], m.state, m.v.maxDepth)
	if c := m.g.cache.get(m.v, m.key); c != nil {
		copy(mask, c)
	} else {
		m.v.walk(&m.w, m.state, mask)
		m.g.cache.put(m.v, m.key, mask[:m.v.words])
	}
	return m.CanEnd()
}

// CanEnd reports whether the output so far is a complete document.
func (m *Matcher) CanEnd() bool {
	for i := range m.state {
		if m.state[i].final() {
			return true
		}
	}
	return false
}

// Done reports whether the document is complete and nothing but the
// root's trailing whitespace may follow it (an object's or array's closing
// bracket, a string's closing quote).
func (m *Matcher) Done() bool {
	for i := range m.state {
		c := &m.state[i]
		if c.up != nil || c.phase != pRootDone || c.lex.mode != lexNone {
			return false
		}
	}
	return len(m.state) > 0
}

// trailing is the whitespace bytes written after a Done document.
func (m *Matcher) trailing() int {
	n := 0
	for i := range m.state {
		n = max(n, int(m.state[i].lex.ws))
	}
	return n
}

// Accept implements sched.Constraint.
func (m *Matcher) Accept(tok int32) error {
	b := m.v.bytesOf(tok)
	if len(b) == 0 {
		return fmt.Errorf("constrained decoding: token %d cannot appear in the output", tok)
	}
	return m.Feed(b)
}

// Feed advances by bytes; on an error the matcher is unchanged.
func (m *Matcher) Feed(b []byte) error {
	cur := append(m.bufA[:0], m.state...)
	alt := m.bufB[:0]
	for i, c := range b {
		alt = alt[:0]
		for _, x := range cur {
			alt = step(x, c, alt)
		}
		alt = dedupe(alt)
		if len(alt) == 0 {
			m.bufA, m.bufB = cur[:0], alt[:0]
			return fmt.Errorf("constrained decoding: byte %d (%q) of %q is not allowed here", i, c, b)
		}
		cur, alt = alt, cur
	}
	m.state = append(m.state[:0], cur...)
	m.bufA, m.bufB = cur[:0], alt[:0]
	return nil
}
