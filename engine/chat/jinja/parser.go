package jinja

import (
	"fmt"
	"strings"
)

// The parser follows jinja2's grammar and precedence:
//   condexpr: or ("if" or ["else" condexpr])*
//   or > and > not > compare (== != < <= > >= in, not in)
//   > + - > ~ > * / // % > ** > unary - + > primary postfix ([.] () ) filters/tests

// maxNesting bounds the parser's recursion (and so the evaluator's), so a
// hostile template cannot exhaust the stack.
const maxNesting = 200

type parser struct {
	name     string
	toks     []token
	pos      int
	depth    int
	tagStack []string
	endStack [][]string
}

func (p *parser) cur() token  { return p.toks[p.pos] }
func (p *parser) peek() token { return p.toks[min(p.pos+1, len(p.toks)-1)] }
func (p *parser) next() token {
	t := p.toks[p.pos]
	if p.pos < len(p.toks)-1 {
		p.pos++
	}
	return t
}

func (p *parser) failAt(line int, format string, args ...any) error {
	return &SyntaxError{Name: p.name, Line: line, Msg: fmt.Sprintf(format, args...)}
}

func (p *parser) fail(format string, args ...any) error {
	return p.failAt(p.cur().line, format, args...)
}

func (p *parser) isOp(op string) bool {
	t := p.cur()
	return t.kind == tOp && t.val == op
}

func (p *parser) isName(name string) bool {
	t := p.cur()
	return t.kind == tName && t.val == name
}

func (p *parser) skipOp(op string) bool {
	if p.isOp(op) {
		p.next()
		return true
	}
	return false
}

func (p *parser) skipName(name string) bool {
	if p.isName(name) {
		p.next()
		return true
	}
	return false
}

func (p *parser) expectOp(op string) error {
	if p.skipOp(op) {
		return nil
	}
	return p.unexpected(pyRepr(String(op)))
}

func (p *parser) expectName(name string) error {
	if p.skipName(name) {
		return nil
	}
	return p.unexpected(pyRepr(String(name)))
}

func (p *parser) expectKind(k tokKind, desc string) (token, error) {
	if p.cur().kind == k {
		return p.next(), nil
	}
	return token{}, p.unexpected(pyRepr(String(desc)))
}

func (p *parser) unexpected(want string) error {
	t := p.cur()
	if t.kind == tEOF {
		return p.fail("unexpected end of template, expected %s.", want)
	}
	return p.fail("expected token %s, got %s", want, pyRepr(String(t.describe())))
}

func (p *parser) enter() error {
	p.depth++
	if p.depth > maxNesting {
		return p.fail("template nesting too deep")
	}
	return nil
}

func (p *parser) leave() { p.depth-- }

func parseTemplate(name string, toks []token) ([]node, error) {
	p := &parser{name: name, toks: toks}
	body, err := p.subparse(nil)
	if err != nil {
		return nil, err
	}
	return body, nil
}

// subparse parses until EOF or a block tag whose name is in end; it stops
// with that name as the current token.
func (p *parser) subparse(end []string) ([]node, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	if end != nil {
		p.endStack = append(p.endStack, end)
		defer func() { p.endStack = p.endStack[:len(p.endStack)-1] }()
	}
	var body []node
	for {
		t := p.cur()
		switch t.kind {
		case tEOF:
			return body, nil
		case tData:
			p.next()
			body = append(body, &textStmt{pos{t.line}, t.val})
		case tVarBegin:
			p.next()
			e, err := p.parseTuple(false, true, nil, false)
			if err != nil {
				return nil, err
			}
			if _, err := p.expectKind(tVarEnd, "end of print statement"); err != nil {
				return nil, err
			}
			body = append(body, &outputStmt{pos{t.line}, e})
		case tBlockBegin:
			p.next()
			if end != nil && p.cur().kind == tName {
				for _, e := range end {
					if p.cur().val == e {
						return body, nil
					}
				}
			}
			st, err := p.parseStatement()
			if err != nil {
				return nil, err
			}
			if st != nil {
				body = append(body, st)
			}
			if _, err := p.expectKind(tBlockEnd, "end of statement block"); err != nil {
				return nil, err
			}
		default:
			return nil, p.fail("unexpected %s", pyRepr(String(t.describe())))
		}
	}
}

