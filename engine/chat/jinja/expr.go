package jinja

import (
	"strings"
)

// kwv is one evaluated keyword argument.
type kwv struct {
	name string
	v    Value
}

// Callable is a function value: a global, a bound method, or a macro.
type Callable struct {
	name    string
	fn      func(ev *evaluator, args []Value, kw []kwv) (Value, error)
	self    *Value // receiver of a bound method, for repr
	macro   *macroDef
	closure *scope
}

func boundMethod(self Value, name string, fn func(ev *evaluator, args []Value, kw []kwv) (Value, error)) Value {
	s := self
	return Value{kind: KindCallable, ref: &Callable{name: name, fn: fn, self: &s}}
}

func (ev *evaluator) eval(e expr, sc *scope) (Value, error) {
	if err := ev.step(); err != nil {
		return Value{}, err
	}
	if ev.depth >= maxCallDepth {
		return Value{}, errDepth
	}
	ev.depth++
	v, err := ev.evalNode(e, sc)
	ev.depth--
	return v, err
}

func (ev *evaluator) evalNode(e expr, sc *scope) (Value, error) {
	switch x := e.(type) {
	case *constExpr:
		return x.v, nil
	case *nameExpr:
		return ev.lookup(x.name, sc), nil
	case *getattrExpr:
		obj, err := ev.eval(x.obj, sc)
		if err != nil {
			return Value{}, err
		}
		return ev.getattr(obj, x.attr)
	case *getitemExpr:
		obj, err := ev.eval(x.obj, sc)
		if err != nil {
			return Value{}, err
		}
		if s, ok := x.key.(*sliceExpr); ok {
			return ev.evalSlice(obj, s, sc)
		}
		key, err := ev.eval(x.key, sc)
		if err != nil {
			return Value{}, err
		}
		return ev.getitem(obj, key)
	case *callExpr:
		return ev.evalCall(x, sc, nil)
	case *filterExpr:
		var v Value
		if x.arg != nil {
			var err error
			if v, err = ev.eval(x.arg, sc); err != nil {
				return Value{}, err
			}
		}
		args, kw, err := ev.evalArgs(x.args, x.kwargs, x.dynArgs, x.dynKw, sc)
		if err != nil {
			return Value{}, err
		}
		return x.fn(ev, v, args, kw)
	case *testExpr:
		v, err := ev.eval(x.arg, sc)
		if err != nil {
			return Value{}, err
		}
		args, kw, err := ev.evalArgs(x.args, x.kwargs, x.dynArgs, x.dynKw, sc)
		if err != nil {
			return Value{}, err
		}
		ok, err := x.fn(ev, v, args, kw)
		return Bool(ok), err
	case *notExpr:
		v, err := ev.eval(x.x, sc)
		if err != nil {
			return Value{}, err
		}
		return Bool(!v.Truth()), nil
	case *negExpr:
		v, err := ev.eval(x.x, sc)
		if err != nil {
			return Value{}, err
		}
		return unaryOp(v, x.neg)
	case *binExpr:
		l, err := ev.eval(x.l, sc)
		if err != nil {
			return Value{}, err
		}
		r, err := ev.eval(x.r, sc)
		if err != nil {
			return Value{}, err
		}
		return binaryOp(x.op, l, r)
	case *andExpr:
		l, err := ev.eval(x.l, sc)
		if err != nil || !l.Truth() {
			return l, err
		}
		return ev.eval(x.r, sc)
	case *orExpr:
		l, err := ev.eval(x.l, sc)
		if err != nil || l.Truth() {
			return l, err
		}
		return ev.eval(x.r, sc)
	case *concatExpr:
		var sb strings.Builder
		for _, it := range x.items {
			v, err := ev.eval(it, sc)
			if err != nil {
				return Value{}, err
			}
			if err := writeStr(&sb, v, 0); err != nil {
				return Value{}, err
			}
		}
		return String(sb.String()), nil
	case *compareExpr:
		return ev.evalCompare(x, sc)
	case *condExpr:
		t, err := ev.eval(x.test, sc)
		if err != nil {
			return Value{}, err
		}
		if t.Truth() {
			return ev.eval(x.yes, sc)
		}
		if x.no == nil {
			return undefinedHint("the inline if-expression evaluated to false and no else section was defined."), nil
		}
		return ev.eval(x.no, sc)
	case *listExpr:
		items := make([]Value, len(x.items))
		for i, it := range x.items {
			v, err := ev.eval(it, sc)
			if err != nil {
				return Value{}, err
			}
			items[i] = v
		}
		if x.tuple {
			return NewTuple(items), nil
		}
		return NewList(items), nil
	case *dictExpr:
		d := NewDict()
		for i := range x.keys {
			k, err := ev.eval(x.keys[i], sc)
			if err != nil {
				return Value{}, err
			}
			v, err := ev.eval(x.vals[i], sc)
			if err != nil {
				return Value{}, err
			}
			if err := d.Set(k, v); err != nil {
				return Value{}, err
			}
		}
		return DictValue(d), nil
	case *sliceExpr:
		return Value{}, typeErrorf("slice outside of subscript")
	}
	return Value{}, rtErrorf("TemplateRuntimeError", "unknown expression")
}

