package jinja

import (
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Python's printf-style (str % args) and str.format formatting, for the
// conversions templates use.

// percentFormat is format % args.
func percentFormat(format, args Value) (Value, error) {
	var list []Value
	var mapping *Dict
	switch {
	case args.kind == KindList && args.list().kind == listTuple:
		list = args.list().Items
	case args.kind == KindDict:
		mapping = args.dict()
		list = []Value{args}
	default:
		list = []Value{args}
	}
	safe := format.isSafe()
	s := format.s
	var sb strings.Builder
	next := 0
	usedMapping := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '%' {
			sb.WriteByte(c)
			continue
		}
		i++
		if i >= len(s) {
			return Value{}, valueErrorf("incomplete format")
		}
		var arg Value
		haveArg := false
		if s[i] == '(' {
			if mapping == nil {
				return Value{}, typeErrorf("format requires a mapping")
			}
			depth, j := 1, i+1
			for ; j < len(s) && depth > 0; j++ {
				switch s[j] {
				case '(':
					depth++
				case ')':
					depth--
				}
			}
			if depth > 0 {
				return Value{}, valueErrorf("incomplete format key")
			}
			key := s[i+1 : j-1]
			v, ok := mapping.GetStr(key)
			if !ok {
				return Value{}, rtErrorf("KeyError", "%s", pyRepr(String(key)))
			}
			arg, haveArg, usedMapping = v, true, true
			i = j
		}
		var spec fmtSpec
		for ; i < len(s) && strings.IndexByte("-+ #0", s[i]) >= 0; i++ {
			spec.flags += string(s[i])
		}
		takeNum := func() (int, bool, error) {
			if i < len(s) && s[i] == '*' {
				i++
				if next >= len(list) {
					return 0, false, typeErrorf("not enough arguments for format string")
				}
				n, ok := list[next].Int64()
				next++
				if !ok {
					return 0, false, typeErrorf("* wants int")
				}
				if n > maxStringLen || n < -maxStringLen {
					return 0, false, errTooBig
				}
				return int(n), true, nil
			}
			st := i
			for i < len(s) && isDigit(s[i]) {
				i++
			}
			if st == i {
				return 0, false, nil
			}
			n, err := strconv.Atoi(s[st:i])
			if err != nil || n > maxStringLen {
				return 0, false, valueErrorf("width too big")
			}
			return n, true, nil
		}
		var err error
		if spec.width, spec.hasWidth, err = takeNum(); err != nil {
			return Value{}, err
		}
		if i < len(s) && s[i] == '.' {
			i++
			spec.prec, _, err = takeNum()
			if err != nil {
				return Value{}, err
			}
			spec.hasPrec = true
		}
		for i < len(s) && (s[i] == 'l' || s[i] == 'h' || s[i] == 'L') {
			i++
		}
		if i >= len(s) {
			return Value{}, valueErrorf("incomplete format")
		}
		conv := s[i]
		if conv == '%' {
			sb.WriteByte('%')
			continue
		}
		if !haveArg {
			if next >= len(list) {
				return Value{}, typeErrorf("not enough arguments for format string")
			}
			arg = list[next]
			next++
		}
		out, err := formatPercentArg(conv, arg, spec)
		if err != nil {
			return Value{}, err
		}
		if safe && (conv == 's' || conv == 'r' || conv == 'a') && !arg.isSafe() {
			out = htmlEscape(out)
		}
		sb.WriteString(out)
		if sb.Len() > maxStringLen {
			return Value{}, errTooBig
		}
	}
	if next < len(list) && !usedMapping && mapping == nil {
		return Value{}, typeErrorf("not all arguments converted during string formatting")
	}
	if safe {
		return Markup(sb.String()), nil
	}
	return String(sb.String()), nil
}

type fmtSpec struct {
	flags    string
	width    int
	hasWidth bool
	prec     int
	hasPrec  bool
}