// parseStatements parses a block body (after the opening tag's arguments)
// up to one of end; the end tag name is left as the current token, or
// consumed when drop is set.
func (p *parser) parseStatements(end []string, drop bool) ([]node, error) {
	p.skipOp(":")
	if _, err := p.expectKind(tBlockEnd, "end of statement block"); err != nil {
		return nil, err
	}
	body, err := p.subparse(end)
	if err != nil {
		return nil, err
	}
	if p.cur().kind == tEOF {
		return nil, p.failEOF(end)
	}
	if drop {
		p.next()
	}
	return body, nil
}

func (p *parser) failEOF(end []string) error {
	stack := append(append([][]string(nil), p.endStack...), end)
	return p.failUnknown("", stack, p.cur().line)
}

func (p *parser) failUnknown(name string, stack [][]string, line int) error {
	expected := map[string]bool{}
	for _, s := range stack {
		for _, e := range s {
			expected[e] = true
		}
	}
	var msg []string
	if name == "" {
		msg = append(msg, "Unexpected end of template.")
	} else {
		msg = append(msg, fmt.Sprintf("Encountered unknown tag %s.", pyRepr(String(name))))
	}
	if len(stack) > 0 {
		var q []string
		for _, e := range stack[len(stack)-1] {
			q = append(q, pyRepr(String(e)))
		}
		looking := strings.Join(q, " or ")
		if name != "" && expected[name] {
			msg = append(msg, "You probably made a nesting mistake. Jinja is expecting this tag, but currently looking for "+looking+".")
		} else {
			msg = append(msg, "Jinja was looking for the following tags: "+looking+".")
		}
	}
	if len(p.tagStack) > 0 {
		msg = append(msg, "The innermost block that needs to be closed is "+pyRepr(String(p.tagStack[len(p.tagStack)-1]))+".")
	}
	return p.failAt(line, "%s", strings.Join(msg, " "))
}

func (p *parser) parseStatement() (node, error) {
	t := p.cur()
	if t.kind != tName {
		return nil, p.fail("tag name expected")
	}
	p.tagStack = append(p.tagStack, t.val)
	defer func() { p.tagStack = p.tagStack[:len(p.tagStack)-1] }()
	switch t.val {
	case "for":
		return p.parseFor()
	case "if":
		return p.parseIf()
	case "set":
		return p.parseSet()
	case "macro":
		return p.parseMacro()
	case "call":
		return p.parseCallBlock()
	case "filter":
		return p.parseFilterBlock()
	case "with":
		return p.parseWith()
	case "block":
		return p.parseBlock()
	case "print":
		return p.parsePrint()
	case "break", "continue":
		p.next()
		if t.val == "break" {
			return &breakStmt{pos{t.line}}, nil
		}
		return &continueStmt{pos{t.line}}, nil
	case "generation": // transformers' AssistantTracker: renders its body
		p.next()
		body, err := p.parseStatements([]string{"endgeneration"}, true)
		if err != nil {
			return nil, err
		}
		return &scopeBlockStmt{pos{t.line}, body}, nil
	case "extends", "include", "import", "from", "autoescape":
		return nil, p.fail("tag %s is not supported (chat templates have no loader)", pyRepr(String(t.val)))
	}
	p.tagStack = p.tagStack[:len(p.tagStack)-1]
	err := p.failUnknown(t.val, p.endStack, t.line)
	p.tagStack = append(p.tagStack, t.val)
	return nil, err
}

func (p *parser) parseFor() (node, error) {
	line := p.next().line
	target, err := p.parseAssignTarget(true, false, []string{"in"}, false)
	if err != nil {
		return nil, err
	}
	if err := p.expectName("in"); err != nil {
		return nil, err
	}
	iter, err := p.parseTuple(false, false, []string{"recursive"}, false)
	if err != nil {
		return nil, err
	}
	st := &forStmt{pos: pos{line}, target: target, iter: iter}
	if p.skipName("if") {
		if st.filter, err = p.parseExpression(true); err != nil {
			return nil, err
		}
	}
	st.recursive = p.skipName("recursive")
	if st.recursive {
		return nil, p.failAt(line, "recursive for loops are not supported")
	}
	if st.body, err = p.parseStatements([]string{"endfor", "else"}, false); err != nil {
		return nil, err
	}
	if p.next().val == "else" {
		if st.els, err = p.parseStatements([]string{"endfor"}, true); err != nil {
			return nil, err
		}
	}
	return st, nil
}

