package jinja

// testFunc implements one `is` test.
type testFunc func(ev *evaluator, v Value, args []Value, kw []kwv) (bool, error)

var tests map[string]testFunc

func simpleTest(name string, f func(Value) bool) testFunc {
	return func(ev *evaluator, v Value, args []Value, kw []kwv) (bool, error) {
		if _, err := bindArgs("test_"+name, args, kw, nil, nil, 0); err != nil {
			return false, err
		}
		return f(v), nil
	}
}

func cmpTest(op string) testFunc {
	return func(ev *evaluator, v Value, args []Value, kw []kwv) (bool, error) {
		a, err := bindArgs(op, args, kw, []string{"other"}, []Value{{}}, 1)
		if err != nil {
			return false, err
		}
		return compareOp(op, v, a[0])
	}
}

func modTest(name string, want int64) testFunc {
	return func(ev *evaluator, v Value, args []Value, kw []kwv) (bool, error) {
		if _, err := bindArgs("test_"+name, args, kw, nil, nil, 0); err != nil {
			return false, err
		}
		m, err := binaryOp("%", v, Int(2))
		if err != nil {
			return false, err
		}
		return pyEqual(m, Int(want)), nil
	}
}

func init() {
	tests = map[string]testFunc{
		"defined":   simpleTest("defined", func(v Value) bool { return v.kind != KindUndefined }),
		"undefined": simpleTest("undefined", func(v Value) bool { return v.kind == KindUndefined }),
		"none":      simpleTest("none", func(v Value) bool { return v.kind == KindNone }),
		"boolean":   simpleTest("boolean", func(v Value) bool { return v.kind == KindBool }),
		"false":     simpleTest("false", func(v Value) bool { return v.kind == KindBool && v.n == 0 }),
		"true":      simpleTest("true", func(v Value) bool { return v.kind == KindBool && v.n != 0 }),
		"integer":   simpleTest("integer", func(v Value) bool { return v.kind == KindInt }),
		"float":     simpleTest("float", func(v Value) bool { return v.kind == KindFloat }),
		"number":    simpleTest("number", func(v Value) bool { return v.isNumber() }),
		"string":    simpleTest("string", func(v Value) bool { return v.kind == KindString }),
		"mapping":   simpleTest("mapping", func(v Value) bool { return v.kind == KindDict }),
		"sequence": simpleTest("sequence", func(v Value) bool {
			switch v.kind {
			case KindUndefined, KindString, KindDict:
				return true
			case KindList:
				k := v.list().kind
				return k == listPlain || k == listTuple
			}
			return false
		}),
		"iterable": simpleTest("iterable", func(v Value) bool {
			switch v.kind {
			case KindUndefined, KindString, KindList, KindDict, KindLoop:
				return true
			}
			return false
		}),
		"callable": simpleTest("callable", func(v Value) bool { return v.kind == KindCallable }),
		"escaped":  simpleTest("escaped", func(v Value) bool { return v.isSafe() }),
		"lower": simpleTest("lower", func(v Value) bool {
			return pyIsLowerStr(pyStr(v))
		}),
		"upper": simpleTest("upper", func(v Value) bool {
			return pyIsUpperStr(pyStr(v))
		}),
		"odd":  modTest("odd", 1),
		"even": modTest("even", 0),
		"divisibleby": func(ev *evaluator, v Value, args []Value, kw []kwv) (bool, error) {
			a, err := bindArgs("test_divisibleby", args, kw, []string{"num"}, []Value{{}}, 1)
			if err != nil {
				return false, err
			}
			m, err := binaryOp("%", v, a[0])
			if err != nil {
				return false, err
			}
			return pyEqual(m, Int(0)), nil
		},
		"sameas": func(ev *evaluator, v Value, args []Value, kw []kwv) (bool, error) {
			a, err := bindArgs("test_sameas", args, kw, []string{"other"}, []Value{{}}, 1)
			if err != nil {
				return false, err
			}
			return sameAs(v, a[0]), nil
		},
		"in": func(ev *evaluator, v Value, args []Value, kw []kwv) (bool, error) {
			a, err := bindArgs("test_in", args, kw, []string{"seq"}, []Value{{}}, 1)
			if err != nil {
				return false, err
			}
			return pyContains(a[0], v)
		},
		"filter": func(ev *evaluator, v Value, args []Value, kw []kwv) (bool, error) {
			_, ok := filters[pyStr(v)]
			return ok && v.kind == KindString, nil
		},
		"test": func(ev *evaluator, v Value, args []Value, kw []kwv) (bool, error) {
			_, ok := tests[pyStr(v)]
			return ok && v.kind == KindString, nil
		},
	}
	for _, op := range [][]string{
		{"==", "==", "eq", "equalto"},
		{"!=", "!=", "ne"},
		{">", ">", "gt", "greaterthan"},
		{">=", ">=", "ge"},
		{"<", "<", "lt", "lessthan"},
		{"<=", "<=", "le"},
	} {
		for _, name := range op[1:] {
			tests[name] = cmpTest(op[0])
		}
	}
}

// sameAs approximates Python's `is`: singletons and small ints by value,
// containers by identity.
func sameAs(a, b Value) bool {
	if a.kind != b.kind {
		return false
	}
	switch a.kind {
	case KindNone, KindUndefined:
		return a.kind == KindNone || a.ref == b.ref
	case KindBool:
		return a.n == b.n
	case KindInt:
		return !a.isBig() && !b.isBig() && a.n == b.n && a.n >= -5 && a.n <= 256
	case KindFloat:
		return false
	case KindString:
		return a.s == b.s
	}
	return a.ref == b.ref
}