func formatPercentArg(conv byte, arg Value, spec fmtSpec) (string, error) {
	left := strings.Contains(spec.flags, "-")
	zero := strings.Contains(spec.flags, "0") && !left
	var body string
	numeric := false
	switch conv {
	case 's', 'r', 'a':
		if conv == 's' {
			s, err := pyStrErr(arg)
			if err != nil {
				return "", err
			}
			body = s
		} else {
			body = pyRepr(arg)
		}
		if spec.hasPrec {
			r := []rune(body)
			if spec.prec < len(r) {
				body = string(r[:spec.prec])
			}
		}
		zero = false
	case 'd', 'i', 'u', 'x', 'X', 'o', 'c':
		if conv == 'c' {
			if arg.kind == KindString && pyLen(arg.s) == 1 {
				body = arg.s
			} else if n, ok := arg.Int64(); ok && n >= 0 && n <= 0x10ffff {
				body = string(rune(n))
			} else {
				return "", typeErrorf("%%c requires int or char")
			}
			zero = false
			break
		}
		numeric = true
		var iv Value
		switch arg.kind {
		case KindInt, KindBool:
			iv = arg
		case KindFloat:
			if conv == 'x' || conv == 'X' || conv == 'o' {
				return "", typeErrorf("%%%c format: an integer is required, not float", conv)
			}
			if math.IsInf(arg.f, 0) || math.IsNaN(arg.f) {
				return "", rtErrorf("OverflowError", "cannot convert float infinity to integer")
			}
			iv = floatToInt(arg.f)
		default:
			return "", typeErrorf("%%%c format: a real number is required, not %s", conv, pyTypeName(arg))
		}
		b := iv.toBig()
		neg := b.Sign() < 0
		b.Abs(b)
		base := 10
		switch conv {
		case 'x', 'X':
			base = 16
		case 'o':
			base = 8
		}
		digits := b.Text(base)
		if conv == 'X' {
			digits = strings.ToUpper(digits)
		}
		if spec.hasPrec && len(digits) < spec.prec {
			digits = strings.Repeat("0", spec.prec-len(digits)) + digits
		}
		if strings.Contains(spec.flags, "#") {
			switch conv {
			case 'x':
				digits = "0x" + digits
			case 'X':
				digits = "0X" + digits
			case 'o':
				digits = "0o" + digits
			}
		}
		body = signPrefix(neg, spec.flags) + digits
	case 'e', 'E', 'f', 'F', 'g', 'G':
		numeric = true
		f, err := toFloat(arg)
		if err != nil {
			return "", typeErrorf("must be real number, not %s", pyTypeName(arg))
		}
		prec := 6
		if spec.hasPrec {
			prec = spec.prec
		}
		body = cFloat(f, conv, prec, strings.Contains(spec.flags, "#"))
		if !strings.HasPrefix(body, "-") {
			body = signPrefix(false, spec.flags) + body
		}
		if math.IsInf(f, 0) || math.IsNaN(f) {
			zero = false
		}
	default:
		return "", valueErrorf("unsupported format character '%c' (0x%x)", conv, conv)
	}
	n := utf8.RuneCountInString(body)
	if spec.hasWidth && n < spec.width {
		padding := spec.width - n
		switch {
		case left:
			body += strings.Repeat(" ", padding)
		case zero && numeric:
			sign := ""
			if body != "" && (body[0] == '-' || body[0] == '+' || body[0] == ' ') {
				sign, body = body[:1], body[1:]
			}
			pre := ""
			if len(body) > 1 && body[0] == '0' && strings.IndexByte("xXo", body[1]) >= 0 {
				pre, body = body[:2], body[2:]
			}
			body = sign + pre + strings.Repeat("0", padding) + body
		default:
			body = strings.Repeat(" ", padding) + body
		}
	}
	return body, nil
}

func signPrefix(neg bool, flags string) string {
	switch {
	case neg:
		return "-"
	case strings.Contains(flags, "+"):
		return "+"
	case strings.Contains(flags, " "):
		return " "
	}
	return ""
}

// cFloat formats like C printf's %e %f %g (Python's float formatting).
func cFloat(f float64, conv byte, prec int, alt bool) string {
	upper := conv == 'E' || conv == 'F' || conv == 'G'
	var s string
	switch {
	case math.IsNaN(f):
		s = "nan"
	case math.IsInf(f, 1):
		s = "inf"
	case math.IsInf(f, -1):
		s = "-inf"
	default:
		switch conv {
		case 'e', 'E':
			s = strconv.FormatFloat(f, 'e', prec, 64)
		case 'f', 'F':
			s = strconv.FormatFloat(f, 'f', prec, 64)
		default:
			if prec == 0 {
				prec = 1
			}
			s = strconv.FormatFloat(f, 'e', prec-1, 64)
			exp, _ := strconv.Atoi(s[strings.IndexByte(s, 'e')+1:])
			if exp >= -4 && exp < prec {
				s = strconv.FormatFloat(f, 'f', prec-1-exp, 64)
				if !alt && strings.Contains(s, ".") {
					s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
				}
			} else if !alt {
				m, e, _ := strings.Cut(s, "e")
				if strings.Contains(m, ".") {
					m = strings.TrimRight(strings.TrimRight(m, "0"), ".")
				}
				s = m + "e" + e
			}
		}
		if alt && prec == 0 && (conv == 'f' || conv == 'F') {
			s += "."
		}
	}
	if upper {
		s = strings.ToUpper(s)
	}
	return s
}

