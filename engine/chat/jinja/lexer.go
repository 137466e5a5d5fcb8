package jinja

import (
	"math/big"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The lexer reproduces jinja2's with the options transformers uses
// (trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=False):
//   - "\r\n" and "\r" become "\n"; one trailing newline is dropped;
//   - "{%-", "{{-", "{#-" strip all whitespace before the tag;
//   - otherwise (and not "+"), "{%" and "{#" strip spaces and tabs back to
//     the start of their line when nothing else is on it (lstrip_blocks);
//   - "-%}", "-}}", "-#}" strip all whitespace after the tag;
//   - "%}" and "#}" (not "+%}") eat one following newline (trim_blocks).

type tokKind uint8

const (
	tEOF tokKind = iota
	tData
	tVarBegin
	tVarEnd
	tBlockBegin
	tBlockEnd
	tName
	tString
	tInt
	tFloat
	tOp
)

type token struct {
	kind tokKind
	val  string // data, name, string value, operator
	num  Value  // int or float literal
	line int
}

func (t token) describe() string {
	switch t.kind {
	case tEOF:
		return "end of template"
	case tData:
		return "template data / text"
	case tVarBegin:
		return "begin of print statement"
	case tVarEnd:
		return "end of print statement"
	case tBlockBegin:
		return "begin of statement block"
	case tBlockEnd:
		return "end of statement block"
	case tName, tOp:
		return t.val
	case tString:
		return "string"
	case tInt:
		return "integer"
	case tFloat:
		return "float"
	}
	return "token"
}

type lexer struct {
	name    string
	src     string
	pos     int
	line    int
	toks    []token
	balance []byte
	// lineStarting is jinja's flag: the previous match ended with "\n".
	lineStarting bool
}

func (lx *lexer) fail(msg string) error {
	return &SyntaxError{Name: lx.name, Line: lx.line, Msg: msg}
}

// normalizeSource applies jinja's newline normalization and drops one
// trailing newline.
func normalizeSource(src string) string {
	if !utf8.ValidString(src) {
		src = strings.ToValidUTF8(src, "\uFFFD")
	}
	if strings.IndexByte(src, '\r') >= 0 {
		src = strings.ReplaceAll(src, "\r\n", "\n")
		src = strings.ReplaceAll(src, "\r", "\n")
	}
	if strings.HasSuffix(src, "\n") {
		src = src[:len(src)-1]
	}
	return src
}

func tokenize(name, src string) ([]token, error) {
	lx := &lexer{name: name, src: normalizeSource(src), line: 1, lineStarting: true}
	if err := lx.run(); err != nil {
		return nil, err
	}
	lx.toks = append(lx.toks, token{kind: tEOF, line: lx.line})
	return lx.toks, nil
}

func (lx *lexer) emit(k tokKind, val string) {
	lx.toks = append(lx.toks, token{kind: k, val: val, line: lx.line})
}

// findTag finds the next "{{", "{%" or "{#" at or after pos.
func (lx *lexer) findTag(from int) int {
	s := lx.src
	for i := from; ; {
		j := strings.IndexByte(s[i:], '{')
		if j < 0 || i+j+1 >= len(s) {
			return -1
		}
		i += j
		if c := s[i+1]; c == '{' || c == '%' || c == '#' {
			return i
		}
		i++
	}
}

func (lx *lexer) run() error {
	s := lx.src
	for lx.pos < len(s) {
		at := lx.findTag(lx.pos)
		if at < 0 {
			lx.emitData(s[lx.pos:])
			lx.pos = len(s)
			return nil
		}
		text := s[lx.pos:at]
		kind := s[at+1]
		sign := byte(0)
		if at+2 < len(s) && (s[at+2] == '-' || s[at+2] == '+') {
			sign = s[at+2]
		}
		rawEnd := -1
		if kind == '%' {
			rawEnd = lx.matchRawBegin(at)
		}
		// Whitespace control on the text before the tag.
		if sign == '-' {
			text = pyRStrip(text)
		} else if sign != '+' && kind != '{' {
			lpos := strings.LastIndexByte(text, '\n') + 1
			if lpos > 0 || lx.lineStarting {
				rest := text[lpos:]
				if rest != "" && isAllSpace(rest) {
					text = text[:lpos]
				}
			}
		}
		lx.emitData(text)
		lx.line += strings.Count(s[lx.pos:at], "\n") - strings.Count(text, "\n")
		tagStart := at + 2
		if sign != 0 {
			tagStart++
		}
		if rawEnd >= 0 {
			lx.lineStarting = s[rawEnd-1] == '\n'
			lx.line += strings.Count(s[at:rawEnd], "\n")
			lx.pos = rawEnd
			if err := lx.lexRaw(); err != nil {
				return err
			}
			continue
		}
		lx.lineStarting = false
		lx.pos = tagStart
		var err error
		switch kind {
		case '#':
			err = lx.lexComment()
		case '%':
			lx.emit(tBlockBegin, "")
			err = lx.lexTag(true)
		case '{':
			lx.emit(tVarBegin, "")
			err = lx.lexTag(false)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (lx *lexer) emitData(text string) {
	if text != "" {
		lx.emit(tData, text)
		lx.line += strings.Count(text, "\n")
	}
}

// matchRawBegin matches `{%[-+]?\s*raw\s*(-%}\s*|%})` at at and returns the
// end offset, or -1.
func (lx *lexer) matchRawBegin(at int) int {
	s := lx.src
	p := at + 2
	if p < len(s) && (s[p] == '-' || s[p] == '+') {
		p++
	}
	p = skipSpace(s, p)
	if !strings.HasPrefix(s[p:], "raw") {
		return -1
	}
	p = skipSpace(s, p+3)
	if strings.HasPrefix(s[p:], "-%}") {
		return skipSpace(s, p+3)
	}
	if strings.HasPrefix(s[p:], "%}") {
		return p + 2
	}
	return -1
}

// lexRaw reads raw data up to `{%[-+]?\s*endraw\s*(+%}|-%}\s*|%}\n?)`.
func (lx *lexer) lexRaw() error {
	s := lx.src
	for i := lx.pos; ; {
		j := strings.Index(s[i:], "{%")
		if j < 0 {
			return lx.fail("Missing end of raw directive")
		}
		at := i + j
		p := at + 2
		sign := byte(0)
		if p < len(s) && (s[p] == '-' || s[p] == '+') {
			sign = s[p]
			p++
		}
		p = skipSpace(s, p)
		if !strings.HasPrefix(s[p:], "endraw") {
			i = at + 1
			continue
		}
		p = skipSpace(s, p+6)
		end := -1
		switch {
		case strings.HasPrefix(s[p:], "+%}"):
			end = p + 3
		case strings.HasPrefix(s[p:], "-%}"):
			end = skipSpace(s, p+3)
		case strings.HasPrefix(s[p:], "%}"):
			end = p + 2
			if end < len(s) && s[end] == '\n' {
				end++
			}
		}
		if end < 0 {
			i = at + 1
			continue
		}
		text := s[lx.pos:at]
		if sign == '-' {
			text = pyRStrip(text)
		} else if sign != '+' {
			lpos := strings.LastIndexByte(text, '\n') + 1
			if lpos > 0 || lx.lineStarting {
				if rest := text[lpos:]; rest != "" && isAllSpace(rest) {
					text = text[:lpos]
				}
			}
		}
		lx.emitData(text)
		lx.line += strings.Count(s[lx.pos:end], "\n") - strings.Count(text, "\n")
		lx.lineStarting = s[end-1] == '\n'
		lx.pos = end
		return nil
	}
}

// lexComment skips a comment up to `+#}`, `-#}\s*` or `#}\n?`.
func (lx *lexer) lexComment() error {
	s := lx.src
	for p := lx.pos; p < len(s); p++ {
		end := -1
		switch {
		case strings.HasPrefix(s[p:], "+#}"):
			end = p + 3
		case strings.HasPrefix(s[p:], "-#}"):
			end = skipSpace(s, p+3)
		case strings.HasPrefix(s[p:], "#}"):
			end = p + 2
			if end < len(s) && s[end] == '\n' {
				end++
			}
		}
		if end >= 0 {
			lx.line += strings.Count(s[lx.pos:end], "\n")
			lx.lineStarting = s[end-1] == '\n'
			lx.pos = end
			return nil
		}
	}
	return lx.fail("Missing end of comment tag")
}

// lexTag tokenizes the inside of {% %} (block) or {{ }} up to its end.
func (lx *lexer) lexTag(block bool) error {
	s := lx.src
	for {
		if lx.pos >= len(s) {
			if block {
				return lx.fail("unexpected end of template, expected 'end of statement block'.")
			}
			return lx.fail("unexpected end of template, expected 'end of print statement'.")
		}
		// End of tag, only when brackets are balanced.
		if len(lx.balance) == 0 {
			if end, ok := lx.matchTagEnd(block); ok {
				lx.line += strings.Count(s[lx.pos:end], "\n")
				if block {
					lx.emit(tBlockEnd, "")
				} else {
					lx.emit(tVarEnd, "")
				}
				lx.lineStarting = s[end-1] == '\n'
				lx.pos = end
				return nil
			}
		}
		r, size := utf8.DecodeRuneInString(s[lx.pos:])
		switch {
		case pyIsSpace(r):
			start := lx.pos
			for lx.pos < len(s) {
				r, size := utf8.DecodeRuneInString(s[lx.pos:])
				if !pyIsSpace(r) {
					break
				}
				lx.pos += size
			}
			lx.line += strings.Count(s[start:lx.pos], "\n")
			continue
		case r >= '0' && r <= '9':
			if err := lx.lexNumber(); err != nil {
				return err
			}
			continue
		case r == '_' || unicode.IsLetter(r) || unicode.Is(unicode.Nl, r):
			start := lx.pos
			lx.pos += size
			for lx.pos < len(s) {
				r, size := utf8.DecodeRuneInString(s[lx.pos:])
				if !isIdentCont(r) {
					break
				}
				lx.pos += size
			}
			lx.emit(tName, s[start:lx.pos])
			continue
		case r == '\'' || r == '"':
			if err := lx.lexString(byte(r)); err != nil {
				return err
			}
			continue
		}
		if err := lx.lexOperator(); err != nil {
			return err
		}
	}
}

func isIdentCont(r rune) bool {
	return r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) ||
		unicode.In(r, unicode.Mn, unicode.Mc, unicode.Nl, unicode.Pc)
}

func (lx *lexer) matchTagEnd(block bool) (int, bool) {
	s := lx.src[lx.pos:]
	if block {
		switch {
		case strings.HasPrefix(s, "+%}"):
			return lx.pos + 3, true
		case strings.HasPrefix(s, "-%}"):
			return skipSpace(lx.src, lx.pos+3), true
		case strings.HasPrefix(s, "%}"):
			end := lx.pos + 2
			if end < len(lx.src) && lx.src[end] == '\n' {
				end++
			}
			return end, true
		}
		return 0, false
	}
	switch {
	case strings.HasPrefix(s, "-}}"):
		return skipSpace(lx.src, lx.pos+3), true
	case strings.HasPrefix(s, "}}"):
		return lx.pos + 2, true
	}
	return 0, false
}

var operators3 = []string{"//", "**", "==", "!=", ">=", "<="}

func (lx *lexer) lexOperator() error {
	s := lx.src[lx.pos:]
	op := ""
	for _, o := range operators3 {
		if strings.HasPrefix(s, o) {
			op = o
			break
		}
	}
	if op == "" {
		if strings.IndexByte("+-/*%~[](){}><=.:|,;", s[0]) >= 0 {
			op = s[:1]
		} else {
			r, _ := utf8.DecodeRuneInString(s)
			return lx.fail("unexpected char " + pyRepr(String(string(r))) + " at " + strconv.Itoa(utf8.RuneCountInString(lx.src[:lx.pos])))
		}
	}
	switch op {
	case "{":
		lx.balance = append(lx.balance, '}')
	case "(":
		lx.balance = append(lx.balance, ')')
	case "[":
		lx.balance = append(lx.balance, ']')
	case "}", ")", "]":
		if len(lx.balance) == 0 {
			return lx.fail("unexpected '" + op + "'")
		}
		want := lx.balance[len(lx.balance)-1]
		lx.balance = lx.balance[:len(lx.balance)-1]
		if want != op[0] {
			return lx.fail("unexpected '" + op + "', expected '" + string(want) + "'")
		}
	}
	lx.pos += len(op)
	lx.emit(tOp, op)
	return nil
}

// lexNumber follows jinja's float_re then integer_re (ASCII digits only).
func (lx *lexer) lexNumber() error {
	s := lx.src
	start := lx.pos
	if end, ok := matchFloat(s, start); ok {
		text := strings.ReplaceAll(s[start:end], "_", "")
		lx.pos = end
		lx.toks = append(lx.toks, token{kind: tFloat, num: Float(parseFloatPy(text)), line: lx.line})
		return nil
	}
	end, base := matchInt(s, start)
	if end <= start {
		return lx.fail("unexpected char " + pyRepr(String(s[start:start+1])) + " at " + strconv.Itoa(utf8.RuneCountInString(s[:start])))
	}
	text := strings.ReplaceAll(s[start:end], "_", "")
	if base != 10 {
		text = text[2:]
	}
	b, ok := new(big.Int).SetString(text, base)
	if !ok {
		return lx.fail("invalid integer literal")
	}
	lx.pos = end
	lx.toks = append(lx.toks, token{kind: tInt, num: BigInt(b), line: lx.line})
	return nil
}

// digitsUnderscore matches (\d+_)*\d+ at p and returns the end, or p.
func digitsUnderscore(s string, p int) int {
	end := p
	i := p
	for {
		j := i
		for j < len(s) && isDigit(s[j]) {
			j++
		}
		if j == i {
			return end
		}
		end = j
		if j < len(s) && s[j] == '_' {
			i = j + 1
			continue
		}
		return end
	}
}

func matchFloat(s string, p int) (int, bool) {
	if p > 0 && s[p-1] == '.' {
		return 0, false
	}
	q := digitsUnderscore(s, p)
	if q == p {
		return 0, false
	}
	// fraction
	frac := q
	if q < len(s) && s[q] == '.' {
		if f := digitsUnderscore(s, q+1); f > q+1 {
			frac = f
		}
	}
	// exponent
	if frac < len(s) && (s[frac] == 'e' || s[frac] == 'E') {
		e := frac + 1
		if e < len(s) && (s[e] == '+' || s[e] == '-') {
			e++
		}
		if x := digitsUnderscore(s, e); x > e {
			return x, true
		}
	}
	if frac > q {
		return frac, true
	}
	return 0, false
}

func matchInt(s string, p int) (int, int) {
	if p+1 < len(s) && s[p] == '0' {
		var base int
		var ok func(byte) bool
		switch s[p+1] {
		case 'b', 'B':
			base, ok = 2, func(c byte) bool { return c == '0' || c == '1' }
		case 'o', 'O':
			base, ok = 8, func(c byte) bool { return c >= '0' && c <= '7' }
		case 'x', 'X':
			base, ok = 16, func(c byte) bool {
				return isDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
			}
		}
		if base != 0 {
			// (_?[digit])+
			i := p + 2
			end := -1
			for {
				j := i
				if j < len(s) && s[j] == '_' {
					j++
				}
				if j < len(s) && ok(s[j]) {
					i = j + 1
					end = i
					continue
				}
				break
			}
			if end > 0 {
				return end, base
			}
		}
	}
	if s[p] == '0' {
		// 0(_?0)*
		i := p + 1
		for {
			j := i
			if j < len(s) && s[j] == '_' {
				j++
			}
			if j < len(s) && s[j] == '0' {
				i = j + 1
				continue
			}
			return i, 10
		}
	}
	// [1-9](_?\d)*
	i := p + 1
	for {
		j := i
		if j < len(s) && s[j] == '_' {
			j++
		}
		if j < len(s) && isDigit(s[j]) {
			i = j + 1
			continue
		}
		return i, 10
	}
}

// lexString reads a quoted literal and decodes it like jinja does
// (Python's unicode-escape after backslashreplace).
func (lx *lexer) lexString(q byte) error {
	s := lx.src
	i := lx.pos + 1
	for i < len(s) {
		c := s[i]
		if c == '\\' {
			i += 2
			continue
		}
		if c == q {
			raw := s[lx.pos+1 : i]
			val, err := unescapePy(raw)
			if err != nil {
				return lx.fail(err.Error())
			}
			lx.toks = append(lx.toks, token{kind: tString, val: val, line: lx.line})
			lx.line += strings.Count(raw, "\n")
			lx.pos = i + 1
			return nil
		}
		i++
	}
	return lx.fail("unexpected char " + pyRepr(String(string(q))) + " at " + strconv.Itoa(utf8.RuneCountInString(s[:lx.pos])))
}

type escapeError string

func (e escapeError) Error() string { return string(e) }

func unescapePy(raw string) (string, error) {
	if strings.IndexByte(raw, '\\') < 0 {
		return raw, nil
	}
	var sb strings.Builder
	for i := 0; i < len(raw); {
		c := raw[i]
		if c != '\\' {
			sb.WriteByte(c)
			i++
			continue
		}
		if i+1 >= len(raw) {
			return "", escapeError("\\ at end of string")
		}
		e := raw[i+1]
		i += 2
		switch e {
		case '\n':
		case '\\', '\'', '"':
			sb.WriteByte(e)
		case 'a':
			sb.WriteByte(7)
		case 'b':
			sb.WriteByte(8)
		case 'f':
			sb.WriteByte(12)
		case 'n':
			sb.WriteByte('\n')
		case 'r':
			sb.WriteByte('\r')
		case 't':
			sb.WriteByte('\t')
		case 'v':
			sb.WriteByte(11)
		case '0', '1', '2', '3', '4', '5', '6', '7':
			v := int(e - '0')
			for n := 0; n < 2 && i < len(raw) && raw[i] >= '0' && raw[i] <= '7'; n++ {
				v = v*8 + int(raw[i]-'0')
				i++
			}
			sb.WriteRune(rune(v))
		case 'x', 'u', 'U':
			n := map[byte]int{'x': 2, 'u': 4, 'U': 8}[e]
			if i+n > len(raw) {
				return "", escapeError("truncated \\" + string(e) + strings.Repeat("X", n) + " escape")
			}
			v, err := strconv.ParseUint(raw[i:i+n], 16, 32)
			if err != nil || strings.ContainsAny(raw[i:i+n], "+-_") {
				return "", escapeError("truncated \\" + string(e) + strings.Repeat("X", n) + " escape")
			}
			if v > unicode.MaxRune {
				return "", escapeError("illegal Unicode character")
			}
			r := rune(v)
			if r >= 0xd800 && r <= 0xdfff {
				r = utf8.RuneError
			}
			sb.WriteRune(r)
			i += n
		case 'N':
			return "", escapeError("unknown Unicode character name")
		default:
			if e >= 0x80 {
				// A backslash before a non-ASCII character: jinja first
				// backslash-escapes the character, so the result is the
				// backslash followed by that escape's text.
				r, size := utf8.DecodeRuneInString(raw[i-1:])
				sb.WriteByte('\\')
				switch {
				case r <= 0xff:
					writeHexEscape(&sb, 'x', uint32(r), 2)
				case r <= 0xffff:
					writeHexEscape(&sb, 'u', uint32(r), 4)
				default:
					writeHexEscape(&sb, 'U', uint32(r), 8)
				}
				i += size - 1
				continue
			}
			sb.WriteByte('\\')
			sb.WriteByte(e)
		}
	}
	return sb.String(), nil
}

func skipSpace(s string, p int) int {
	for p < len(s) {
		r, size := utf8.DecodeRuneInString(s[p:])
		if !pyIsSpace(r) {
			return p
		}
		p += size
	}
	return p
}

func isAllSpace(s string) bool {
	for _, r := range s {
		if !pyIsSpace(r) {
			return false
		}
	}
	return true
}

func pyRStrip(s string) string {
	return strings.TrimRightFunc(s, pyIsSpace)
}
