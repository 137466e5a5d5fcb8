// Package luapattern matches Lua 5.1 patterns (reference manual §5.4.1)
// and can be stopped: matching polls a context, so that a pattern whose
// backtracking would run for hours (".-.-.-.-x" on a long string) ends at
// the plugin call's deadline, and recursion is bounded, so that a long
// pattern fails with "pattern too complex" instead of exhausting the Go
// stack. It is written for the plugins package from the manual's
// description and checked against gopher-lua's behaviour by differential
// tests; it shares no code with gopher-lua or the Lua C sources.
//
// Supported: single-character classes (x, ., %a %c %d %l %p %s %u %w %x
// %z and their upper-case complements; %y for any other byte y is y), sets
// [...] and [^...] with ranges and classes, the quantifiers * + - ?, the
// anchors ^ (at the pattern's start) and $ (at its end), captures (...),
// position captures (), back-references %1-%9 and %bxy. As in gopher-lua,
// %f is the letter f (gopher-lua has no frontier pattern).
//
// Compile checks the pattern's structure (sets and captures), so such a
// fault is an error even where matching would not reach it, as in
// gopher-lua; a '%' at the end, a %b without its two bytes and an invalid
// back-reference are errors when matching reaches them, as in Lua.
package luapattern

import (
	"context"
	"errors"
)

// Error is a malformed pattern; its message reads as Lua's.
type Error struct{ Msg string }

func (e *Error) Error() string { return e.Msg }

// ErrTooComplex is returned when matching would recurse deeper than
// MaxDepth.
var ErrTooComplex = errors.New("pattern too complex")

// MaxDepth bounds the matcher's recursion: each capture, quantified item
// and back-tracking point of the pattern takes a level.
const MaxDepth = 20000

// pollEvery is how many matcher steps pass between checks of the context.
const pollEvery = 1 << 12

// Pattern is a checked pattern.
type Pattern struct {
	src      string // the pattern, without a leading '^'
	anchored bool
	ncap     int
}

// Anchored reports whether the pattern began with '^'.
func (p *Pattern) Anchored() bool { return p.anchored }

// NumCaptures is the number of captures the pattern defines.
func (p *Pattern) NumCaptures() int { return p.ncap }

// Compile checks pat and returns it ready to match (an *Error if it is
// malformed).
func Compile(pat string) (*Pattern, error) {
	p := &Pattern{src: pat}
	if len(pat) > 0 && pat[0] == '^' {
		p.anchored = true
		p.src = pat[1:]
	}
	s := p.src
	var open []int // indexes of the captures not yet closed
	ncap := 0
	for i := 0; i < len(s); {
		switch c := s[i]; c {
		case '(':
			if i+1 < len(s) && s[i+1] == ')' {
				ncap++
				i += 2
				continue
			}
			open = append(open, ncap)
			ncap++
			i++
			continue
		case ')':
			if len(open) == 0 {
				return nil, &Error{"invalid pattern capture"}
			}
			open = open[:len(open)-1]
			i++
			continue
		case '%':
			// A '%' at the end, a %b without its two bytes and a
			// back-reference to a capture that is not closed are errors
			// only when matching reaches them, as in Lua.
			if i+1 == len(s) || (s[i+1] == 'b' && len(s)-(i+2) < 2) {
				i = len(s)
				continue
			}
			switch d := s[i+1]; {
			case d == 'b':
				i += 4
				continue
			case d == '0': // never valid (as in gopher-lua, found here)
				return nil, &Error{"invalid capture index"}
			case d >= '1' && d <= '9':
				i += 2
				continue
			}
		}
		end, err := itemEnd(s, i)
		if err != nil {
			return nil, err
		}
		i = end
		if i < len(s) && isQuantifier(s[i]) {
			i++
		}
	}
	if len(open) > 0 {
		return nil, &Error{"unfinished capture"}
	}
	p.ncap = ncap
	return p, nil
}

func isQuantifier(c byte) bool { return c == '*' || c == '+' || c == '-' || c == '?' }

// itemEnd is the index just past the single-character item at s[i]
// (a set ends after its ']').
func itemEnd(s string, i int) (int, error) {
	switch s[i] {
	case '%':
		if i+1 == len(s) {
			return 0, &Error{"malformed pattern (ends with '%')"}
		}
		return i + 2, nil
	case '[':
		j := i + 1
		if j < len(s) && s[j] == '^' {
			j++
		}
		for first := true; ; first = false {
			if j >= len(s) {
				return 0, &Error{"malformed pattern (missing ']')"}
			}
			c := s[j]
			if c == ']' && !first {
				return j + 1, nil
			}
			j++
			if c == '%' {
				j++ // the escaped byte, checked on the next round
			}
		}
	}
	return i + 1, nil
}

