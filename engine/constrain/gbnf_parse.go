package constrain

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// GBNF, llama.cpp's grammar format: rules `name ::= alternatives`, where an
// alternative is a sequence of "literals", [character classes] (negated
// with ^), . (any character), rule names and (groups), each optionally
// repeated with *, +, ? or {m}, {m,}, {m,n}; # comments to the end of the
// line. A rule ends at the end of its line unless a group is open or the
// line ends with |. The output must match the rule named root.

// gAST is a parsed expression.
type gAST struct {
	op       byte // 'a' alternatives, 's' sequence, 'c' character class, 'r' rule reference, '*' repetition
	subs     []*gAST
	cls      *charClass
	name     string
	min, max int // repetition; max -1: unbounded
}

// charClass is a set of code points: ranges, or their complement.
type charClass struct {
	ranges []runeRange
	neg    bool
}

type runeRange struct{ lo, hi rune }

func (c *charClass) matches(r rune) bool {
	in := false
	for _, g := range c.ranges {
		if r >= g.lo && r <= g.hi {
			in = true
			break
		}
	}
	return in != c.neg
}

// intersects reports whether c holds some code point in lo…hi.
func (c *charClass) intersects(lo, hi rune) bool {
	if !c.neg {
		for _, g := range c.ranges {
			if g.lo <= hi && g.hi >= lo {
				return true
			}
		}
		return false
	}
	// Negated: some code point of lo…hi is in none of the ranges. Skip
	// past the ranges that cover lo until one does not.
	for lo <= hi {
		next := lo
		for _, g := range c.ranges {
			if g.lo <= lo && g.hi >= lo {
				next = g.hi + 1
				break
			}
		}
		if next == lo {
			return true
		}
		lo = next
	}
	return false
}

// maxRepeat bounds {m,n} counts (each count is a copy of the item).
const maxRepeat = 1000

type gbnfParser struct {
	src   string
	pos   int
	rules map[string]*gAST
	order []string
}

// GrammarError is a grammar text that does not parse or cannot be used;
// Line and Col locate it (1-based) when they are known.
type GrammarError struct {
	Line, Col int
	Msg       string
}

func (e *GrammarError) Error() string {
	if e.Line == 0 {
		return "grammar: " + e.Msg
	}
	return fmt.Sprintf("grammar: line %d, column %d: %s", e.Line, e.Col, e.Msg)
}

func (p *gbnfParser) fail(format string, args ...any) error {
	line := 1 + strings.Count(p.src[:p.pos], "\n")
	col := p.pos - strings.LastIndexByte(p.src[:p.pos], '\n')
	return &GrammarError{Line: line, Col: col, Msg: fmt.Sprintf(format, args...)}
}

func parseGBNF(src string) (*gbnfParser, error) {
	p := &gbnfParser{src: src, rules: map[string]*gAST{}}
	for {
		p.space(true)
		if p.pos >= len(p.src) {
			break
		}
		name := p.name()
		if name == "" {
			return nil, p.fail("expected a rule name")
		}
		p.space(false)
		if !strings.HasPrefix(p.src[p.pos:], "::=") {
			return nil, p.fail("expected ::= after %q", name)
		}
		p.pos += 3
		p.space(true)
		alt, err := p.alternates(false)
		if err != nil {
			return nil, err
		}
		if _, dup := p.rules[name]; dup {
			return nil, p.fail("rule %q defined twice", name)
		}
		p.rules[name] = alt
		p.order = append(p.order, name)
		p.space(false)
		if p.pos < len(p.src) && p.src[p.pos] != '\n' && p.src[p.pos] != '\r' {
			return nil, p.fail("unexpected %q", p.src[p.pos])
		}
	}
	if _, ok := p.rules["root"]; !ok {
		return nil, &GrammarError{Msg: "no rule named root"}
	}
	return p, nil
}

// space skips blanks and comments, and newlines too when nl.
func (p *gbnfParser) space(nl bool) {
	for p.pos < len(p.src) {
		switch c := p.src[p.pos]; {
		case c == ' ' || c == '\t':
			p.pos++
		case c == '#':
			for p.pos < len(p.src) && p.src[p.pos] != '\n' {
				p.pos++
			}
		case nl && (c == '\n' || c == '\r'):
			p.pos++
		default:
			return
		}
	}
}

func isWordChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'
}

func (p *gbnfParser) name() string {
	i := p.pos
	for p.pos < len(p.src) && isWordChar(p.src[p.pos]) {
		p.pos++
	}
	return p.src[i:p.pos]
}

func (p *gbnfParser) alternates(nested bool) (*gAST, error) {
	a := &gAST{op: 'a'}
	for {
		s, err := p.sequence(nested)
		if err != nil {
			return nil, err
		}
		a.subs = append(a.subs, s)
		if p.pos < len(p.src) && p.src[p.pos] == '|' {
			p.pos++
			p.space(true)
			continue
		}
		return a, nil
	}
}

