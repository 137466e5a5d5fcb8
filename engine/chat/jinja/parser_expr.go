package jinja

// parseTuple parses an expression, or a tuple when commas separate several.
func (p *parser) parseTuple(simplified, withCondexpr bool, extraEnd []string, explicitParens bool) (expr, error) {
	line := p.cur().line
	var args []expr
	isTuple := false
	for {
		if len(args) > 0 {
			if err := p.expectOp(","); err != nil {
				return nil, err
			}
		}
		if p.isTupleEnd(extraEnd) {
			break
		}
		var e expr
		var err error
		if simplified {
			e, err = p.parsePrimary()
		} else {
			e, err = p.parseExpression(withCondexpr)
		}
		if err != nil {
			return nil, err
		}
		args = append(args, e)
		if p.isOp(",") {
			isTuple = true
		} else {
			break
		}
	}
	if !isTuple {
		if len(args) > 0 {
			return args[0], nil
		}
		if !explicitParens {
			return nil, p.fail("Expected an expression, got %s", pyRepr(String(p.cur().describe())))
		}
	}
	return &listExpr{pos{line}, args, true}, nil
}

func (p *parser) parseExpression(withCondexpr bool) (expr, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	if withCondexpr {
		return p.parseCondexpr()
	}
	return p.parseOr()
}

func (p *parser) parseCondexpr() (expr, error) {
	line := p.cur().line
	e1, err := p.parseOr()
	if err != nil {
		return nil, err
	}
	for p.skipName("if") {
		e2, err := p.parseOr()
		if err != nil {
			return nil, err
		}
		var e3 expr
		if p.skipName("else") {
			if err := p.enter(); err != nil {
				return nil, err
			}
			e3, err = p.parseCondexpr()
			p.leave()
			if err != nil {
				return nil, err
			}
		}
		e1 = &condExpr{pos{line}, e2, e1, e3}
		line = p.cur().line
	}
	return e1, nil
}

func (p *parser) parseOr() (expr, error) {
	return p.leftAssoc(p.parseAnd, func() string { return p.nameOp("or") },
		func(line int, _ string, l, r expr) expr { return &orExpr{pos{line}, l, r} })
}

func (p *parser) parseAnd() (expr, error) {
	return p.leftAssoc(p.parseNot, func() string { return p.nameOp("and") },
		func(line int, _ string, l, r expr) expr { return &andExpr{pos{line}, l, r} })
}

func (p *parser) parseNot() (expr, error) {
	if p.isName("not") {
		line := p.next().line
		if err := p.enter(); err != nil {
			return nil, err
		}
		defer p.leave()
		x, err := p.parseNot()
		if err != nil {
			return nil, err
		}
		return &notExpr{pos{line}, x}, nil
	}
	return p.parseCompare()
}

func (p *parser) parseCompare() (expr, error) {
	line := p.cur().line
	e, err := p.parseMath1()
	if err != nil {
		return nil, err
	}
	var ops []cmpOp
	for {
		t := p.cur()
		var op string
		switch {
		case t.kind == tOp && (t.val == "==" || t.val == "!=" || t.val == "<" || t.val == "<=" || t.val == ">" || t.val == ">="):
			p.next()
			op = t.val
		case p.isName("in"):
			p.next()
			op = "in"
		case p.isName("not") && p.peek().kind == tName && p.peek().val == "in":
			p.next()
			p.next()
			op = "notin"
		}
		if op == "" {
			break
		}
		x, err := p.parseMath1()
		if err != nil {
			return nil, err
		}
		ops = append(ops, cmpOp{op, x})
		line = p.cur().line
	}
	if len(ops) == 0 {
		return e, nil
	}
	return &compareExpr{pos{line}, e, ops}, nil
}

func (p *parser) parseMath1() (expr, error) {
	return p.leftAssoc(p.parseConcat, func() string { return p.symbolOp("+", "-") }, newBinExpr)
}

func (p *parser) parseConcat() (expr, error) {
	line := p.cur().line
	first, err := p.parseMath2()
	if err != nil {
		return nil, err
	}
	if !p.isOp("~") {
		return first, nil
	}
	items := []expr{first}
	for p.skipOp("~") {
		x, err := p.parseMath2()
		if err != nil {
			return nil, err
		}
		items = append(items, x)
	}
	return &concatExpr{pos{line}, items}, nil
}