func (ev *evaluator) evalCompare(x *compareExpr, sc *scope) (Value, error) {
	l, err := ev.eval(x.first, sc)
	if err != nil {
		return Value{}, err
	}
	for _, o := range x.ops {
		r, err := ev.eval(o.x, sc)
		if err != nil {
			return Value{}, err
		}
		ok, err := compareOp(o.op, l, r)
		if err != nil {
			return Value{}, err
		}
		if !ok {
			return Bool(false), nil
		}
		l = r
	}
	return Bool(true), nil
}

func (ev *evaluator) evalArgs(args []expr, kwargs []kwarg, dynArgs, dynKw expr, sc *scope) ([]Value, []kwv, error) {
	var av []Value
	if len(args) > 0 {
		av = make([]Value, 0, len(args))
	}
	for _, a := range args {
		v, err := ev.eval(a, sc)
		if err != nil {
			return nil, nil, err
		}
		av = append(av, v)
	}
	var kw []kwv
	for _, k := range kwargs {
		v, err := ev.eval(k.val, sc)
		if err != nil {
			return nil, nil, err
		}
		kw = append(kw, kwv{k.name, v})
	}
	if dynArgs != nil {
		v, err := ev.eval(dynArgs, sc)
		if err != nil {
			return nil, nil, err
		}
		items, err := ev.iterate(v)
		if err != nil {
			return nil, nil, err
		}
		av = append(av, items...)
	}
	if dynKw != nil {
		v, err := ev.eval(dynKw, sc)
		if err != nil {
			return nil, nil, err
		}
		if v.kind != KindDict {
			return nil, nil, typeErrorf("argument after ** must be a mapping, not %s", pyTypeName(v))
		}
		d := v.dict()
		for i, k := range d.keys {
			if k.kind != KindString {
				return nil, nil, typeErrorf("keywords must be strings")
			}
			kw = append(kw, kwv{k.s, d.vals[i]})
		}
	}
	return av, kw, nil
}

// evalCall evaluates a call; caller, when set, is passed as the caller
// keyword argument ({% call %} blocks).
func (ev *evaluator) evalCall(x *callExpr, sc *scope, caller *Value) (Value, error) {
	// obj.method(...) dispatches directly, without materializing a bound
	// method value.
	if ga, ok := x.fn.(*getattrExpr); ok {
		obj, err := ev.eval(ga.obj, sc)
		if err != nil {
			return Value{}, err
		}
		if obj.kind == KindUndefined {
			return Value{}, undefinedError(obj)
		}
		if m := findMethod(obj, ga.attr); m != nil {
			args, kw, err := ev.evalArgs(x.args, x.kwargs, x.dynArgs, x.dynKw, sc)
			if err != nil {
				return Value{}, err
			}
			return m(ev, obj, args, kw)
		}
		fn, err := ev.getattr(obj, ga.attr)
		if err != nil {
			return Value{}, err
		}
		return ev.callWith(fn, x, sc, caller)
	}
	fn, err := ev.eval(x.fn, sc)
	if err != nil {
		return Value{}, err
	}
	return ev.callWith(fn, x, sc, caller)
}