func (p *gbnfParser) sequence(nested bool) (*gAST, error) {
	s := &gAST{op: 's'}
	for p.pos < len(p.src) {
		c := p.src[p.pos]
		var item *gAST
		switch {
		case c == '"':
			p.pos++
			lit := &gAST{op: 's'}
			for {
				if p.pos >= len(p.src) || p.src[p.pos] == '\n' {
					return nil, p.fail("unterminated string")
				}
				if p.src[p.pos] == '"' {
					p.pos++
					break
				}
				r, err := p.char()
				if err != nil {
					return nil, err
				}
				lit.subs = append(lit.subs, &gAST{op: 'c', cls: &charClass{ranges: []runeRange{{r, r}}}})
			}
			item = lit
		case c == '[':
			p.pos++
			cls := &charClass{}
			if p.pos < len(p.src) && p.src[p.pos] == '^' {
				cls.neg = true
				p.pos++
			}
			for {
				if p.pos >= len(p.src) || p.src[p.pos] == '\n' {
					return nil, p.fail("unterminated character class")
				}
				if p.src[p.pos] == ']' {
					p.pos++
					break
				}
				lo, err := p.char()
				if err != nil {
					return nil, err
				}
				hi := lo
				if p.pos+1 < len(p.src) && p.src[p.pos] == '-' && p.src[p.pos+1] != ']' {
					p.pos++
					if hi, err = p.char(); err != nil {
						return nil, err
					}
					if hi < lo {
						return nil, p.fail("range %q-%q is empty", lo, hi)
					}
				}
				cls.ranges = append(cls.ranges, runeRange{lo, hi})
			}
			item = &gAST{op: 'c', cls: cls}
		case c == '.':
			p.pos++
			item = &gAST{op: 'c', cls: &charClass{neg: true}}
		case c == '(':
			p.pos++
			p.space(true)
			g, err := p.alternates(true)
			if err != nil {
				return nil, err
			}
			p.space(true)
			if p.pos >= len(p.src) || p.src[p.pos] != ')' {
				return nil, p.fail("expected )")
			}
			p.pos++
			item = g
		case isWordChar(c):
			start := p.pos
			name := p.name()
			// A name followed by ::= starts the next rule (a rule may end
			// without a newline only at the end of the text).
			save := p.pos
			p.space(false)
			if strings.HasPrefix(p.src[p.pos:], "::=") {
				p.pos = start
				return nil, p.fail("rule %q starts before the previous rule's line ended", name)
			}
			p.pos = save
			item = &gAST{op: 'r', name: name}
		default:
			return s, nil
		}
		p.space(nested)
		for p.pos < len(p.src) {
			op := p.src[p.pos]
			min, max := 0, 0
			switch op {
			case '*':
				min, max = 0, -1
			case '+':
				min, max = 1, -1
			case '?':
				min, max = 0, 1
			case '{':
				var err error
				if min, max, err = p.braces(); err != nil {
					return nil, err
				}
				p.pos-- // braces consumed the '}'; the shared ++ below
			default:
				goto done
			}
			p.pos++
			item = &gAST{op: '*', subs: []*gAST{item}, min: min, max: max}
			p.space(nested)
		}
	done:
		s.subs = append(s.subs, item)
	}
	return s, nil
}

// braces reads {m}, {m,} or {m,n}, ending past the '}'.
func (p *gbnfParser) braces() (int, int, error) {
	end := strings.IndexByte(p.src[p.pos:], '}')
	if end < 0 {
		return 0, 0, p.fail("unterminated {")
	}
	body := strings.ReplaceAll(p.src[p.pos+1:p.pos+end], " ", "")
	lo, hi, comma := strings.Cut(body, ",")
	m, err := strconv.Atoi(lo)
	if err != nil || m < 0 || m > maxRepeat {
		return 0, 0, p.fail("bad repetition {%s}", body)
	}
	n := m
	if comma {
		n = -1
		if hi != "" {
			if n, err = strconv.Atoi(hi); err != nil || n < m || n > maxRepeat {
				return 0, 0, p.fail("bad repetition {%s}", body)
			}
		}
	}
	p.pos += end + 1
	return m, n, nil
}

// char reads one character of a literal or class, escapes included.
func (p *gbnfParser) char() (rune, error) {
	c := p.src[p.pos]
	if c != '\\' {
		r, n := utf8.DecodeRuneInString(p.src[p.pos:])
		if r == utf8.RuneError && n <= 1 {
			return 0, p.fail("invalid UTF-8")
		}
		p.pos += n
		return r, nil
	}
	if p.pos+1 >= len(p.src) {
		return 0, p.fail("unterminated escape")
	}
	e := p.src[p.pos+1]
	p.pos += 2
	switch e {
	case 'n':
		return '\n', nil
	case 'r':
		return '\r', nil
	case 't':
		return '\t', nil
	case '\\', '"', '[', ']', '-', '^', '.', '(', ')', '|', '*', '+', '?', '/', '\'':
		return rune(e), nil
	case 'x', 'u', 'U':
		n := map[byte]int{'x': 2, 'u': 4, 'U': 8}[e]
		if p.pos+n > len(p.src) {
			return 0, p.fail("short \\%c escape", e)
		}
		v, err := strconv.ParseUint(p.src[p.pos:p.pos+n], 16, 32)
		if err != nil || v > utf8.MaxRune {
			return 0, p.fail("bad \\%c escape", e)
		}
		p.pos += n
		return rune(v), nil
	}
	return 0, p.fail("unknown escape \\%c", e)
}