func (p *parser) parseMath2() (expr, error) {
	return p.leftAssoc(p.parsePow, func() string { return p.symbolOp("*", "/", "//", "%") }, newBinExpr)
}

func (p *parser) parsePow() (expr, error) {
	return p.leftAssoc(func() (expr, error) { return p.parseUnary(true) }, func() string { return p.symbolOp("**") }, newBinExpr)
}

// leftAssoc parses operand (op operand)* into left-associated nodes made by
// join, each at the line where its left side starts (the first) or where the
// previous operator ended; match consumes an operator and names it, or
// returns "" when none follows.
func (p *parser) leftAssoc(operand func() (expr, error), match func() string, join func(line int, op string, l, r expr) expr) (expr, error) {
	line := p.cur().line
	l, err := operand()
	if err != nil {
		return nil, err
	}
	for op := match(); op != ""; op = match() {
		r, err := operand()
		if err != nil {
			return nil, err
		}
		l = join(line, op, l, r)
		line = p.cur().line
	}
	return l, nil
}

// nameOp consumes the keyword operator name if it comes next.
func (p *parser) nameOp(name string) string {
	if p.skipName(name) {
		return name
	}
	return ""
}

// symbolOp consumes the next token if it is one of ops.
func (p *parser) symbolOp(ops ...string) string {
	for _, op := range ops {
		if p.isOp(op) {
			return p.next().val
		}
	}
	return ""
}

func newBinExpr(line int, op string, l, r expr) expr { return &binExpr{pos{line}, op, l, r} }

func (p *parser) parseUnary(withFilter bool) (expr, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	line := p.cur().line
	var e expr
	var err error
	switch {
	case p.isOp("-"):
		p.next()
		x, err := p.parseUnary(false)
		if err != nil {
			return nil, err
		}
		e = &negExpr{pos{line}, x, true}
	case p.isOp("+"):
		p.next()
		x, err := p.parseUnary(false)
		if err != nil {
			return nil, err
		}
		e = &negExpr{pos{line}, x, false}
	default:
		if e, err = p.parsePrimary(); err != nil {
			return nil, err
		}
	}
	if e, err = p.parsePostfix(e); err != nil {
		return nil, err
	}
	if withFilter {
		return p.parseFilterExpr(e)
	}
	return e, nil
}

func (p *parser) parsePrimary() (expr, error) {
	t := p.cur()
	line := t.line
	switch t.kind {
	case tName:
		p.next()
		switch t.val {
		case "true", "True":
			return &constExpr{pos{line}, Bool(true)}, nil
		case "false", "False":
			return &constExpr{pos{line}, Bool(false)}, nil
		case "none", "None":
			return &constExpr{pos{line}, None()}, nil
		}
		return &nameExpr{pos{line}, t.val}, nil
	case tString:
		p.next()
		s := t.val
		for p.cur().kind == tString {
			s += p.next().val
		}
		return &constExpr{pos{line}, String(s)}, nil
	case tInt, tFloat:
		p.next()
		return &constExpr{pos{line}, t.num}, nil
	case tOp:
		switch t.val {
		case "(":
			p.next()
			if err := p.enter(); err != nil {
				return nil, err
			}
			e, err := p.parseTuple(false, true, nil, true)
			p.leave()
			if err != nil {
				return nil, err
			}
			if err := p.expectOp(")"); err != nil {
				return nil, err
			}
			return e, nil
		case "[":
			return p.parseList()
		case "{":
			return p.parseDict()
		}
	}
	return nil, p.fail("unexpected %s", pyRepr(String(t.describe())))
}

func (p *parser) parseList() (expr, error) {
	line := p.next().line
	var items []expr
	for !p.isOp("]") {
		if len(items) > 0 {
			if err := p.expectOp(","); err != nil {
				return nil, err
			}
		}
		if p.isOp("]") {
			break
		}
		e, err := p.parseExpression(true)
		if err != nil {
			return nil, err
		}
		items = append(items, e)
	}
	p.next()
	return &listExpr{pos{line}, items, false}, nil
}

