package jinja

import (
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// formatFloat is Python's repr(float): the shortest digits that round-trip,
// in fixed notation when the decimal exponent is in [-4, 16), else in
// scientific notation with a signed, at least two-digit exponent.
func formatFloat(f float64) string {
	switch {
	case math.IsNaN(f):
		return "nan"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	case f == 0:
		if math.Signbit(f) {
			return "-0.0"
		}
		return "0.0"
	}
	var buf [32]byte
	s := strconv.AppendFloat(buf[:0], f, 'e', -1, 64)
	neg := false
	if s[0] == '-' {
		neg = true
		s = s[1:]
	}
	e := 0
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == 'e' {
			e, _ = strconv.Atoi(string(s[i+1:]))
			s = s[:i]
			break
		}
	}
	digits := make([]byte, 0, len(s))
	for _, c := range s {
		if c != '.' {
			digits = append(digits, c)
		}
	}
	decpt := e + 1
	var out []byte
	if neg {
		out = append(out, '-')
	}
	if decpt <= -4 || decpt > 16 {
		out = append(out, digits[0])
		if len(digits) > 1 {
			out = append(out, '.')
			out = append(out, digits[1:]...)
		}
		out = append(out, 'e')
		x := decpt - 1
		if x < 0 {
			out = append(out, '-')
			x = -x
		} else {
			out = append(out, '+')
		}
		if x < 10 {
			out = append(out, '0')
		}
		out = strconv.AppendInt(out, int64(x), 10)
		return string(out)
	}
	switch {
	case decpt <= 0:
		out = append(out, "0."...)
		for i := 0; i < -decpt; i++ {
			out = append(out, '0')
		}
		out = append(out, digits...)
	case decpt >= len(digits):
		out = append(out, digits...)
		for i := len(digits); i < decpt; i++ {
			out = append(out, '0')
		}
		out = append(out, ".0"...)
	default:
		out = append(out, digits[:decpt]...)
		out = append(out, '.')
		out = append(out, digits[decpt:]...)
	}
	return string(out)
}

func formatInt(v Value) string {
	if v.isBig() {
		return v.bigInt().String()
	}
	return strconv.FormatInt(v.n, 10)
}

// maxStringLen bounds every string the evaluator builds, so that a template
// cannot exhaust memory (Python would try; a server must not).
const maxStringLen = 64 << 20

var errTooBig = &RuntimeError{Type: "LimitError", Msg: "string result too large"}

const maxReprDepth = 500

// pyStr is Python's str(v) as Jinja prints it ({{ v }}, ~, |string).
func pyStr(v Value) string {
	switch v.kind {
	case KindUndefined:
		return ""
	case KindString:
		return v.s
	}
	var sb strings.Builder
	_ = writeStr(&sb, v, 0)
	return sb.String()
}

// pyStrErr is pyStr with the size budget enforced.
func pyStrErr(v Value) (string, error) {
	switch v.kind {
	case KindUndefined:
		return "", nil
	case KindString:
		return v.s, nil
	case KindNone:
		return "None", nil
	case KindBool:
		if v.n != 0 {
			return "True", nil
		}
		return "False", nil
	case KindInt:
		return formatInt(v), nil
	case KindFloat:
		return formatFloat(v.f), nil
	}
	var sb strings.Builder
	if err := writeStr(&sb, v, 0); err != nil {
		return "", err
	}
	return sb.String(), nil
}

// pyRepr is Python's repr(v).
func pyRepr(v Value) string {
	var sb strings.Builder
	_ = writeRepr(&sb, v, 0)
	return sb.String()
}

func writeStr(sb *strings.Builder, v Value, depth int) error {
	switch v.kind {
	case KindUndefined:
		return nil
	case KindString:
		sb.WriteString(v.s)
		return checkLen(sb)
	case KindNamespace:
		sb.WriteString("<Namespace ")
		if err := writeRepr(sb, DictValue(v.ns().attrs), depth+1); err != nil {
			return err
		}
		sb.WriteString(">")
		return nil
	}
	return writeRepr(sb, v, depth)
}

func checkLen(sb *strings.Builder) error {
	if sb.Len() > maxStringLen {
		return errTooBig
	}
	return nil
}

