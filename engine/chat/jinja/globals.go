package jinja

import (
	"strconv"
	"strings"
	"time"
)

// globals are the names every template sees: jinja2's defaults that chat
// templates use (range, dict, namespace, joiner) and the two functions
// transformers adds (raise_exception, strftime_now). Render variables
// shadow them.
var globals map[string]Value

func builtin(name string, fn func(ev *evaluator, args []Value, kw []kwv) (Value, error)) Value {
	return Value{kind: KindCallable, ref: &Callable{name: name, fn: fn}}
}

// maxRange is the sandbox's MAX_RANGE.
const maxRange = 100000

func init() {
	globals = map[string]Value{
		"range": builtin("safe_range", func(ev *evaluator, args []Value, kw []kwv) (Value, error) {
			if len(kw) > 0 {
				return Value{}, typeErrorf("range() takes no keyword arguments")
			}
			if len(args) < 1 || len(args) > 3 {
				return Value{}, typeErrorf("range expected at most 3 arguments, got %d", len(args))
			}
			var n [3]int64
			n[2] = 1
			for i, a := range args {
				v, ok := a.Int64()
				if !ok || a.kind == KindFloat {
					return Value{}, typeErrorf("'%s' object cannot be interpreted as an integer", pyTypeName(a))
				}
				n[i] = v
			}
			start, stop, step := int64(0), n[0], n[2]
			if len(args) >= 2 {
				start, stop = n[0], n[1]
			}
			if step == 0 {
				return Value{}, valueErrorf("range() arg 3 must not be zero")
			}
			var count int64
			if step > 0 && stop > start {
				count = (stop - start + step - 1) / step
			} else if step < 0 && stop < start {
				count = (start - stop - step - 1) / -step
			}
			if count > maxRange {
				return Value{}, rtErrorf("OverflowError", "Range too big. The sandbox blocks ranges larger than MAX_RANGE (%d).", maxRange)
			}
			items := make([]Value, count)
			for i := range items {
				items[i] = Int(start + int64(i)*step)
			}
			return NewList(items), nil
		}),
		"namespace": builtin("namespace", func(ev *evaluator, args []Value, kw []kwv) (Value, error) {
			d, err := dictFromArgs(ev, args, kw)
			if err != nil {
				return Value{}, err
			}
			return Value{kind: KindNamespace, ref: &Namespace{attrs: d}}, nil
		}),
		"dict": builtin("dict", func(ev *evaluator, args []Value, kw []kwv) (Value, error) {
			d, err := dictFromArgs(ev, args, kw)
			if err != nil {
				return Value{}, err
			}
			return DictValue(d), nil
		}),
		"raise_exception": builtin("raise_exception", func(ev *evaluator, args []Value, kw []kwv) (Value, error) {
			a, err := bindArgs("raise_exception", args, kw, []string{"message"}, []Value{{}}, 1)
			if err != nil {
				return Value{}, err
			}
			return Value{}, &TemplateError{Message: pyStr(a[0])}
		}),
		"strftime_now": builtin("strftime_now", func(ev *evaluator, args []Value, kw []kwv) (Value, error) {
			a, err := bindArgs("strftime_now", args, kw, []string{"format"}, []Value{{}}, 1)
			if err != nil {
				return Value{}, err
			}
			if a[0].kind != KindString {
				return Value{}, typeErrorf("strftime() argument 1 must be str, not %s", pyTypeName(a[0]))
			}
			return String(strftime(ev.now(), a[0].s)), nil
		}),
		"joiner": builtin("joiner", func(ev *evaluator, args []Value, kw []kwv) (Value, error) {
			a, err := bindArgs("Joiner", args, kw, []string{"sep"}, []Value{String(", ")}, 0)
			if err != nil {
				return Value{}, err
			}
			sep := a[0]
			used := false
			return builtin("joiner", func(ev *evaluator, args []Value, kw []kwv) (Value, error) {
				if !used {
					used = true
					return String(""), nil
				}
				return sep, nil
			}), nil
		}),
	}
}

