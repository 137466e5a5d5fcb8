package jinja

import (
	"math"
	"strings"
	"unicode/utf8"
)

// methodFunc implements a Python method on a builtin value.
type methodFunc func(ev *evaluator, self Value, args []Value, kw []kwv) (Value, error)

// findMethod returns the Python method name of obj that the immutable
// sandbox allows, or nil.
func findMethod(obj Value, name string) methodFunc {
	switch obj.kind {
	case KindString:
		return strMethods[name]
	case KindDict:
		return dictMethods[name]
	case KindList:
		switch obj.list().kind {
		case listPlain:
			return listMethods[name]
		case listTuple:
			if name == "count" || name == "index" {
				return listMethods[name]
			}
		}
	case KindFloat:
		if name == "is_integer" {
			return func(ev *evaluator, self Value, args []Value, kw []kwv) (Value, error) {
				if err := noArgs("is_integer", args, kw); err != nil {
					return Value{}, err
				}
				return Bool(!math.IsInf(self.f, 0) && self.f == math.Trunc(self.f)), nil
			}
		}
	}
	return nil
}

// unsafeMethod reports the mutating methods the immutable sandbox hides.
func unsafeMethod(obj Value, name string) bool {
	switch obj.kind {
	case KindDict:
		switch name {
		case "clear", "pop", "popitem", "setdefault", "update":
			return true
		}
	case KindList:
		if obj.list().kind == listPlain {
			switch name {
			case "append", "clear", "pop", "reverse", "insert", "sort", "extend", "remove":
				return true
			}
		}
	}
	return false
}

func noArgs(name string, args []Value, kw []kwv) error {
	if len(kw) > 0 {
		return typeErrorf("%s() takes no keyword arguments", name)
	}
	if len(args) > 0 {
		return typeErrorf("%s() takes no arguments (%d given)", name, len(args))
	}
	return nil
}

// posArgs checks a method call with only positional arguments, min..max.
func posArgs(name string, args []Value, kw []kwv, min, max int) error {
	if len(kw) > 0 {
		return typeErrorf("%s() takes no keyword arguments", name)
	}
	if len(args) < min {
		return typeErrorf("%s() takes at least %d argument (%d given)", name, min, len(args))
	}
	if len(args) > max {
		return typeErrorf("%s() takes at most %d arguments (%d given)", name, max, len(args))
	}
	return nil
}

func strArg(name string, v Value) (string, error) {
	if v.kind != KindString {
		return "", typeErrorf("%s arg must be None or str", name)
	}
	return v.s, nil
}

var strMethods map[string]methodFunc
var dictMethods map[string]methodFunc
var listMethods map[string]methodFunc