// Capture is one capture of a match: s[Start:End], or the position Start
// (0-based) for a position capture.
type Capture struct {
	Start, End int
	Position   bool
}

// capture lengths while matching
const (
	capOpen     = -1
	capPosition = -2
)

type capState struct{ start, n int }

// Matcher matches one pattern against one subject.
type Matcher struct {
	ctx   context.Context
	p     string
	s     string
	caps  []capState
	depth int
	steps uint
	err   error
}

// NewMatcher prepares to match p against s, stopping when ctx is done.
func (p *Pattern) NewMatcher(ctx context.Context, s string) *Matcher {
	return &Matcher{ctx: ctx, p: p.src, s: s}
}

type abort struct{}

// MatchAt matches the pattern (as if anchored) starting at s[i] and
// returns the end of the match. The error is ctx's, ErrTooComplex, or an
// *Error for a fault in the pattern that only matching finds.
func (m *Matcher) MatchAt(i int) (end int, ok bool, err error) {
	defer m.recover(&err)
	end = m.matchAt(i)
	return end, end >= 0, m.err
}

// Find looks for the first match at or after s[init] (only at s[init] if
// the pattern is anchored) and returns its bounds.
func (m *Matcher) Find(pat *Pattern, init int) (start, end int, ok bool, err error) {
	defer m.recover(&err)
	for i := init; i <= len(m.s); i++ {
		if e := m.matchAt(i); e >= 0 {
			return i, e, true, nil
		}
		if pat.anchored {
			break
		}
	}
	return 0, 0, false, m.err
}

// recover turns the panic with which a match was abandoned into m.err.
func (m *Matcher) recover(err *error) {
	if r := recover(); r != nil {
		if _, isAbort := r.(abort); !isAbort {
			panic(r)
		}
		*err = m.err
	}
}

func (m *Matcher) matchAt(i int) int {
	if m.err != nil {
		panic(abort{})
	}
	m.caps = m.caps[:0]
	m.depth = 0
	return m.match(i, 0)
}

// Captures are the last match's captures, in pattern order.
func (m *Matcher) Captures() []Capture {
	out := make([]Capture, len(m.caps))
	for i, c := range m.caps {
		if c.n == capPosition {
			out[i] = Capture{Start: c.start, End: c.start, Position: true}
		} else {
			out[i] = Capture{Start: c.start, End: c.start + c.n}
		}
	}
	return out
}

func (m *Matcher) tick() {
	m.steps++
	if m.steps%pollEvery == 0 {
		if err := m.ctx.Err(); err != nil {
			m.fail(err)
		}
	}
}

// fail ends the match with err.
func (m *Matcher) fail(err error) {
	m.err = err
	panic(abort{})
}

// match matches m.p[pi:] at m.s[si:] and returns the end of the match in
// s, or -1.
func (m *Matcher) match(si, pi int) int {
	m.depth++
	if m.depth > MaxDepth {
		m.fail(ErrTooComplex)
	}
	r := m.matchLoop(si, pi)
	m.depth--
	return r
}

func (m *Matcher) matchLoop(si, pi int) int {
	p, s := m.p, m.s
	for {
		m.tick()
		if pi == len(p) {
			return si
		}
		switch p[pi] {
		case '(':
			if pi+1 < len(p) && p[pi+1] == ')' {
				return m.withCapture(si, pi+2, capPosition)
			}
			return m.withCapture(si, pi+1, capOpen)
		case ')':
			return m.closeCapture(si, pi+1)
		case '$':
			if pi+1 == len(p) {
				if si == len(s) {
					return si
				}
				return -1
			}
		case '%':
			if pi+1 == len(p) {
				m.fail(&Error{"malformed pattern (ends with '%')"})
			}
			switch d := p[pi+1]; {
			case d == 'b':
				if len(p)-(pi+2) < 2 {
					m.fail(&Error{"malformed pattern (missing arguments to '%b')"})
				}
				if si = m.balanced(si, p[pi+2], p[pi+3]); si < 0 {
					return -1
				}
				pi += 4
				continue
			case d >= '1' && d <= '9':
				if si = m.backref(si, int(d-'1')); si < 0 {
					return -1
				}
				pi += 2
				continue
			}
		}
		ep, _ := itemEnd(p, pi) // the pattern was checked by Compile
		var q byte
		if ep < len(p) {
			q = p[ep]
		}
		here := si < len(s) && m.single(s[si], pi, ep)
		switch q {
		case '?':
			if here {
				if r := m.match(si+1, ep+1); r >= 0 {
					return r
				}
			}
			pi = ep + 1
		case '*':
			return m.greedy(si, pi, ep)
		case '+':
			if !here {
				return -1
			}
			return m.greedy(si+1, pi, ep)
		case '-':
			return m.lazy(si, pi, ep)
		default:
			if !here {
				return -1
			}
			si++
			pi = ep
		}
	}
}