func (p *parser) parseDict() (expr, error) {
	line := p.next().line
	d := &dictExpr{pos: pos{line}}
	for !p.isOp("}") {
		if len(d.keys) > 0 {
			if err := p.expectOp(","); err != nil {
				return nil, err
			}
		}
		if p.isOp("}") {
			break
		}
		k, err := p.parseExpression(true)
		if err != nil {
			return nil, err
		}
		if err := p.expectOp(":"); err != nil {
			return nil, err
		}
		v, err := p.parseExpression(true)
		if err != nil {
			return nil, err
		}
		d.keys = append(d.keys, k)
		d.vals = append(d.vals, v)
	}
	p.next()
	return d, nil
}

func (p *parser) parsePostfix(e expr) (expr, error) {
	for {
		var err error
		switch {
		case p.isOp(".") || p.isOp("["):
			e, err = p.parseSubscript(e)
		case p.isOp("("):
			e, err = p.parseCall(e)
		default:
			return e, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

func (p *parser) parseFilterExpr(e expr) (expr, error) {
	for {
		var err error
		switch {
		case p.isOp("|"):
			var fs []*filterExpr
			fs, err = p.parseFilterChain(false)
			if err == nil {
				for _, f := range fs {
					f.arg = e
					e = f
				}
			}
		case p.isName("is"):
			e, err = p.parseTest(e)
		case p.isOp("("):
			e, err = p.parseCall(e)
		default:
			return e, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

func (p *parser) parseSubscript(e expr) (expr, error) {
	t := p.next()
	if t.val == "." {
		a := p.next()
		switch a.kind {
		case tName:
			return &getattrExpr{pos{t.line}, e, a.val}, nil
		case tInt:
			return &getitemExpr{pos{t.line}, e, &constExpr{pos{a.line}, a.num}}, nil
		}
		return nil, p.failAt(a.line, "expected name or number")
	}
	var args []expr
	for !p.isOp("]") {
		if len(args) > 0 {
			if err := p.expectOp(","); err != nil {
				return nil, err
			}
		}
		a, err := p.parseSubscribed()
		if err != nil {
			return nil, err
		}
		args = append(args, a)
	}
	p.next()
	if len(args) == 1 {
		return &getitemExpr{pos{t.line}, e, args[0]}, nil
	}
	return &getitemExpr{pos{t.line}, e, &listExpr{pos{t.line}, args, true}}, nil
}

func (p *parser) parseSubscribed() (expr, error) {
	line := p.cur().line
	var parts [3]expr
	if p.isOp(":") {
		p.next()
	} else {
		e, err := p.parseExpression(true)
		if err != nil {
			return nil, err
		}
		if !p.isOp(":") {
			return e, nil
		}
		p.next()
		parts[0] = e
	}
	if !p.isOp(":") && !p.isOp("]") && !p.isOp(",") {
		e, err := p.parseExpression(true)
		if err != nil {
			return nil, err
		}
		parts[1] = e
	}
	if p.isOp(":") {
		p.next()
		if !p.isOp("]") && !p.isOp(",") {
			e, err := p.parseExpression(true)
			if err != nil {
				return nil, err
			}
			parts[2] = e
		}
	}
	return &sliceExpr{pos{line}, parts[0], parts[1], parts[2]}, nil
}

type callArgs struct {
	args    []expr
	kwargs  []kwarg
	dynArgs expr
	dynKw   expr
}

func (p *parser) parseCallArgs() (callArgs, error) {
	var ca callArgs
	open := p.next() // (
	ensure := func(ok bool) error {
		if !ok {
			return p.failAt(open.line, "invalid syntax for function call expression")
		}
		return nil
	}
	requireComma := false
	for !p.isOp(")") {
		if requireComma {
			if err := p.expectOp(","); err != nil {
				return ca, err
			}
			if p.isOp(")") {
				break
			}
		}
		switch {
		case p.isOp("*"):
			if err := ensure(ca.dynArgs == nil && ca.dynKw == nil); err != nil {
				return ca, err
			}
			p.next()
			e, err := p.parseExpression(true)
			if err != nil {
				return ca, err
			}
			ca.dynArgs = e
		case p.isOp("**"):
			if err := ensure(ca.dynKw == nil); err != nil {
				return ca, err
			}
			p.next()
			e, err := p.parseExpression(true)
			if err != nil {
				return ca, err
			}
			ca.dynKw = e
		case p.cur().kind == tName && p.peek().kind == tOp && p.peek().val == "=":
			if err := ensure(ca.dynKw == nil); err != nil {
				return ca, err
			}
			name := p.next().val
			p.next()
			e, err := p.parseExpression(true)
			if err != nil {
				return ca, err
			}
			ca.kwargs = append(ca.kwargs, kwarg{name, e})
		default:
			if err := ensure(ca.dynArgs == nil && ca.dynKw == nil && len(ca.kwargs) == 0); err != nil {
				return ca, err
			}
			e, err := p.parseExpression(true)
			if err != nil {
				return ca, err
			}
			ca.args = append(ca.args, e)
		}
		requireComma = true
	}
	if err := p.expectOp(")"); err != nil {
		return ca, err
	}
	return ca, nil
}

func (p *parser) parseCall(fn expr) (expr, error) {
	line := p.cur().line
	ca, err := p.parseCallArgs()
	if err != nil {
		return nil, err
	}
	return &callExpr{pos{line}, fn, ca.args, ca.kwargs, ca.dynArgs, ca.dynKw}, nil
}

// parseFilterChain parses "|f(args)|g..." (or "f(args)|g..." when inline,
// as after {% filter %} and {% set x | f %}).
func (p *parser) parseFilterChain(inline bool) ([]*filterExpr, error) {
	var out []*filterExpr
	for p.isOp("|") || inline {
		if !inline {
			p.next()
		}
		inline = false
		t, err := p.expectKind(tName, "name")
		if err != nil {
			return nil, err
		}
		name := t.val
		for p.isOp(".") {
			p.next()
			n, err := p.expectKind(tName, "name")
			if err != nil {
				return nil, err
			}
			name += "." + n.val
		}
		f := &filterExpr{pos: pos{t.line}, name: name}
		if p.isOp("(") {
			ca, err := p.parseCallArgs()
			if err != nil {
				return nil, err
			}
			f.args, f.kwargs, f.dynArgs, f.dynKw = ca.args, ca.kwargs, ca.dynArgs, ca.dynKw
		}
		fn, ok := filters[name]
		if !ok {
			return nil, p.failAt(t.line, "No filter named %s.", pyRepr(String(name)))
		}
		f.fn = fn
		out = append(out, f)
	}
	return out, nil
}

func (p *parser) parseTest(e expr) (expr, error) {
	line := p.next().line // is
	negated := p.skipName("not")
	t, err := p.expectKind(tName, "name")
	if err != nil {
		return nil, err
	}
	name := t.val
	for p.isOp(".") {
		p.next()
		n, err := p.expectKind(tName, "name")
		if err != nil {
			return nil, err
		}
		name += "." + n.val
	}
	te := &testExpr{pos: pos{line}, arg: e, name: name}
	c := p.cur()
	switch {
	case p.isOp("("):
		ca, err := p.parseCallArgs()
		if err != nil {
			return nil, err
		}
		te.args, te.kwargs, te.dynArgs, te.dynKw = ca.args, ca.kwargs, ca.dynArgs, ca.dynKw
	case (c.kind == tName || c.kind == tString || c.kind == tInt || c.kind == tFloat || p.isOp("[") || p.isOp("{")) &&
		!(c.kind == tName && (c.val == "else" || c.val == "or" || c.val == "and")):
		if p.isName("is") {
			return nil, p.fail("You cannot chain multiple tests with is")
		}
		a, err := p.parsePrimary()
		if err != nil {
			return nil, err
		}
		if a, err = p.parsePostfix(a); err != nil {
			return nil, err
		}
		te.args = []expr{a}
	}
	fn, ok := tests[name]
	if !ok {
		return nil, p.failAt(line, "No test named %s.", pyRepr(String(name)))
	}
	te.fn = fn
	if negated {
		return &notExpr{pos{line}, te}, nil
	}
	return te, nil
}