func init() {
	strMethods = map[string]methodFunc{
		"startswith": func(ev *evaluator, s Value, args []Value, kw []kwv) (Value, error) {
			return strAffix(s, "startswith", args, kw, strings.HasPrefix)
		},
		"endswith": func(ev *evaluator, s Value, args []Value, kw []kwv) (Value, error) {
			return strAffix(s, "endswith", args, kw, strings.HasSuffix)
		},
		"strip":  stripMethod("strip", true, true),
		"lstrip": stripMethod("lstrip", true, false),
		"rstrip": stripMethod("rstrip", false, true),
		"split": func(ev *evaluator, s Value, args []Value, kw []kwv) (Value, error) {
			return splitMethod(s, args, kw, false)
		},
		"rsplit": func(ev *evaluator, s Value, args []Value, kw []kwv) (Value, error) {
			return splitMethod(s, args, kw, true)
		},
		"splitlines": func(ev *evaluator, s Value, args []Value, kw []kwv) (Value, error) {
			a, err := bindArgs("splitlines", args, kw, []string{"keepends"}, []Value{Bool(false)}, 0)
			if err != nil {
				return Value{}, err
			}
			lines := pySplitLines(s.s, a[0].Truth(), maxListLen)
			if len(lines) > maxListLen {
				return Value{}, errTooBig
			}
			out := make([]Value, len(lines))
			for i, l := range lines {
				out[i] = Value{kind: KindString, s: l, flag: s.flag}
			}
			return NewList(out), nil
		},
		"replace": func(ev *evaluator, s Value, args []Value, kw []kwv) (Value, error) {
			a, err := bindArgs("replace", args, kw, []string{"old", "new", "count"}, []Value{{}, {}, Int(-1)}, 2)
			if err != nil {
				return Value{}, err
			}
			if a[0].kind != KindString || a[1].kind != KindString {
				return Value{}, typeErrorf("replace() argument 1 must be str, not %s", pyTypeName(a[0]))
			}
			n, ok := a[2].Int64()
			if !ok {
				return Value{}, typeErrorf("'%s' object cannot be interpreted as an integer", pyTypeName(a[2]))
			}
			old, nw := a[0].s, a[1].s
			if s.isSafe() {
				old, nw = htmlEscapeUnlessSafe(a[0]), htmlEscapeUnlessSafe(a[1])
			}
			r, err := pyReplace(s.s, old, nw, int(n))
			if err != nil {
				return Value{}, err
			}
			return Value{kind: KindString, s: r, flag: s.flag}, nil
		},
		"lower":      caseMethod("lower", pyLower),
		"upper":      caseMethod("upper", pyUpper),
		"title":      caseMethod("title", pyTitle),
		"capitalize": caseMethod("capitalize", pyCapitalize),
		"swapcase":   caseMethod("swapcase", pySwapcase),
		"casefold":   caseMethod("casefold", pyLower),
		"find": func(ev *evaluator, s Value, args []Value, kw []kwv) (Value, error) {
			i, err := findSub(s, "find", args, kw, false)
			return Int(int64(i)), err
		},
		"rfind": func(ev *evaluator, s Value, args []Value, kw []kwv) (Value, error) {
			i, err := findSub(s, "rfind", args, kw, true)
			return Int(int64(i)), err
		},
		"index": func(ev *evaluator, s Value, args []Value, kw []kwv) (Value, error) {
			i, err := findSub(s, "index", args, kw, false)
			if err == nil && i < 0 {
				err = valueErrorf("substring not found")
			}
			return Int(int64(i)), err
		},
		"rindex": func(ev *evaluator, s Value, args []Value, kw []kwv) (Value, error) {
			i, err := findSub(s, "rindex", args, kw, true)
			if err == nil && i < 0 {
				err = valueErrorf("substring not found")
			}
			return Int(int64(i)), err
		},
		"count": func(ev *evaluator, s Value, args []Value, kw []kwv) (Value, error) {
			if err := posArgs("count", args, kw, 1, 3); err != nil {
				return Value{}, err
			}
			sub, err := strArg("count", args[0])
			if err != nil {
				return Value{}, err
			}
			hay, err := sliceBounds(s.s, args[1:])
			if err != nil {
				return Value{}, err
			}
			if sub == "" {
				return Int(int64(utf8.RuneCountInString(hay) + 1)), nil
			}
			return Int(int64(strings.Count(hay, sub))), nil
		},
		"join": func(ev *evaluator, s Value, args []Value, kw []kwv) (Value, error) {
			if err := posArgs("join", args, kw, 1, 1); err != nil {
				return Value{}, err
			}
			items, err := ev.iterate(args[0])
			if err != nil {
				return Value{}, typeErrorf("can only join an iterable")
			}
			var sb strings.Builder
			for i, it := range items {
				if it.kind != KindString {
					return Value{}, typeErrorf("sequence item %d: expected str instance, %s found", i, pyTypeName(it))
				}
				if i > 0 {
					sb.WriteString(s.s)
				}
				if s.isSafe() {
					sb.WriteString(htmlEscapeUnlessSafe(it))
				} else {
					sb.WriteString(it.s)
				}
				if sb.Len() > maxStringLen {
					return Value{}, errTooBig
				}
			}
			return Value{kind: KindString, s: sb.String(), flag: s.flag}, nil
		},
		"format": func(ev *evaluator, s Value, args []Value, kw []kwv) (Value, error) {
			r, err := ev.strFormat(s.s, args, kw)
			if err != nil {
				return Value{}, err
			}
			return String(r), nil
		},
		"isdigit":   predMethod("isdigit", pyIsDigit),
		"isdecimal": predMethod("isdecimal", pyIsDecimal),
		"isnumeric": predMethod("isnumeric", pyIsNumeric),
		"isalpha":   predMethod("isalpha", pyIsAlpha),
		"isalnum":   predMethod("isalnum", pyIsAlnum),
		"isspace":   predMethod("isspace", pyIsSpace),
		"islower": func(ev *evaluator, s Value, args []Value, kw []kwv) (Value, error) {
			return Bool(pyIsLowerStr(s.s)), noArgs("islower", args, kw)
		},
		"isupper": func(ev *evaluator, s Value, args []Value, kw []kwv) (Value, error) {
			return Bool(pyIsUpperStr(s.s)), noArgs("isupper", args, kw)
		},
		"center": padMethod("center"),
		"ljust":  padMethod("ljust"),
		"rjust":  padMethod("rjust"),
		"zfill": func(ev *evaluator, s Value, args []Value, kw []kwv) (Value, error) {
			if err := posArgs("zfill", args, kw, 1, 1); err != nil {
				return Value{}, err
			}
			w, ok := args[0].Int64()
			if !ok {
				return Value{}, typeErrorf("'%s' object cannot be interpreted as an integer", pyTypeName(args[0]))
			}
			if w > maxStringLen {
				return Value{}, errTooBig
			}
			return String(pyZfill(s.s, int(w))), nil
		},
		"partition": func(ev *evaluator, s Value, args []Value, kw []kwv) (Value, error) {
			return partition(s, "partition", args, kw, false)
		},
		"rpartition": func(ev *evaluator, s Value, args []Value, kw []kwv) (Value, error) {
			return partition(s, "rpartition", args, kw, true)
		},
		"removeprefix": func(ev *evaluator, s Value, args []Value, kw []kwv) (Value, error) {
			if err := posArgs("removeprefix", args, kw, 1, 1); err != nil {
				return Value{}, err
			}
			p, err := strArg("removeprefix", args[0])
			if err != nil {
				return Value{}, err
			}
			return Value{kind: KindString, s: strings.TrimPrefix(s.s, p), flag: s.flag}, nil
		},
		"removesuffix": func(ev *evaluator, s Value, args []Value, kw []kwv) (Value, error) {
			if err := posArgs("removesuffix", args, kw, 1, 1); err != nil {
				return Value{}, err
			}
			p, err := strArg("removesuffix", args[0])
			if err != nil {
				return Value{}, err
			}
			return Value{kind: KindString, s: strings.TrimSuffix(s.s, p), flag: s.flag}, nil
		},
	}
	dictMethods = map[string]methodFunc{
		"get": func(ev *evaluator, d Value, args []Value, kw []kwv) (Value, error) {
			if err := posArgs("get", args, kw, 1, 2); err != nil {
				return Value{}, err
			}
			v, ok, err := d.dict().Get(args[0])
			if err != nil {
				return Value{}, err
			}
			if ok {
				return v, nil
			}
			if len(args) == 2 {
				return args[1], nil
			}
			return None(), nil
		},
		"items": func(ev *evaluator, d Value, args []Value, kw []kwv) (Value, error) {
			if err := noArgs("items", args, kw); err != nil {
				return Value{}, err
			}
			return newView(dictItems(d.dict()), listItems), nil
		},
		"keys": func(ev *evaluator, d Value, args []Value, kw []kwv) (Value, error) {
			if err := noArgs("keys", args, kw); err != nil {
				return Value{}, err
			}
			return newView(append([]Value(nil), d.dict().keys...), listKeys), nil
		},
		"values": func(ev *evaluator, d Value, args []Value, kw []kwv) (Value, error) {
			if err := noArgs("values", args, kw); err != nil {
				return Value{}, err
			}
			return newView(append([]Value(nil), d.dict().vals...), listValues), nil
		},
		"copy": func(ev *evaluator, d Value, args []Value, kw []kwv) (Value, error) {
			if err := noArgs("copy", args, kw); err != nil {
				return Value{}, err
			}
			return DictValue(d.dict().copyDict()), nil
		},
	}
	listMethods = map[string]methodFunc{
		"count": func(ev *evaluator, l Value, args []Value, kw []kwv) (Value, error) {
			if err := posArgs("count", args, kw, 1, 1); err != nil {
				return Value{}, err
			}
			n := 0
			for _, it := range l.list().Items {
				if pyEqual(it, args[0]) {
					n++
				}
			}
			return Int(int64(n)), nil
		},
		"index": func(ev *evaluator, l Value, args []Value, kw []kwv) (Value, error) {
			if err := posArgs("index", args, kw, 1, 3); err != nil {
				return Value{}, err
			}
			for i, it := range l.list().Items {
				if pyEqual(it, args[0]) {
					return Int(int64(i)), nil
				}
			}
			return Value{}, valueErrorf("%s is not in list", pyRepr(args[0]))
		},
		"copy": func(ev *evaluator, l Value, args []Value, kw []kwv) (Value, error) {
			if err := noArgs("copy", args, kw); err != nil {
				return Value{}, err
			}
			return NewList(append([]Value(nil), l.list().Items...)), nil
		},
	}
}

