package constrain

import (
	"fmt"
	"slices"
)

// Grammars of raw text rather than JSON: vLLM's guided_regex and
// guided_choice (structured_outputs regex and choice). The output is the
// text itself: no whitespace is added around it.

// CompileRegex compiles a regular expression (Go's regexp syntax, RE2; no
// \b) that the whole output must match.
func CompileRegex(pattern string) (*Grammar, error) {
	rx, err := compileRegex(pattern, true)
	if err != nil {
		return nil, err
	}
	n := &node{kind: kText, id: 1, rx: rx, maxItems: -1, maxLen: -1, raw: true}
	return &Grammar{root: n, nodes: 1}, nil
}

// CompileChoice compiles a grammar whose output is exactly one of choices
// (non-empty texts).
func CompileChoice(choices []string) (*Grammar, error) {
	if len(choices) == 0 {
		return nil, fmt.Errorf("no choices")
	}
	c := &compiler{}
	var lits []*node
	var cur *node
	for i, ch := range choices {
		if ch == "" {
			return nil, fmt.Errorf("choice %d is empty", i)
		}
		if cur == nil || len(cur.lits) == maxAlternatives {
			cur = c.newNode(kLiteral)
			cur.raw = true
			lits = append(lits, cur)
		}
		if !slices.Contains(cur.lits, ch) {
			cur.lits = append(cur.lits, ch)
		}
	}
	root := c.union(lits)
	root.raw = true
	return &Grammar{root: root, nodes: c.nodes}, nil
}

// textByte advances raw text by b (in place): valid UTF-8, each character
// a step of the pattern, a character's first bytes allowed only if the
// pattern takes some character they start. lex.n counts a character's
// bytes to go.
func (l *lexer) textByte(b byte) bool {
	switch {
	case l.sub == strUTF8:
		done, ok := l.utf8More(b)
		if done {
			return l.textRune(l.code)
		}
		return ok && l.pendingOK()
	case b < 0x80:
		return l.textRune(rune(b))
	}
	return l.utf8Begin(b) && l.pendingOK()
}

func (l *lexer) textRune(c rune) bool {
	l.code = 0
	l.rx = l.rx.next(c)
	return !l.rx.dead
}