// strFormat is str.format(*args, **kwargs) with the sandbox's attribute
// rules for field lookups.
func (ev *evaluator) strFormat(s string, args []Value, kw []kwv) (string, error) {
	var sb strings.Builder
	auto := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '}' {
			if i+1 < len(s) && s[i+1] == '}' {
				sb.WriteByte('}')
				i++
				continue
			}
			return "", valueErrorf("Single '}' encountered in format string")
		}
		if c != '{' {
			sb.WriteByte(c)
			continue
		}
		if i+1 < len(s) && s[i+1] == '{' {
			sb.WriteByte('{')
			i++
			continue
		}
		depth, j := 1, i+1
		for ; j < len(s); j++ {
			if s[j] == '{' {
				depth++
			} else if s[j] == '}' {
				depth--
				if depth == 0 {
					break
				}
			}
		}
		if j >= len(s) {
			return "", valueErrorf("expected '}' before end of string")
		}
		field := s[i+1 : j]
		i = j
		name, spec, _ := strings.Cut(field, ":")
		conv := ""
		if k := strings.IndexByte(name, '!'); k >= 0 {
			name, conv = name[:k], name[k+1:]
		}
		// The field name: first part then .attr / [key] parts.
		first := name
		rest := ""
		if k := strings.IndexAny(name, ".["); k >= 0 {
			first, rest = name[:k], name[k:]
		}
		var v Value
		switch {
		case first == "":
			if auto >= len(args) {
				return "", rtErrorf("IndexError", "Replacement index %d out of range for positional args tuple", auto)
			}
			v = args[auto]
			auto++
		case strings.Trim(first, "0123456789") == "":
			n, _ := strconv.Atoi(first)
			if n >= len(args) {
				return "", rtErrorf("IndexError", "Replacement index %d out of range for positional args tuple", n)
			}
			v = args[n]
		default:
			found := false
			for _, k := range kw {
				if k.name == first {
					v, found = k.v, true
				}
			}
			if !found {
				return "", rtErrorf("KeyError", "%s", pyRepr(String(first)))
			}
		}
		for rest != "" {
			var err error
			if rest[0] == '.' {
				k := strings.IndexAny(rest[1:], ".[")
				attr := rest[1:]
				if k >= 0 {
					attr, rest = rest[1:k+1], rest[k+1:]
				} else {
					rest = ""
				}
				v, err = ev.getattr(v, attr)
			} else {
				k := strings.IndexByte(rest, ']')
				if k < 0 {
					return "", valueErrorf("Missing ']' in format string")
				}
				key := rest[1:k]
				rest = rest[k+1:]
				var kv Value = String(key)
				if n, e := strconv.Atoi(key); e == nil {
					kv = Int(int64(n))
				}
				v, err = ev.getitem(v, kv)
			}
			if err != nil {
				return "", err
			}
		}
		switch conv {
		case "":
		case "r", "a":
			v = String(pyRepr(v))
		case "s":
			v = String(pyStr(v))
		default:
			return "", valueErrorf("Unknown conversion specifier %s", conv)
		}
		if strings.Contains(spec, "{") {
			expanded, err := ev.strFormat(spec, args, kw)
			if err != nil {
				return "", err
			}
			spec = expanded
		}
		out, err := formatSpec(v, spec)
		if err != nil {
			return "", err
		}
		sb.WriteString(out)
		if sb.Len() > maxStringLen {
			return "", errTooBig
		}
	}
	return sb.String(), nil
}