func dictItems(d *Dict) []Value {
	out := make([]Value, len(d.keys))
	for i, k := range d.keys {
		out[i] = NewTuple([]Value{k, d.vals[i]})
	}
	return out
}

func htmlEscapeUnlessSafe(v Value) string {
	if v.isSafe() {
		return v.s
	}
	return htmlEscape(pyStr(v))
}

func strAffix(s Value, name string, args []Value, kw []kwv, f func(string, string) bool) (Value, error) {
	if err := posArgs(name, args, kw, 1, 3); err != nil {
		return Value{}, err
	}
	hay, err := sliceBounds(s.s, args[1:])
	if err != nil {
		return Value{}, err
	}
	switch p := args[0]; p.kind {
	case KindString:
		return Bool(f(hay, p.s)), nil
	case KindList:
		if p.list().kind == listTuple {
			for _, it := range p.list().Items {
				if it.kind != KindString {
					return Value{}, typeErrorf("tuple for %s must only contain str, not %s", name, pyTypeName(it))
				}
				if f(hay, it.s) {
					return Bool(true), nil
				}
			}
			return Bool(false), nil
		}
	}
	return Value{}, typeErrorf("%s first arg must be str or a tuple of str, not %s", name, pyTypeName(args[0]))
}

// sliceBounds applies optional start/end code point arguments to s.
func sliceBounds(s string, args []Value) (string, error) {
	if len(args) == 0 {
		return s, nil
	}
	start, stop := None(), None()
	start = args[0]
	if len(args) > 1 {
		stop = args[1]
	}
	v, err := sliceValue(String(s), start, stop, None())
	if err != nil {
		return "", err
	}
	return v.s, nil
}

