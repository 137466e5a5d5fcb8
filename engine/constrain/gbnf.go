package constrain

import (
	"fmt"
	"sort"
	"sync"
)

// A GBNF grammar runs on the automaton's configurations as stacks of
// positions: a configuration's node is an alternative (kGSeq) and idx the
// element it waits at, always a character class once expanded; its frames
// are where the enclosing alternatives resume. A reference that ends its
// alternative pushes no frame, so repetitions (right recursion) keep the
// stack flat. Frames are interned per grammar, so that equal stacks reached
// by different paths compare equal and merge.

// gelem is an element of an alternative: a character class or a rule.
type gelem struct {
	cls  *charClass
	rule *node // kGRule
}

// maxGramDepth bounds the rules expanded without reading a character.
const maxGramDepth = 64

// maxGramConfigs bounds the stacks a grammar state keeps (an ambiguous
// grammar's alternatives); past it the grammar refuses the character.
const maxGramConfigs = 1024

type frameKey struct {
	node *node
	idx  int32
	up   *frame
}

type frameTable struct {
	mu sync.Mutex
	m  map[frameKey]*frame
}

func (t *frameTable) frame(n *node, idx int32, up *frame) *frame {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := frameKey{n, idx, up}
	if f, ok := t.m[k]; ok {
		return f
	}
	f := &frame{node: n, idx: idx, up: up, phase: pGram}
	t.m[k] = f
	return f
}

// CompileGBNF compiles a grammar in llama.cpp's GBNF (gbnf_parse.go) that
// the whole output must match. Left recursion is refused.
func CompileGBNF(src string) (*Grammar, error) {
	p, err := parseGBNF(src)
	if err != nil {
		return nil, err
	}
	c := &gbnfCompiler{p: p, rules: map[string]*node{}, frames: &frameTable{m: map[frameKey]*frame{}}}
	for _, name := range p.order {
		c.rules[name] = c.newRule(name)
	}
	for _, name := range p.order {
		if err := c.fill(c.rules[name], p.rules[name]); err != nil {
			return nil, err
		}
	}
	if err := c.checkLeftRecursion(); err != nil {
		return nil, err
	}
	root := c.rules["root"]
	var initial []config
	for _, alt := range root.alts {
		initial = gExpand(config{node: alt, phase: pGram}, initial, 0)
	}
	initial = dedupe(initial)
	if len(initial) == 0 {
		return nil, &GrammarError{Msg: "root matches nothing"}
	}
	return &Grammar{root: root, nodes: c.nodes, initial: initial}, nil
}

type gbnfCompiler struct {
	p      *gbnfParser
	rules  map[string]*node
	all    []*node // every rule, generated ones too
	nodes  int
	frames *frameTable
	anon   int
}

func (c *gbnfCompiler) newNode(k kind) *node {
	c.nodes++
	return &node{kind: k, id: int32(c.nodes), maxItems: -1, maxLen: -1, frames: c.frames}
}

func (c *gbnfCompiler) newRule(name string) *node {
	n := c.newNode(kGRule)
	n.lits = []string{name} // the rule's name, for errors
	c.all = append(c.all, n)
	return n
}

func (c *gbnfCompiler) anonRule(of string) *node {
	c.anon++
	return c.newRule(fmt.Sprintf("%s-%d", of, c.anon))
}

// fill sets rule r's alternatives from a (an 'a' node, or any expression).
func (c *gbnfCompiler) fill(r *node, a *gAST) error {
	alts := []*gAST{a}
	if a.op == 'a' {
		alts = a.subs
	}
	for _, s := range alts {
		seq := c.newNode(kGSeq)
		if err := c.elems(seq, s, r.lits[0]); err != nil {
			return err
		}
		r.alts = append(r.alts, seq)
	}
	return nil
}

