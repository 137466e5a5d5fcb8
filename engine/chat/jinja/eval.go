package jinja

import (
	"strings"
	"time"
	"unicode/utf8"
)

// scope holds the variables assigned in one frame. Jinja gives every for
// iteration, macro call, with block and captured block its own frame that
// reads through to the enclosing ones; {% if %} does not create one.
type scope struct {
	names  []string
	vals   []Value
	parent *scope
	// Inline storage for the first variables, so that a loop iteration
	// (target + loop) costs one allocation.
	nbuf [2]string
	vbuf [2]Value
}

func (s *scope) set(name string, v Value) {
	for i, n := range s.names {
		if n == name {
			s.vals[i] = v
			return
		}
	}
	if s.names == nil {
		s.names, s.vals = s.nbuf[:0], s.vbuf[:0]
	}
	s.names = append(s.names, name)
	s.vals = append(s.vals, v)
}

func (s *scope) lookup(name string) (Value, bool) {
	for c := s; c != nil; c = c.parent {
		for i := len(c.names) - 1; i >= 0; i-- {
			if c.names[i] == name {
				return c.vals[i], true
			}
		}
	}
	return Value{}, false
}

type flow uint8

const (
	flowNormal flow = iota
	flowBreak
	flowContinue
)

type evaluator struct {
	tmpl     *Template
	vars     map[string]Value
	out      *strings.Builder
	steps    int
	maxSteps int
	depth    int
	line     int
	now      func() time.Time
}

var errSteps = &RuntimeError{Type: "LimitError", Msg: "template exceeded its evaluation step budget"}
var errDepth = &RuntimeError{Type: "RecursionError", Msg: "maximum recursion depth exceeded"}

func (ev *evaluator) step() error {
	ev.steps++
	if ev.steps > ev.maxSteps {
		return errSteps
	}
	return nil
}

func (ev *evaluator) write(s string) error {
	ev.out.WriteString(s)
	if ev.out.Len() > maxStringLen {
		return errTooBig
	}
	return nil
}

func (ev *evaluator) execBody(body []node, sc *scope) (flow, error) {
	for _, n := range body {
		f, err := ev.exec(n, sc)
		if err != nil || f != flowNormal {
			return f, err
		}
	}
	return flowNormal, nil
}

func (ev *evaluator) exec(n node, sc *scope) (flow, error) {
	if err := ev.step(); err != nil {
		return flowNormal, err
	}
	ev.line = n.line()
	switch x := n.(type) {
	case *textStmt:
		return flowNormal, ev.write(x.text)
	case *outputStmt:
		v, err := ev.eval(x.expr, sc)
		if err != nil {
			return flowNormal, err
		}
		s, err := pyStrErr(v)
		if err != nil {
			return flowNormal, err
		}
		return flowNormal, ev.write(s)
	case *ifStmt:
		for i, c := range x.conds {
			v, err := ev.eval(c, sc)
			if err != nil {
				return flowNormal, err
			}
			if v.Truth() {
				return ev.execBody(x.bodies[i], sc)
			}
		}
		return ev.execBody(x.els, sc)
	case *forStmt:
		return flowNormal, ev.execFor(x, sc)
	case *setStmt:
		v, err := ev.eval(x.value, sc)
		if err != nil {
			return flowNormal, err
		}
		return flowNormal, ev.assign(x.target, v, sc)
	case *setBlockStmt:
		s, err := ev.capture(x.body, &scope{parent: sc})
		if err != nil {
			return flowNormal, err
		}
		v, err := ev.applyFilters(x.filters, String(s), sc)
		if err != nil {
			return flowNormal, err
		}
		return flowNormal, ev.assign(x.target, v, sc)
	case *macroStmt:
		sc.set(x.def.name, Value{kind: KindCallable, ref: &Callable{name: x.def.name, macro: x.def, closure: sc}})
		return flowNormal, nil
	case *callBlockStmt:
		caller := Value{kind: KindCallable, ref: &Callable{name: "caller", macro: x.caller, closure: sc}}
		v, err := ev.evalCall(x.call, sc, &caller)
		if err != nil {
			return flowNormal, err
		}
		s, err := pyStrErr(v)
		if err != nil {
			return flowNormal, err
		}
		return flowNormal, ev.write(s)
	case *filterBlockStmt:
		s, err := ev.capture(x.body, &scope{parent: sc})
		if err != nil {
			return flowNormal, err
		}
		v, err := ev.applyFilters(x.filters, String(s), sc)
		if err != nil {
			return flowNormal, err
		}
		s, err = pyStrErr(v)
		if err != nil {
			return flowNormal, err
		}
		return flowNormal, ev.write(s)
	case *withStmt:
		inner := &scope{parent: sc}
		for i, t := range x.targets {
			v, err := ev.eval(x.values[i], sc)
			if err != nil {
				return flowNormal, err
			}
			if err := ev.assign(t, v, inner); err != nil {
				return flowNormal, err
			}
		}
		return ev.execBody(x.body, inner)
	case *scopeBlockStmt:
		return ev.execBody(x.body, &scope{parent: sc})
	case *breakStmt:
		return flowBreak, nil
	case *continueStmt:
		return flowContinue, nil
	}
	return flowNormal, rtErrorf("TemplateRuntimeError", "unknown statement")
}