func stripMethod(name string, left, right bool) methodFunc {
	return func(ev *evaluator, s Value, args []Value, kw []kwv) (Value, error) {
		if err := posArgs(name, args, kw, 0, 1); err != nil {
			return Value{}, err
		}
		var chars *string
		if len(args) == 1 && args[0].kind != KindNone {
			if args[0].kind != KindString {
				return Value{}, typeErrorf("%s arg must be None or str", name)
			}
			c := args[0].s
			chars = &c
		}
		return Value{kind: KindString, s: pyStrip(s.s, chars, left, right), flag: s.flag}, nil
	}
}

func caseMethod(name string, f func(string) string) methodFunc {
	return func(ev *evaluator, s Value, args []Value, kw []kwv) (Value, error) {
		if err := noArgs(name, args, kw); err != nil {
			return Value{}, err
		}
		return Value{kind: KindString, s: f(s.s), flag: s.flag}, nil
	}
}

func predMethod(name string, f func(rune) bool) methodFunc {
	return func(ev *evaluator, s Value, args []Value, kw []kwv) (Value, error) {
		if err := noArgs(name, args, kw); err != nil {
			return Value{}, err
		}
		if s.s == "" {
			return Bool(false), nil
		}
		for _, r := range s.s {
			if !f(r) {
				return Bool(false), nil
			}
		}
		return Bool(true), nil
	}
}

func padMethod(name string) methodFunc {
	return func(ev *evaluator, s Value, args []Value, kw []kwv) (Value, error) {
		if err := posArgs(name, args, kw, 1, 2); err != nil {
			return Value{}, err
		}
		w, ok := args[0].Int64()
		if !ok {
			return Value{}, typeErrorf("'%s' object cannot be interpreted as an integer", pyTypeName(args[0]))
		}
		fill := " "
		if len(args) == 2 {
			if args[1].kind != KindString || utf8.RuneCountInString(args[1].s) != 1 {
				return Value{}, typeErrorf("The fill character must be exactly one character long")
			}
			fill = args[1].s
		}
		if w > maxStringLen {
			return Value{}, errTooBig
		}
		if pad := w - int64(pyLen(s.s)); pad > 0 && pad*int64(len(fill))+int64(len(s.s)) > maxStringLen {
			return Value{}, errTooBig
		}
		return String(pyPad(s.s, int(w), fill, name)), nil
	}
}