func (p *parser) parseIf() (node, error) {
	line := p.next().line
	st := &ifStmt{pos: pos{line}}
	for {
		cond, err := p.parseTuple(false, false, nil, false)
		if err != nil {
			return nil, err
		}
		body, err := p.parseStatements([]string{"elif", "else", "endif"}, false)
		if err != nil {
			return nil, err
		}
		st.conds = append(st.conds, cond)
		st.bodies = append(st.bodies, body)
		tok := p.next()
		if tok.val == "elif" {
			continue
		}
		if tok.val == "else" {
			if st.els, err = p.parseStatements([]string{"endif"}, true); err != nil {
				return nil, err
			}
		}
		return st, nil
	}
}

func (p *parser) parseSet() (node, error) {
	line := p.next().line
	target, err := p.parseAssignTarget(true, false, nil, true)
	if err != nil {
		return nil, err
	}
	if p.skipOp("=") {
		v, err := p.parseTuple(false, true, nil, false)
		if err != nil {
			return nil, err
		}
		return &setStmt{pos{line}, target, v}, nil
	}
	filters, err := p.parseFilterChain(false)
	if err != nil {
		return nil, err
	}
	body, err := p.parseStatements([]string{"endset"}, true)
	if err != nil {
		return nil, err
	}
	return &setBlockStmt{pos{line}, target, filters, body}, nil
}

func (p *parser) parseMacro() (node, error) {
	line := p.next().line
	nameTok, err := p.expectKind(tName, "name")
	if err != nil {
		return nil, err
	}
	def := &macroDef{name: nameTok.val}
	if err := p.parseSignature(def); err != nil {
		return nil, err
	}
	if def.body, err = p.parseStatements([]string{"endmacro"}, true); err != nil {
		return nil, err
	}
	analyzeMacro(def)
	return &macroStmt{pos{line}, def}, nil
}

func (p *parser) parseSignature(def *macroDef) error {
	if err := p.expectOp("("); err != nil {
		return err
	}
	for !p.isOp(")") {
		if len(def.params) > 0 {
			if err := p.expectOp(","); err != nil {
				return err
			}
		}
		t, err := p.expectKind(tName, "name")
		if err != nil {
			return err
		}
		if p.skipOp("=") {
			d, err := p.parseExpression(true)
			if err != nil {
				return err
			}
			def.defaults = append(def.defaults, d)
		} else if len(def.defaults) > 0 {
			return p.fail("non-default argument follows default argument")
		}
		def.params = append(def.params, t.val)
	}
	p.next()
	return nil
}

func (p *parser) parseCallBlock() (node, error) {
	line := p.next().line
	def := &macroDef{name: "caller"}
	if p.isOp("(") {
		if err := p.parseSignature(def); err != nil {
			return nil, err
		}
	}
	e, err := p.parseExpression(true)
	if err != nil {
		return nil, err
	}
	call, ok := e.(*callExpr)
	if !ok {
		return nil, p.failAt(line, "expected call")
	}
	if def.body, err = p.parseStatements([]string{"endcall"}, true); err != nil {
		return nil, err
	}
	analyzeMacro(def)
	return &callBlockStmt{pos{line}, call, def}, nil
}

func (p *parser) parseFilterBlock() (node, error) {
	line := p.next().line
	filters, err := p.parseFilterChain(true)
	if err != nil {
		return nil, err
	}
	body, err := p.parseStatements([]string{"endfilter"}, true)
	if err != nil {
		return nil, err
	}
	return &filterBlockStmt{pos{line}, filters, body}, nil
}

func (p *parser) parseWith() (node, error) {
	line := p.next().line
	st := &withStmt{pos: pos{line}}
	for p.cur().kind != tBlockEnd {
		if len(st.targets) > 0 {
			if err := p.expectOp(","); err != nil {
				return nil, err
			}
		}
		target, err := p.parseAssignTarget(true, false, nil, false)
		if err != nil {
			return nil, err
		}
		if err := p.expectOp("="); err != nil {
			return nil, err
		}
		v, err := p.parseExpression(true)
		if err != nil {
			return nil, err
		}
		st.targets = append(st.targets, target)
		st.values = append(st.values, v)
	}
	var err error
	if st.body, err = p.parseStatements([]string{"endwith"}, true); err != nil {
		return nil, err
	}
	return st, nil
}