func (ev *evaluator) callWith(fn Value, x *callExpr, sc *scope, caller *Value) (Value, error) {
	args, kw, err := ev.evalArgs(x.args, x.kwargs, x.dynArgs, x.dynKw, sc)
	if err != nil {
		return Value{}, err
	}
	if caller != nil {
		kw = append(kw, kwv{"caller", *caller})
	}
	return ev.call(fn, args, kw)
}

// call invokes a callable value.
func (ev *evaluator) call(fn Value, args []Value, kw []kwv) (Value, error) {
	switch fn.kind {
	case KindUndefined:
		return Value{}, undefinedError(fn)
	case KindCallable:
		c := fn.callable()
		if c.macro != nil {
			return ev.callMacro(c, args, kw)
		}
		return c.fn(ev, args, kw)
	}
	return Value{}, typeErrorf("'%s' object is not callable", pyTypeName(fn))
}

func (ev *evaluator) callMacro(c *Callable, args []Value, kw []kwv) (Value, error) {
	def := c.macro
	msc := &scope{parent: c.closure}
	nparams := len(def.params)
	if len(args) > nparams && !def.catchVarargs {
		return Value{}, typeErrorf("macro %s takes not more than %d argument(s)", pyRepr(String(def.name)), nparams)
	}
	kwUsed := make([]bool, len(kw))
	firstDefault := nparams - len(def.defaults)
	for i, name := range def.params {
		var v Value
		found := false
		if i < len(args) {
			v, found = args[i], true
		} else {
			for j := range kw {
				if !kwUsed[j] && kw[j].name == name {
					v, found = kw[j].v, true
					kwUsed[j] = true
					break
				}
			}
		}
		if !found {
			if i >= firstDefault {
				dv, err := ev.eval(def.defaults[i-firstDefault], msc)
				if err != nil {
					return Value{}, err
				}
				v = dv
			} else {
				v = undefinedHint("parameter " + pyRepr(String(name)) + " was not provided")
			}
		}
		msc.set(name, v)
	}
	var extraKw *Dict
	for j := range kw {
		if kwUsed[j] {
			continue
		}
		if kw[j].name == "caller" && def.usesCaller {
			msc.set("caller", kw[j].v)
			continue
		}
		if !def.catchKwargs {
			return Value{}, typeErrorf("macro %s takes no keyword argument %s", pyRepr(String(def.name)), pyRepr(String(kw[j].name)))
		}
		if extraKw == nil {
			extraKw = NewDict()
		}
		extraKw.SetStr(kw[j].name, kw[j].v)
	}
	if def.usesCaller {
		if _, ok := msc.lookup("caller"); !ok || !hasOwn(msc, "caller") {
			msc.set("caller", undefinedHint("No caller defined"))
		}
	}
	if def.catchKwargs {
		if extraKw == nil {
			extraKw = NewDict()
		}
		msc.set("kwargs", DictValue(extraKw))
	}
	if def.catchVarargs {
		var rest []Value
		if len(args) > nparams {
			rest = append(rest, args[nparams:]...)
		}
		msc.set("varargs", NewTuple(rest))
	}
	saveLine := ev.line
	s, err := ev.capture(def.body, msc)
	ev.line = saveLine
	if err != nil {
		return Value{}, err
	}
	return String(s), nil
}

func hasOwn(s *scope, name string) bool {
	for _, n := range s.names {
		if n == name {
			return true
		}
	}
	return false
}