// capture renders body into a string instead of the output. Loop controls
// cannot escape a captured block (jinja rejects them at compile time; here
// they simply end the block).
func (ev *evaluator) capture(body []node, sc *scope) (string, error) {
	saved := ev.out
	var sb strings.Builder
	ev.out = &sb
	ev.depth++
	defer func() { ev.out = saved; ev.depth-- }()
	if ev.depth > maxCallDepth {
		return "", errDepth
	}
	if _, err := ev.execBody(body, sc); err != nil {
		return "", err
	}
	return sb.String(), nil
}

func (ev *evaluator) applyFilters(fs []*filterExpr, v Value, sc *scope) (Value, error) {
	for _, f := range fs {
		args, kw, err := ev.evalArgs(f.args, f.kwargs, f.dynArgs, f.dynKw, sc)
		if err != nil {
			return Value{}, err
		}
		if v, err = f.fn(ev, v, args, kw); err != nil {
			return Value{}, err
		}
	}
	return v, nil
}

// assign binds v to target in sc, unpacking tuples and writing namespace
// attributes.
func (ev *evaluator) assign(t *assignTarget, v Value, sc *scope) error {
	switch {
	case t.tuple:
		items, err := ev.unpack(v, len(t.items))
		if err != nil {
			return err
		}
		for i, it := range t.items {
			if err := ev.assign(it, items[i], sc); err != nil {
				return err
			}
		}
		return nil
	case t.attr != "":
		nsv := ev.lookup(t.name, sc)
		if nsv.kind != KindNamespace {
			return rtErrorf("TemplateRuntimeError", "cannot assign attribute on non-namespace object")
		}
		nsv.ns().attrs.SetStr(t.attr, v)
		return nil
	}
	sc.set(t.name, v)
	return nil
}

// unpack is Python's iterable unpacking into n targets.
func (ev *evaluator) unpack(v Value, n int) ([]Value, error) {
	items, err := ev.iterate(v)
	if err != nil {
		if v.kind != KindUndefined {
			return nil, typeErrorf("cannot unpack non-iterable %s object", pyTypeName(v))
		}
		return nil, err
	}
	if len(items) < n {
		return nil, valueErrorf("not enough values to unpack (expected %d, got %d)", n, len(items))
	}
	if len(items) > n {
		return nil, valueErrorf("too many values to unpack (expected %d)", n)
	}
	return items, nil
}

func (ev *evaluator) lookup(name string, sc *scope) Value {
	if v, ok := sc.lookup(name); ok {
		return v
	}
	if v, ok := ev.vars[name]; ok {
		return v
	}
	if v, ok := globals[name]; ok {
		return v
	}
	return undefinedNamed(name)
}

// iterate lists the items a for loop over v visits: list items, dict keys,
// string characters; nothing for undefined. Generators are consumed.
func (ev *evaluator) iterate(v Value) ([]Value, error) {
	switch v.kind {
	case KindUndefined:
		return nil, nil
	case KindList:
		l := v.list()
		if l.kind == listGen || l.kind == listRevIter {
			if l.consumed {
				return nil, nil
			}
			l.consumed = true
		}
		return l.Items, nil
	case KindDict:
		return v.dict().keys, nil
	case KindString:
		// Like the list operators, cap the list a string expands to: one
		// value per character is many times the string's own size.
		if len(v.s) > maxListLen && utf8.RuneCountInString(v.s) > maxListLen {
			return nil, errTooBig
		}
		return stringChars(v), nil
	}
	return nil, typeErrorf("'%s' object is not iterable", pyTypeName(v))
}

// stringChars splits a string into one-character strings (Markup stays
// Markup).
func stringChars(v Value) []Value {
	out := make([]Value, 0, len(v.s))
	for i, r := range v.s {
		_ = r
		end := i + 1
		for end < len(v.s) && v.s[end]&0xc0 == 0x80 {
			end++
		}
		out = append(out, Value{kind: KindString, s: v.s[i:end], flag: v.flag})
	}
	return out
}

// loopState is jinja's LoopContext: the loop variable of a for loop. With
// a loop filter, items are accepted lazily, exactly when jinja would
// evaluate the filter (on advancing, or when peeking for loop.last,
// loop.nextitem, loop.length).
type loopState struct {
	ev        *evaluator
	stmt      *forStmt
	outer     *scope
	src       []Value
	srcPos    int
	buf       []Value // accepted, not yet visited
	index0    int
	cur       Value
	prev      Value
	total     int // -1 until known
	changed   []Value
	hasChange bool
}