// greedy matches as many bytes of the item p[pi:ep] as it can from si,
// then gives them back one at a time until the rest of the pattern
// matches.
func (m *Matcher) greedy(si, pi, ep int) int {
	n := si
	for n < len(m.s) && m.single(m.s[n], pi, ep) {
		m.tick()
		n++
	}
	for ; n >= si; n-- {
		if r := m.match(n, ep+1); r >= 0 {
			return r
		}
	}
	return -1
}

// lazy takes one more byte of the item p[pi:ep] each time the rest of the
// pattern fails to match.
func (m *Matcher) lazy(si, pi, ep int) int {
	for {
		if r := m.match(si, ep+1); r >= 0 {
			return r
		}
		if si < len(m.s) && m.single(m.s[si], pi, ep) {
			si++
		} else {
			return -1
		}
	}
}

func (m *Matcher) withCapture(si, pi, n int) int {
	m.caps = append(m.caps, capState{si, n})
	r := m.match(si, pi)
	if r < 0 {
		m.caps = m.caps[:len(m.caps)-1]
	}
	return r
}

func (m *Matcher) closeCapture(si, pi int) int {
	k := len(m.caps) - 1
	for m.caps[k].n != capOpen { // Compile made sure there is one
		k--
	}
	m.caps[k].n = si - m.caps[k].start
	r := m.match(si, pi)
	if r < 0 {
		m.caps[k].n = capOpen
	}
	return r
}

// backref matches capture k's text again (a position capture matches the
// empty string, as in gopher-lua).
func (m *Matcher) backref(si, k int) int {
	if k >= len(m.caps) || m.caps[k].n == capOpen {
		m.fail(&Error{"invalid capture index"})
	}
	c := m.caps[k]
	if c.n == capPosition {
		return si
	}
	if len(m.s)-si >= c.n && m.s[si:si+c.n] == m.s[c.start:c.start+c.n] {
		return si + c.n
	}
	return -1
}

// balanced matches %bxy: x, then anything with x and y balanced, then y.
func (m *Matcher) balanced(si int, x, y byte) int {
	if si >= len(m.s) || m.s[si] != x {
		return -1
	}
	level := 1
	for i := si + 1; i < len(m.s); i++ {
		m.tick()
		switch m.s[i] {
		case y:
			if level--; level == 0 {
				return i + 1
			}
		case x:
			level++
		}
	}
	return -1
}

// single reports whether c matches the item p[pi:ep].
func (m *Matcher) single(c byte, pi, ep int) bool {
	switch m.p[pi] {
	case '.':
		return true
	case '%':
		return classMatches(c, m.p[pi+1])
	case '[':
		return m.inSet(c, pi+1, ep-1)
	}
	return m.p[pi] == c
}

// inSet reports whether c is in the set whose body is p[i:end] (end is the
// index of its closing ']').
func (m *Matcher) inSet(c byte, i, end int) bool {
	p := m.p
	want := true
	if p[i] == '^' {
		want = false
		i++
	}
	for i < end {
		switch {
		case p[i] == '%' && i+1 < end:
			if classMatches(c, p[i+1]) {
				return want
			}
			i += 2
		case i+2 < end && p[i+1] == '-':
			if p[i] <= c && c <= p[i+2] {
				return want
			}
			i += 3
		default:
			if p[i] == c {
				return want
			}
			i++
		}
	}
	return !want
}

// classMatches reports whether c is in the class %cl: a letter class, its
// upper-case complement, or else the byte cl itself.
func classMatches(c, cl byte) bool {
	var in bool
	switch cl | 0x20 {
	case 'a':
		in = isAlpha(c)
	case 'c':
		in = c < 0x20 || c == 0x7f
	case 'd':
		in = '0' <= c && c <= '9'
	case 'l':
		in = 'a' <= c && c <= 'z'
	case 'p':
		in = isPunct(c)
	case 's':
		in = c == ' ' || ('\t' <= c && c <= '\r')
	case 'u':
		in = 'A' <= c && c <= 'Z'
	case 'w':
		in = isAlpha(c) || ('0' <= c && c <= '9')
	case 'x':
		in = ('0' <= c && c <= '9') || ('a' <= c|0x20 && c|0x20 <= 'f')
	case 'z':
		in = c == 0
	default:
		return cl == c
	}
	if 'A' <= cl && cl <= 'Z' {
		return !in
	}
	return in
}

func isAlpha(c byte) bool { return 'a' <= c|0x20 && c|0x20 <= 'z' }

func isPunct(c byte) bool {
	return ('!' <= c && c <= '/') || (':' <= c && c <= '@') || ('[' <= c && c <= '`') || ('{' <= c && c <= '~')
}