// getattr is jinja's sandboxed obj.attr: Python attributes (methods) first,
// then obj[attr]; missing gives an undefined value. Attributes of an
// undefined value raise.
func (ev *evaluator) getattr(obj Value, name string) (Value, error) {
	switch obj.kind {
	case KindUndefined:
		return Value{}, undefinedError(obj)
	case KindDict:
		if m := findMethod(obj, name); m != nil {
			return bindMethod(obj, name, m), nil
		}
		if unsafeMethod(obj, name) {
			return unsafeUndefined(obj, name), nil
		}
		if v, ok := obj.dict().GetStr(name); ok {
			return v, nil
		}
	case KindNamespace:
		if v, ok := obj.ns().attrs.GetStr(name); ok {
			return v, nil
		}
	case KindLoop:
		return ev.loopAttr(obj.loop(), name)
	default:
		if obj.kind == KindList {
			for i, f := range obj.list().fields {
				if f == name {
					return obj.list().Items[i], nil
				}
			}
		}
		if m := findMethod(obj, name); m != nil {
			return bindMethod(obj, name, m), nil
		}
		if unsafeMethod(obj, name) {
			return unsafeUndefined(obj, name), nil
		}
	}
	return undefinedAttr(obj, String(name)), nil
}

func bindMethod(obj Value, name string, m methodFunc) Value {
	return boundMethod(obj, name, func(ev *evaluator, args []Value, kw []kwv) (Value, error) {
		return m(ev, obj, args, kw)
	})
}

func unsafeUndefined(obj Value, name string) Value {
	return Value{ref: &undefInfo{
		hint:    "access to attribute " + pyRepr(String(name)) + " of " + pyRepr(String(pyTypeName(obj))) + " object is unsafe.",
		excType: "SecurityError",
	}}
}

// getitem is jinja's sandboxed obj[key]: the item first, then (for a
// string key) the attribute; missing gives an undefined value.
func (ev *evaluator) getitem(obj, key Value) (Value, error) {
	switch obj.kind {
	case KindUndefined:
		return Value{}, undefinedError(obj)
	case KindDict:
		v, ok, err := obj.dict().Get(key)
		if err == nil && ok {
			return v, nil
		}
	case KindList:
		l := obj.list()
		if l.kind == listPlain || l.kind == listTuple {
			if idx, ok := indexOf(key); ok {
				n := len(l.Items)
				if idx < 0 {
					idx += n
				}
				if idx >= 0 && idx < n {
					return l.Items[idx], nil
				}
			}
		}
	case KindString:
		if idx, ok := indexOf(key); ok {
			r := []rune(obj.s)
			if !isASCII(obj.s) {
				n := len(r)
				if idx < 0 {
					idx += n
				}
				if idx >= 0 && idx < n {
					return Value{kind: KindString, s: string(r[idx]), flag: obj.flag}, nil
				}
			} else {
				n := len(obj.s)
				if idx < 0 {
					idx += n
				}
				if idx >= 0 && idx < n {
					return Value{kind: KindString, s: obj.s[idx : idx+1], flag: obj.flag}, nil
				}
			}
		}
	}
	if key.kind == KindString {
		switch obj.kind {
		case KindNamespace:
			if v, ok := obj.ns().attrs.GetStr(key.s); ok {
				return v, nil
			}
		case KindLoop:
			return ev.loopAttr(obj.loop(), key.s)
		case KindDict, KindList, KindString:
			if m := findMethod(obj, key.s); m != nil {
				return bindMethod(obj, key.s, m), nil
			}
			if unsafeMethod(obj, key.s) {
				return unsafeUndefined(obj, key.s), nil
			}
		}
	}
	return undefinedAttr(obj, key), nil
}