func (l *loopState) fetch() (Value, bool, error) {
	for l.srcPos < len(l.src) {
		it := l.src[l.srcPos]
		l.srcPos++
		if l.stmt.filter == nil {
			return it, true, nil
		}
		tsc := &scope{parent: l.outer}
		if err := l.ev.assign(l.stmt.target, it, tsc); err != nil {
			return Value{}, false, err
		}
		ok, err := l.ev.eval(l.stmt.filter, tsc)
		if err != nil {
			return Value{}, false, err
		}
		if ok.Truth() {
			return it, true, nil
		}
	}
	return Value{}, false, nil
}

func (l *loopState) next() (Value, bool, error) {
	if len(l.buf) > 0 {
		v := l.buf[0]
		l.buf = l.buf[1:]
		return v, true, nil
	}
	return l.fetch()
}

func (l *loopState) peek() (Value, bool, error) {
	if len(l.buf) > 0 {
		return l.buf[0], true, nil
	}
	v, ok, err := l.fetch()
	if ok {
		l.buf = append(l.buf, v)
	}
	return v, ok, err
}

func (l *loopState) length() (int, error) {
	if l.total >= 0 {
		return l.total, nil
	}
	if l.stmt == nil || l.stmt.filter == nil {
		l.total = len(l.src)
		return l.total, nil
	}
	for {
		v, ok, err := l.fetch()
		if err != nil {
			return 0, err
		}
		if !ok {
			break
		}
		l.buf = append(l.buf, v)
	}
	l.total = l.index0 + 1 + len(l.buf)
	return l.total, nil
}

func (ev *evaluator) execFor(x *forStmt, sc *scope) error {
	itv, err := ev.eval(x.iter, sc)
	if err != nil {
		return err
	}
	src, err := ev.iterate(itv)
	if err != nil {
		return err
	}
	ls := &loopState{ev: ev, stmt: x, outer: sc, src: src, index0: -1, total: -1}
	loopVal := Value{kind: KindLoop, ref: ls}
	iterated := false
	for {
		item, ok, err := ls.next()
		if err != nil {
			return err
		}
		if !ok {
			break
		}
		if err := ev.step(); err != nil {
			return err
		}
		iterated = true
		ls.index0++
		ls.prev = ls.cur
		ls.cur = item
		isc := &scope{parent: sc}
		if err := ev.assign(x.target, item, isc); err != nil {
			return err
		}
		isc.set("loop", loopVal)
		f, err := ev.execBody(x.body, isc)
		if err != nil {
			return err
		}
		if f == flowBreak {
			break
		}
	}
	if !iterated && len(x.els) > 0 {
		_, err := ev.execBody(x.els, &scope{parent: sc})
		return err
	}
	return nil
}

// loopAttr answers loop.<name>.
func (ev *evaluator) loopAttr(l *loopState, name string) (Value, error) {
	switch name {
	case "index0":
		return Int(int64(l.index0)), nil
	case "index":
		return Int(int64(l.index0 + 1)), nil
	case "first":
		return Bool(l.index0 == 0), nil
	case "last":
		_, ok, err := l.peek()
		return Bool(!ok), err
	case "length":
		n, err := l.length()
		return Int(int64(n)), err
	case "revindex":
		n, err := l.length()
		return Int(int64(n - l.index0)), err
	case "revindex0":
		n, err := l.length()
		return Int(int64(n - l.index0 - 1)), err
	case "previtem":
		if l.index0 == 0 {
			return undefinedHint("there is no previous item"), nil
		}
		return l.prev, nil
	case "nextitem":
		v, ok, err := l.peek()
		if err != nil {
			return Value{}, err
		}
		if !ok {
			return undefinedHint("there is no next item"), nil
		}
		return v, nil
	case "depth":
		return Int(1), nil
	case "depth0":
		return Int(0), nil
	case "cycle", "changed":
		lv := Value{kind: KindLoop, ref: l}
		return boundMethod(lv, name, func(ev *evaluator, args []Value, kw []kwv) (Value, error) {
			return ev.loopMethod(l, name, args, kw)
		}), nil
	}
	return undefinedAttr(Value{kind: KindLoop, ref: l}, String(name)), nil
}

func (ev *evaluator) loopMethod(l *loopState, name string, args []Value, kw []kwv) (Value, error) {
	if len(kw) > 0 {
		return Value{}, typeErrorf("%s() got an unexpected keyword argument '%s'", name, kw[0].name)
	}
	if name == "cycle" {
		if len(args) == 0 {
			return Value{}, typeErrorf("no items for cycling given")
		}
		return args[l.index0%len(args)], nil
	}
	same := l.hasChange && len(args) == len(l.changed)
	if same {
		for i := range args {
			if !pyEqual(args[i], l.changed[i]) {
				same = false
				break
			}
		}
	}
	if same {
		return Bool(false), nil
	}
	l.changed = append([]Value(nil), args...)
	l.hasChange = true
	return Bool(true), nil
}