func splitMethod(s Value, args []Value, kw []kwv, right bool) (Value, error) {
	name := "split"
	if right {
		name = "rsplit"
	}
	a, err := bindArgs(name, args, kw, []string{"sep", "maxsplit"}, []Value{None(), Int(-1)}, 0)
	if err != nil {
		return Value{}, err
	}
	n, ok := a[1].Int64()
	if !ok {
		return Value{}, typeErrorf("'%s' object cannot be interpreted as an integer", pyTypeName(a[1]))
	}
	// Split at most maxListLen times: more parts than that is a LimitError
	// below, and the cap keeps the work and memory bounded until then.
	if n < 0 || n > maxListLen {
		n = maxListLen
	}
	var parts []string
	if a[0].kind == KindNone {
		parts = pySplitWhitespace(s.s, int(n), right)
	} else {
		if a[0].kind != KindString {
			return Value{}, typeErrorf("must be str or None, not %s", pyTypeName(a[0]))
		}
		if a[0].s == "" {
			return Value{}, valueErrorf("empty separator")
		}
		parts = pySplitSep(s.s, a[0].s, int(n), right)
	}
	if len(parts) > maxListLen {
		return Value{}, errTooBig
	}
	out := make([]Value, len(parts))
	for i, p := range parts {
		out[i] = Value{kind: KindString, s: p, flag: s.flag}
	}
	return NewList(out), nil
}

func findSub(s Value, name string, args []Value, kw []kwv, right bool) (int, error) {
	if err := posArgs(name, args, kw, 1, 3); err != nil {
		return 0, err
	}
	sub, err := strArg(name, args[0])
	if err != nil {
		return 0, err
	}
	// Resolve start/end to code point offsets like a slice would.
	n := utf8.RuneCountInString(s.s)
	start, end := 0, n
	if len(args) > 1 && args[1].kind != KindNone {
		i, ok := indexOf(args[1])
		if !ok {
			return 0, typeErrorf("slice indices must be integers or None or have an __index__ method")
		}
		start = clampIndex(i, n, 0, n)
	}
	if len(args) > 2 && args[2].kind != KindNone {
		i, ok := indexOf(args[2])
		if !ok {
			return 0, typeErrorf("slice indices must be integers or None or have an __index__ method")
		}
		end = clampIndex(i, n, 0, n)
	}
	if start > end {
		return -1, nil
	}
	bs, be := runeOffset(s.s, start), runeOffset(s.s, end)
	hay := s.s[bs:be]
	var i int
	if right {
		i = strings.LastIndex(hay, sub)
	} else {
		i = strings.Index(hay, sub)
	}
	if i < 0 {
		return -1, nil
	}
	return start + utf8.RuneCountInString(hay[:i]), nil
}

// runeOffset converts a code point index to a byte offset.
func runeOffset(s string, n int) int {
	if isASCII(s) {
		return n
	}
	for i := range s {
		if n == 0 {
			return i
		}
		n--
	}
	return len(s)
}

func partition(s Value, name string, args []Value, kw []kwv, right bool) (Value, error) {
	if err := posArgs(name, args, kw, 1, 1); err != nil {
		return Value{}, err
	}
	sep, err := strArg(name, args[0])
	if err != nil {
		return Value{}, err
	}
	if sep == "" {
		return Value{}, valueErrorf("empty separator")
	}
	var i int
	if right {
		i = strings.LastIndex(s.s, sep)
	} else {
		i = strings.Index(s.s, sep)
	}
	if i < 0 {
		if right {
			return NewTuple([]Value{String(""), String(""), String(s.s)}), nil
		}
		return NewTuple([]Value{String(s.s), String(""), String("")}), nil
	}
	return NewTuple([]Value{String(s.s[:i]), String(sep), String(s.s[i+len(sep):])}), nil
}