func (p *parser) parseBlock() (node, error) {
	line := p.next().line
	nameTok, err := p.expectKind(tName, "name")
	if err != nil {
		return nil, err
	}
	p.skipName("scoped")
	p.skipName("required")
	if p.isOp("-") {
		return nil, p.fail("Block names in Jinja have to be valid Python identifiers and may not contain hyphens, use an underscore instead.")
	}
	body, err := p.parseStatements([]string{"endblock"}, true)
	if err != nil {
		return nil, err
	}
	p.skipName(nameTok.val)
	return &scopeBlockStmt{pos{line}, body}, nil
}

func (p *parser) parsePrint() (node, error) {
	line := p.next().line
	var items []expr
	for p.cur().kind != tBlockEnd {
		if len(items) > 0 {
			if err := p.expectOp(","); err != nil {
				return nil, err
			}
		}
		e, err := p.parseExpression(true)
		if err != nil {
			return nil, err
		}
		items = append(items, e)
	}
	// {% print a, b %} prints each expression in turn.
	if len(items) == 1 {
		return &outputStmt{pos{line}, items[0]}, nil
	}
	return &outputStmt{pos{line}, &concatExpr{pos{line}, items}}, nil
}

// parseAssignTarget parses a name, tuple of names, or (withNS) ns.attr.
func (p *parser) parseAssignTarget(withTuple, nameOnly bool, extraEnd []string, withNS bool) (*assignTarget, error) {
	line := p.cur().line
	if nameOnly {
		t, err := p.expectKind(tName, "name")
		if err != nil {
			return nil, err
		}
		return &assignTarget{name: t.val}, nil
	}
	var items []*assignTarget
	isTuple := false
	for {
		if len(items) > 0 {
			if err := p.expectOp(","); err != nil {
				return nil, err
			}
		}
		if p.isTupleEnd(extraEnd) {
			break
		}
		t := p.cur()
		if p.isOp("(") {
			// A parenthesized target list: (a, b).
			p.next()
			if err := p.enter(); err != nil {
				return nil, err
			}
			inner, err := p.parseAssignTarget(true, false, nil, false)
			p.leave()
			if err != nil {
				return nil, err
			}
			if err := p.expectOp(")"); err != nil {
				return nil, err
			}
			items = append(items, inner)
			if !withTuple || !p.isOp(",") {
				break
			}
			isTuple = true
			continue
		}
		if t.kind != tName || isConstName(t.val) {
			if t.kind == tName || t.kind == tString || t.kind == tInt || t.kind == tFloat {
				return nil, p.failAt(line, "can't assign to 'const'")
			}
			if p.isOp("(") || p.isOp("[") || p.isOp("{") {
				return nil, p.failAt(line, "can't assign to this expression")
			}
			return nil, p.fail("unexpected %s", pyRepr(String(t.describe())))
		}
		p.next()
		target := &assignTarget{name: t.val}
		if withNS && p.isOp(".") {
			p.next()
			attr, err := p.expectKind(tName, "name")
			if err != nil {
				return nil, err
			}
			target.attr = attr.val
		}
		items = append(items, target)
		if !withTuple {
			break
		}
		if p.isOp(",") {
			isTuple = true
		} else {
			break
		}
	}
	if !isTuple {
		if len(items) == 1 {
			return items[0], nil
		}
		return nil, p.fail("Expected an expression, got %s", pyRepr(String(p.cur().describe())))
	}
	for _, it := range items {
		if it.attr != "" {
			return nil, p.failAt(line, "can't assign to 'tuple'")
		}
	}
	return &assignTarget{items: items, tuple: true}, nil
}

func isConstName(s string) bool {
	switch s {
	case "true", "false", "True", "False", "none", "None":
		return true
	}
	return false
}

func (p *parser) isTupleEnd(extraEnd []string) bool {
	t := p.cur()
	if t.kind == tVarEnd || t.kind == tBlockEnd || (t.kind == tOp && t.val == ")") {
		return true
	}
	if t.kind == tName {
		for _, e := range extraEnd {
			if t.val == e {
				return true
			}
		}
	}
	return false
}