func writeRepr(sb *strings.Builder, v Value, depth int) error {
	if depth > maxReprDepth {
		return &RuntimeError{Type: "RecursionError", Msg: "maximum recursion depth exceeded while getting the repr of an object"}
	}
	switch v.kind {
	case KindUndefined:
		sb.WriteString("Undefined")
	case KindNone:
		sb.WriteString("None")
	case KindBool:
		if v.n != 0 {
			sb.WriteString("True")
		} else {
			sb.WriteString("False")
		}
	case KindInt:
		sb.WriteString(formatInt(v))
	case KindFloat:
		sb.WriteString(formatFloat(v.f))
	case KindString:
		if v.isSafe() {
			sb.WriteString("Markup(")
			writeQuoted(sb, v.s)
			sb.WriteString(")")
		} else {
			writeQuoted(sb, v.s)
		}
	case KindList:
		l := v.list()
		open, close := "[", "]"
		switch l.kind {
		case listTuple:
			open, close = "(", ")"
		case listGen:
			sb.WriteString("<generator object " + l.genName + ">")
			return nil
		case listRevIter:
			sb.WriteString("<list_reverseiterator object>")
			return nil
		case listItems:
			open, close = "dict_items([", "])"
		case listKeys:
			open, close = "dict_keys([", "])"
		case listValues:
			open, close = "dict_values([", "])"
		}
		sb.WriteString(open)
		for i, it := range l.Items {
			if i > 0 {
				sb.WriteString(", ")
			}
			if err := writeRepr(sb, it, depth+1); err != nil {
				return err
			}
			if err := checkLen(sb); err != nil {
				return err
			}
		}
		if l.kind == listTuple && len(l.Items) == 1 {
			sb.WriteString(",")
		}
		sb.WriteString(close)
	case KindDict:
		d := v.dict()
		sb.WriteString("{")
		for i, k := range d.keys {
			if i > 0 {
				sb.WriteString(", ")
			}
			if err := writeRepr(sb, k, depth+1); err != nil {
				return err
			}
			sb.WriteString(": ")
			if err := writeRepr(sb, d.vals[i], depth+1); err != nil {
				return err
			}
			if err := checkLen(sb); err != nil {
				return err
			}
		}
		sb.WriteString("}")
	case KindNamespace:
		return writeStr(sb, v, depth)
	case KindCallable:
		c := v.callable()
		switch {
		case c.macro != nil:
			sb.WriteString("<Macro " + pyRepr(String(c.name)) + ">")
		case c.self != nil:
			sb.WriteString("<built-in method " + c.name + " of " + pyTypeName(*c.self) + " object>")
		default:
			sb.WriteString("<function " + c.name + ">")
		}
	case KindLoop:
		l := v.loop()
		n, _ := l.length()
		sb.WriteString("<LoopContext " + strconv.Itoa(l.index0+1) + "/" + strconv.Itoa(n) + ">")
	}
	return checkLen(sb)
}

// writeQuoted writes Python's repr of a str.
func writeQuoted(sb *strings.Builder, s string) {
	quote := byte('\'')
	if strings.IndexByte(s, '\'') >= 0 && strings.IndexByte(s, '"') < 0 {
		quote = '"'
	}
	sb.WriteByte(quote)
	for _, r := range s {
		switch {
		case r == rune(quote) || r == '\\':
			sb.WriteByte('\\')
			sb.WriteRune(r)
		case r == '\t':
			sb.WriteString(`\t`)
		case r == '\n':
			sb.WriteString(`\n`)
		case r == '\r':
			sb.WriteString(`\r`)
		case r < ' ' || r == 0x7f:
			writeHexEscape(sb, 'x', uint32(r), 2)
		case r < 0x7f:
			sb.WriteRune(r)
		case pyIsPrintable(r):
			sb.WriteRune(r)
		case r <= 0xff:
			writeHexEscape(sb, 'x', uint32(r), 2)
		case r <= 0xffff:
			writeHexEscape(sb, 'u', uint32(r), 4)
		default:
			writeHexEscape(sb, 'U', uint32(r), 8)
		}
	}
	sb.WriteByte(quote)
}

func writeHexEscape(sb *strings.Builder, kind byte, r uint32, width int) {
	const hex = "0123456789abcdef"
	sb.WriteByte('\\')
	sb.WriteByte(kind)
	for i := width - 1; i >= 0; i-- {
		sb.WriteByte(hex[(r>>(4*uint(i)))&0xf])
	}
}

// pyIsPrintable approximates str.isprintable for one non-ASCII code point:
// everything but separators (Z*) and other (C*) categories.
func pyIsPrintable(r rune) bool {
	if r == utf8.RuneError {
		return true
	}
	return unicode.IsPrint(r)
}

// pyIsSpace is str.isspace for one code point (also what \s matches in
// Python's re): Go's unicode.IsSpace plus the information separators
// U+001C..U+001F that Python counts as whitespace.
func pyIsSpace(r rune) bool {
	if r < 0x80 {
		return r == ' ' || (r >= '\t' && r <= '\r') || (r >= 0x1c && r <= 0x1f)
	}
	return unicode.IsSpace(r)
}