// formatSpec is format(v, spec) for str, int and float values.
func formatSpec(v Value, spec string) (string, error) {
	if spec == "" {
		return pyStrErr(v)
	}
	// [[fill]align][sign][#][0][width][,|_][.precision][type]
	fill, align := " ", byte(0)
	rs := []rune(spec)
	p := 0
	isAlign := func(r rune) bool { return r == '<' || r == '>' || r == '^' || r == '=' }
	if len(rs) >= 2 && isAlign(rs[1]) {
		fill, align, p = string(rs[0]), byte(rs[1]), 2
	} else if len(rs) >= 1 && isAlign(rs[0]) {
		align, p = byte(rs[0]), 1
	}
	sign := byte(0)
	if p < len(rs) && (rs[p] == '+' || rs[p] == '-' || rs[p] == ' ') {
		sign = byte(rs[p])
		p++
	}
	alt := false
	if p < len(rs) && rs[p] == '#' {
		alt = true
		p++
	}
	if p < len(rs) && rs[p] == '0' {
		if align == 0 {
			fill, align = "0", '='
		}
		p++
	}
	width := 0
	for p < len(rs) && rs[p] >= '0' && rs[p] <= '9' {
		width = width*10 + int(rs[p]-'0')
		if width > maxStringLen {
			return "", valueErrorf("Too many decimal digits in format string")
		}
		p++
	}
	group := byte(0)
	if p < len(rs) && (rs[p] == ',' || rs[p] == '_') {
		group = byte(rs[p])
		p++
	}
	prec := -1
	if p < len(rs) && rs[p] == '.' {
		p++
		prec = 0
		for p < len(rs) && rs[p] >= '0' && rs[p] <= '9' {
			prec = prec*10 + int(rs[p]-'0')
			p++
		}
	}
	typ := byte(0)
	if p < len(rs) {
		typ = byte(rs[p])
		p++
	}
	if p != len(rs) {
		return "", valueErrorf("Invalid format specifier '%s' for object of type '%s'", spec, pyTypeName(v))
	}
	var body string
	numeric := false
	switch {
	case v.kind == KindString && (typ == 0 || typ == 's'):
		body = v.s
		if prec >= 0 {
			r := []rune(body)
			if prec < len(r) {
				body = string(r[:prec])
			}
		}
		if align == 0 {
			align = '<'
		}
	case (v.kind == KindInt || v.kind == KindBool) && strings.IndexByte("\x00dbxXoncs", typ) >= 0 && typ != 's':
		numeric = true
		if typ == 'c' {
			n, _ := v.Int64()
			body = string(rune(n))
			break
		}
		b := v.toBig()
		neg := b.Sign() < 0
		b.Abs(b)
		base := 10
		pre := ""
		switch typ {
		case 'b':
			base, pre = 2, "0b"
		case 'x':
			base, pre = 16, "0x"
		case 'X':
			base, pre = 16, "0X"
		case 'o':
			base, pre = 8, "0o"
		}
		digits := b.Text(base)
		if typ == 'X' {
			digits = strings.ToUpper(digits)
		}
		if group != 0 {
			digits = groupDigits(digits, group, map[bool]int{true: 4, false: 3}[base != 10])
		}
		if !alt {
			pre = ""
		}
		body = numSign(neg, sign) + pre + digits
	case v.isNumber() && strings.IndexByte("\x00eEfFgG%dn", typ) >= 0:
		numeric = true
		f, err := toFloat(v)
		if err != nil {
			return "", err
		}
		neg := math.Signbit(f) && !math.IsNaN(f)
		af := math.Abs(f)
		switch typ {
		case 0:
			if prec < 0 {
				body = formatFloat(af)
			} else {
				body = cFloat(af, 'g', max(prec, 1), alt)
				if !strings.ContainsAny(body, ".e") && !math.IsInf(af, 0) && !math.IsNaN(af) {
					body = cFloat(af, 'g', max(prec, 1), alt)
				}
			}
		case '%':
			if prec < 0 {
				prec = 6
			}
			body = cFloat(af*100, 'f', prec, alt) + "%"
		case 'n':
			if prec < 0 {
				prec = 6
			}
			body = cFloat(af, 'g', prec, alt)
		default:
			if prec < 0 {
				prec = 6
			}
			body = cFloat(af, typ, prec, alt)
		}
		if group != 0 {
			intPart, frac, _ := strings.Cut(body, ".")
			if strings.Trim(intPart, "0123456789") == "" {
				body = groupDigits(intPart, group, 3)
				if frac != "" || strings.Contains(body, ".") {
					body += "." + frac
				}
			}
		}
		body = numSign(neg, sign) + body
	default:
		return "", typeErrorf("unsupported format string passed to %s.__format__", pyTypeName(v))
	}
	if align == 0 {
		align = '>'
		if !numeric {
			align = '<'
		}
	}
	n := utf8.RuneCountInString(body)
	if width > n {
		padding := width - n
		switch align {
		case '<':
			body += strings.Repeat(fill, padding)
		case '>':
			body = strings.Repeat(fill, padding) + body
		case '^':
			l := padding / 2
			body = strings.Repeat(fill, l) + body + strings.Repeat(fill, padding-l)
		case '=':
			signPart := ""
			if body != "" && (body[0] == '-' || body[0] == '+' || body[0] == ' ') {
				signPart, body = body[:1], body[1:]
			}
			body = signPart + strings.Repeat(fill, padding) + body
		}
	}
	return body, nil
}

func numSign(neg bool, sign byte) string {
	switch {
	case neg:
		return "-"
	case sign == '+':
		return "+"
	case sign == ' ':
		return " "
	}
	return ""
}

func groupDigits(d string, sep byte, every int) string {
	if len(d) <= every {
		return d
	}
	var sb strings.Builder
	first := len(d) % every
	if first > 0 {
		sb.WriteString(d[:first])
	}
	for i := first; i < len(d); i += every {
		if sb.Len() > 0 {
			sb.WriteByte(sep)
		}
		sb.WriteString(d[i : i+every])
	}
	return sb.String()
}