// indexOf converts an int or bool subscript to an int.
func indexOf(key Value) (int, bool) {
	if key.kind == KindInt || key.kind == KindBool {
		if key.isBig() {
			return 1 << 62, true // out of range either way
		}
		return int(key.n), true
	}
	return 0, false
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

func (ev *evaluator) evalSlice(obj Value, s *sliceExpr, sc *scope) (Value, error) {
	var parts [3]Value
	for i, e := range []expr{s.start, s.stop, s.step} {
		if e == nil {
			parts[i] = None()
			continue
		}
		v, err := ev.eval(e, sc)
		if err != nil {
			return Value{}, err
		}
		parts[i] = v
	}
	if obj.kind == KindUndefined {
		return Value{}, undefinedError(obj)
	}
	return sliceValue(obj, parts[0], parts[1], parts[2])
}

// sliceValue is Python's obj[start:stop:step] for lists, tuples and str.
func sliceValue(obj, start, stop, step Value) (Value, error) {
	var n int
	var runes []rune
	switch obj.kind {
	case KindList:
		l := obj.list()
		if l.kind != listPlain && l.kind != listTuple {
			return undefinedAttr(obj, None()), nil
		}
		n = len(l.Items)
	case KindString:
		if isASCII(obj.s) {
			n = len(obj.s)
		} else {
			runes = []rune(obj.s)
			n = len(runes)
		}
	default:
		return undefinedAttr(obj, None()), nil
	}
	idx := func(v Value, def int) (int, bool, error) {
		if v.kind == KindNone {
			return def, false, nil
		}
		i, ok := indexOf(v)
		if !ok {
			return 0, false, typeErrorf("slice indices must be integers or None or have an __index__ method")
		}
		if v.isBig() {
			if v.bigInt().Sign() < 0 {
				return -(1 << 62), true, nil
			}
		}
		return i, true, nil
	}
	st, _, err := idx(step, 1)
	if err != nil {
		return Value{}, err
	}
	if st == 0 {
		return Value{}, valueErrorf("slice step cannot be zero")
	}
	var lo, hi int
	if st > 0 {
		a, set, err := idx(start, 0)
		if err != nil {
			return Value{}, err
		}
		if set {
			a = clampIndex(a, n, 0, n)
		}
		b, set, err := idx(stop, n)
		if err != nil {
			return Value{}, err
		}
		if set {
			b = clampIndex(b, n, 0, n)
		}
		lo, hi = a, b
	} else {
		a, set, err := idx(start, n-1)
		if err != nil {
			return Value{}, err
		}
		if set {
			a = clampIndex(a, n, -1, n-1)
		}
		b, set, err := idx(stop, -1)
		if err != nil {
			return Value{}, err
		}
		if set {
			b = clampIndex(b, n, -1, n-1)
		}
		lo, hi = a, b
	}
	var picks []int
	if st > 0 {
		for i := lo; i < hi; i += st {
			picks = append(picks, i)
		}
	} else {
		for i := lo; i > hi; i += st {
			picks = append(picks, i)
		}
	}
	if obj.kind == KindString {
		if st == 1 && runes == nil {
			if lo >= hi {
				return Value{kind: KindString, flag: obj.flag}, nil
			}
			return Value{kind: KindString, s: obj.s[lo:hi], flag: obj.flag}, nil
		}
		if runes == nil {
			runes = []rune(obj.s)
		}
		out := make([]rune, len(picks))
		for i, p := range picks {
			out[i] = runes[p]
		}
		return Value{kind: KindString, s: string(out), flag: obj.flag}, nil
	}
	items := obj.list().Items
	out := make([]Value, len(picks))
	for i, p := range picks {
		out[i] = items[p]
	}
	if obj.list().kind == listTuple {
		return NewTuple(out), nil
	}
	return NewList(out), nil
}

// clampIndex applies Python's slice index adjustment: negative indices
// count from the end, then the result is clamped to [lo, hi].
func clampIndex(i, n, lo, hi int) int {
	if i < 0 {
		i += n
		if i < lo {
			i = lo
		}
		return i
	}
	if i > hi {
		i = hi
	}
	return i
}