// dictFromArgs is dict(*args, **kwargs).
func dictFromArgs(ev *evaluator, args []Value, kw []kwv) (*Dict, error) {
	if len(args) > 1 {
		return nil, typeErrorf("dict expected at most 1 argument, got %d", len(args))
	}
	d := NewDict()
	if len(args) == 1 {
		src := args[0]
		if src.kind == KindDict {
			d = src.dict().copyDict()
		} else if src.kind == KindNamespace {
			d = src.ns().attrs.copyDict()
		} else {
			items, err := ev.iterate(src)
			if err != nil {
				return nil, err
			}
			for i, it := range items {
				pair, err := ev.iterate(it)
				if err != nil || len(pair) != 2 {
					n := len(pair)
					if err != nil {
						return nil, typeErrorf("cannot convert dictionary update sequence element #%d to a sequence", i)
					}
					return nil, valueErrorf("dictionary update sequence element #%d has length %d; 2 is required", i, n)
				}
				if err := d.Set(pair[0], pair[1]); err != nil {
					return nil, err
				}
			}
		}
	}
	for _, k := range kw {
		d.SetStr(k.name, k.v)
	}
	return d, nil
}

// strftime formats t like Python's time.strftime with the C locale.
func strftime(t time.Time, format string) string {
	var sb strings.Builder
	pad := func(n, w int) string {
		s := strconv.Itoa(n)
		for len(s) < w {
			s = "0" + s
		}
		return s
	}
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c != '%' || i+1 >= len(format) {
			sb.WriteByte(c)
			continue
		}
		i++
		d := format[i]
		noPad := false
		if d == '-' && i+1 < len(format) {
			noPad = true
			i++
			d = format[i]
		}
		p := func(n, w int) string {
			if noPad {
				return strconv.Itoa(n)
			}
			return pad(n, w)
		}
		switch d {
		case 'Y':
			sb.WriteString(strconv.Itoa(t.Year()))
		case 'y':
			sb.WriteString(p(t.Year()%100, 2))
		case 'm':
			sb.WriteString(p(int(t.Month()), 2))
		case 'd':
			sb.WriteString(p(t.Day(), 2))
		case 'e':
			sb.WriteString(pyPad(strconv.Itoa(t.Day()), 2, " ", "rjust"))
		case 'H':
			sb.WriteString(p(t.Hour(), 2))
		case 'I':
			h := t.Hour() % 12
			if h == 0 {
				h = 12
			}
			sb.WriteString(p(h, 2))
		case 'M':
			sb.WriteString(p(t.Minute(), 2))
		case 'S':
			sb.WriteString(p(t.Second(), 2))
		case 'f':
			sb.WriteString(pad(t.Nanosecond()/1000, 6))
		case 'p':
			if t.Hour() < 12 {
				sb.WriteString("AM")
			} else {
				sb.WriteString("PM")
			}
		case 'b', 'h':
			sb.WriteString(t.Month().String()[:3])
		case 'B':
			sb.WriteString(t.Month().String())
		case 'a':
			sb.WriteString(t.Weekday().String()[:3])
		case 'A':
			sb.WriteString(t.Weekday().String())
		case 'w':
			sb.WriteString(strconv.Itoa(int(t.Weekday())))
		case 'j':
			sb.WriteString(p(t.YearDay(), 3))
		case 'Z':
			name, _ := t.Zone()
			sb.WriteString(name)
		case 'z':
			_, off := t.Zone()
			sign := "+"
			if off < 0 {
				sign, off = "-", -off
			}
			sb.WriteString(sign + pad(off/3600, 2) + pad(off%3600/60, 2))
		case 'F':
			sb.WriteString(strconv.Itoa(t.Year()) + "-" + pad(int(t.Month()), 2) + "-" + pad(t.Day(), 2))
		case 'T':
			sb.WriteString(pad(t.Hour(), 2) + ":" + pad(t.Minute(), 2) + ":" + pad(t.Second(), 2))
		case '%':
			sb.WriteByte('%')
		default:
			sb.WriteByte('%')
			if noPad {
				sb.WriteByte('-')
			}
			sb.WriteByte(d)
		}
	}
	return sb.String()
}