// elems appends expression a's elements to seq.
func (c *gbnfCompiler) elems(seq *node, a *gAST, rule string) error {
	switch a.op {
	case 'c':
		seq.gel = append(seq.gel, gelem{cls: a.cls})
	case 's':
		for _, x := range a.subs {
			if err := c.elems(seq, x, rule); err != nil {
				return err
			}
		}
	case 'r':
		r, ok := c.rules[a.name]
		if !ok {
			return &GrammarError{Msg: fmt.Sprintf("rule %q refers to undefined rule %q", rule, a.name)}
		}
		seq.gel = append(seq.gel, gelem{rule: r})
	case 'a':
		g := c.anonRule(rule)
		if err := c.fill(g, a); err != nil {
			return err
		}
		seq.gel = append(seq.gel, gelem{rule: g})
	case '*':
		// The item's elements, spliced where it repeats (a character
		// class, a literal, a reference): a repeated character then
		// pushes no frame. Alternatives stay a rule of their own.
		tmp := &node{}
		if err := c.elems(tmp, a.subs[0], rule); err != nil {
			return err
		}
		item := tmp.gel
		for i := 0; i < a.min; i++ {
			seq.gel = append(seq.gel, item...)
		}
		switch {
		case a.max < 0: // S ::= item S | ε
			s := c.anonRule(rule)
			loop := c.newNode(kGSeq)
			loop.gel = append(append([]gelem(nil), item...), gelem{rule: s})
			s.alts = []*node{loop, c.newNode(kGSeq)}
			seq.gel = append(seq.gel, gelem{rule: s})
		case a.max > a.min: // O_k ::= item O_k-1 | ε
			var prev *node
			for k := 1; k <= a.max-a.min; k++ {
				o := c.anonRule(rule)
				more := c.newNode(kGSeq)
				more.gel = append([]gelem(nil), item...)
				if prev != nil {
					more.gel = append(more.gel, gelem{rule: prev})
				}
				o.alts = []*node{more, c.newNode(kGSeq)}
				prev = o
			}
			seq.gel = append(seq.gel, gelem{rule: prev})
		}
	}
	return nil
}

// checkLeftRecursion refuses a rule that can reach itself before reading a
// character (its expansion would not end).
func (c *gbnfCompiler) checkLeftRecursion() error {
	nullable := map[*node]bool{}
	for changed := true; changed; {
		changed = false
		for _, r := range c.all {
			if nullable[r] {
				continue
			}
			for _, alt := range r.alts {
				if allNullable(alt.gel, nullable) {
					nullable[r], changed = true, true
					break
				}
			}
		}
	}
	const (
		unseen = iota
		active
		finished
	)
	state := map[*node]int{}
	var visit func(r *node) error
	visit = func(r *node) error {
		switch state[r] {
		case active:
			return &GrammarError{Msg: fmt.Sprintf("rule %q is left-recursive", r.lits[0])}
		case finished:
			return nil
		}
		state[r] = active
		for _, alt := range r.alts {
			for _, e := range alt.gel {
				if e.rule == nil {
					break
				}
				if err := visit(e.rule); err != nil {
					return err
				}
				if !nullable[e.rule] {
					break
				}
			}
		}
		state[r] = finished
		return nil
	}
	rules := append([]*node(nil), c.all...)
	sort.Slice(rules, func(i, j int) bool { return rules[i].id < rules[j].id })
	for _, r := range rules {
		if err := visit(r); err != nil {
			return err
		}
	}
	return nil
}

func allNullable(gel []gelem, nullable map[*node]bool) bool {
	for _, e := range gel {
		if e.rule == nil || !nullable[e.rule] {
			return false
		}
	}
	return true
}

// gExpand appends the configurations c reaches without reading: waiting at
// a character class, or (the root's alternative done) complete.
func gExpand(c config, out []config, depth int) []config {
	for {
		seq := c.node
		if int(c.idx) == len(seq.gel) {
			if c.up == nil {
				c.phase, c.lex = pRootDone, lexer{}
				return appendConfig(out, c)
			}
			f := c.up
			c.node, c.idx, c.up = f.node, f.idx, f.up
			continue
		}
		e := seq.gel[c.idx]
		if e.cls != nil {
			c.phase, c.lex = pGram, lexer{mode: lexGram}
			return appendConfig(out, c)
		}
		if depth >= maxGramDepth {
			return out
		}
		up := c.up
		if int(c.idx)+1 < len(seq.gel) {
			up = seq.frames.frame(seq, c.idx+1, c.up)
		}
		for _, alt := range e.rule.alts {
			out = gExpand(config{node: alt, up: up, phase: pGram}, out, depth+1)
		}
		return out
	}
}

func appendConfig(out []config, c config) []config {
	if len(out) >= maxGramConfigs {
		return out
	}
	for i := range out {
		if out[i] == c {
			return out
		}
	}
	return append(out, c)
}

// gramByte advances a configuration waiting at a character class by b:
// UTF-8 decoded, the class tested on each whole character, and a
// character's first bytes taken only if the class holds some character
// they start.
func (c config) gramByte(b byte, out []config) []config {
	l := &c.lex
	var r rune
	switch {
	case l.sub == strUTF8:
		done, ok := l.utf8More(b)
		switch {
		case !ok:
			return out
		case !done:
			if !c.node.gel[c.idx].cls.intersects(l.pending()) {
				return out
			}
			return append(out, c)
		}
		r = l.code
	case b < 0x80:
		r = rune(b)
	default:
		if !l.utf8Begin(b) || !c.node.gel[c.idx].cls.intersects(l.pending()) {
			return out
		}
		return append(out, c)
	}
	if !c.node.gel[c.idx].cls.matches(r) {
		return out
	}
	c.idx++
	c.lex = lexer{}
	return gExpand(c, out, 0)
}
