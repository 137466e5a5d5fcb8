package jinja

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"sort"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// DecodeJSON parses one JSON document into a Value the way Python's
// json.loads does: objects become dicts that keep key order (a repeated key
// keeps its first position and its last value), integers stay ints of any
// size, numbers with a fraction or exponent become floats, and the
// non-standard NaN, Infinity and -Infinity are accepted. Invalid UTF-8 and
// lone surrogate escapes become U+FFFD, since Go strings cannot hold
// surrogates.
func DecodeJSON(data []byte) (Value, error) {
	d := jsonDecoder{data: data}
	d.skipWS()
	v, err := d.value(0)
	if err != nil {
		return Value{}, err
	}
	d.skipWS()
	if d.pos != len(d.data) {
		return Value{}, d.errorf("extra data")
	}
	return v, nil
}

const maxJSONDepth = 1000

type jsonDecoder struct {
	data []byte
	pos  int
	sb   strings.Builder
}

func (d *jsonDecoder) errorf(format string, args ...any) error {
	return fmt.Errorf("json: %s at offset %d", fmt.Sprintf(format, args...), d.pos)
}

func (d *jsonDecoder) skipWS() {
	for d.pos < len(d.data) {
		switch d.data[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return
		}
	}
}

func (d *jsonDecoder) value(depth int) (Value, error) {
	if depth > maxJSONDepth {
		return Value{}, d.errorf("nesting too deep")
	}
	if d.pos >= len(d.data) {
		return Value{}, d.errorf("unexpected end of input")
	}
	switch c := d.data[d.pos]; {
	case c == '{':
		return d.object(depth)
	case c == '[':
		return d.array(depth)
	case c == '"':
		s, err := d.str()
		if err != nil {
			return Value{}, err
		}
		return String(s), nil
	case c == '-' || (c >= '0' && c <= '9'):
		if d.hasPrefix("-Infinity") {
			d.pos += len("-Infinity")
			return Float(math.Inf(-1)), nil
		}
		return d.number()
	case d.hasPrefix("true"):
		d.pos += 4
		return Bool(true), nil
	case d.hasPrefix("false"):
		d.pos += 5
		return Bool(false), nil
	case d.hasPrefix("null"):
		d.pos += 4
		return None(), nil
	case d.hasPrefix("NaN"):
		d.pos += 3
		return Float(math.NaN()), nil
	case d.hasPrefix("Infinity"):
		d.pos += 8
		return Float(math.Inf(1)), nil
	}
	return Value{}, d.errorf("unexpected character %q", d.data[d.pos])
}

func (d *jsonDecoder) hasPrefix(p string) bool {
	return len(d.data)-d.pos >= len(p) && string(d.data[d.pos:d.pos+len(p)]) == p
}

func (d *jsonDecoder) object(depth int) (Value, error) {
	d.pos++ // {
	dict := NewDict()
	d.skipWS()
	if d.pos < len(d.data) && d.data[d.pos] == '}' {
		d.pos++
		return DictValue(dict), nil
	}
	for {
		d.skipWS()
		if d.pos >= len(d.data) || d.data[d.pos] != '"' {
			return Value{}, d.errorf("expecting property name enclosed in double quotes")
		}
		k, err := d.str()
		if err != nil {
			return Value{}, err
		}
		d.skipWS()
		if d.pos >= len(d.data) || d.data[d.pos] != ':' {
			return Value{}, d.errorf("expecting ':' delimiter")
		}
		d.pos++
		d.skipWS()
		v, err := d.value(depth + 1)
		if err != nil {
			return Value{}, err
		}
		dict.SetStr(k, v)
		d.skipWS()
		if d.pos >= len(d.data) {
			return Value{}, d.errorf("unexpected end of input in object")
		}
		switch d.data[d.pos] {
		case ',':
			d.pos++
		case '}':
			d.pos++
			return DictValue(dict), nil
		default:
			return Value{}, d.errorf("expecting ',' delimiter")
		}
	}
}

func (d *jsonDecoder) array(depth int) (Value, error) {
	d.pos++ // [
	var items []Value
	d.skipWS()
	if d.pos < len(d.data) && d.data[d.pos] == ']' {
		d.pos++
		return NewList(items), nil
	}
	for {
		d.skipWS()
		v, err := d.value(depth + 1)
		if err != nil {
			return Value{}, err
		}
		items = append(items, v)
		d.skipWS()
		if d.pos >= len(d.data) {
			return Value{}, d.errorf("unexpected end of input in array")
		}
		switch d.data[d.pos] {
		case ',':
			d.pos++
		case ']':
			d.pos++
			return NewList(items), nil
		default:
			return Value{}, d.errorf("expecting ',' delimiter")
		}
	}
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func (d *jsonDecoder) number() (Value, error) {
	start := d.pos
	if d.data[d.pos] == '-' {
		d.pos++
	}
	if d.pos >= len(d.data) || !isDigit(d.data[d.pos]) {
		return Value{}, d.errorf("invalid number")
	}
	if d.data[d.pos] == '0' {
		d.pos++
	} else {
		for d.pos < len(d.data) && isDigit(d.data[d.pos]) {
			d.pos++
		}
	}
	isFloat := false
	if d.pos+1 < len(d.data) && d.data[d.pos] == '.' && isDigit(d.data[d.pos+1]) {
		isFloat = true
		d.pos++
		for d.pos < len(d.data) && isDigit(d.data[d.pos]) {
			d.pos++
		}
	}
	if d.pos < len(d.data) && (d.data[d.pos] == 'e' || d.data[d.pos] == 'E') {
		p := d.pos + 1
		if p < len(d.data) && (d.data[p] == '+' || d.data[p] == '-') {
			p++
		}
		if p < len(d.data) && isDigit(d.data[p]) {
			isFloat = true
			for p < len(d.data) && isDigit(d.data[p]) {
				p++
			}
			d.pos = p
		}
	}
	text := string(d.data[start:d.pos])
	if isFloat {
		return Float(parseFloatPy(text)), nil
	}
	if i, err := strconv.ParseInt(text, 10, 64); err == nil {
		return Int(i), nil
	}
	b, ok := new(big.Int).SetString(text, 10)
	if !ok {
		return Value{}, d.errorf("invalid number")
	}
	return BigInt(b), nil
}

// parseFloatPy converts a well-formed decimal literal like Python's
// float(): out-of-range values become ±inf or ±0 instead of failing.
func parseFloatPy(text string) float64 {
	f, err := strconv.ParseFloat(text, 64)
	if err != nil {
		var ne *strconv.NumError
		if errors.As(err, &ne) && ne.Err == strconv.ErrRange {
			return f
		}
	}
	return f
}

func (d *jsonDecoder) str() (string, error) {
	d.pos++ // opening quote
	start := d.pos
	// Fast path: no escapes, valid UTF-8.
	for d.pos < len(d.data) {
		c := d.data[d.pos]
		if c == '"' {
			s := d.data[start:d.pos]
			d.pos++
			if utf8.Valid(s) {
				return string(s), nil
			}
			return strings.ToValidUTF8(string(s), "\uFFFD"), nil
		}
		if c == '\\' {
			break
		}
		if c < 0x20 {
			return "", d.errorf("invalid control character in string")
		}
		d.pos++
	}
	d.sb.Reset()
	d.sb.Write(d.data[start:d.pos])
	for d.pos < len(d.data) {
		c := d.data[d.pos]
		switch {
		case c == '"':
			d.pos++
			s := d.sb.String()
			if !utf8.ValidString(s) {
				s = strings.ToValidUTF8(s, "\uFFFD")
			}
			return s, nil
		case c < 0x20:
			return "", d.errorf("invalid control character in string")
		case c != '\\':
			d.sb.WriteByte(c)
			d.pos++
			continue
		}
		d.pos++
		if d.pos >= len(d.data) {
			break
		}
		e := d.data[d.pos]
		d.pos++
		switch e {
		case '"', '\\', '/':
			d.sb.WriteByte(e)
		case 'b':
			d.sb.WriteByte('\b')
		case 'f':
			d.sb.WriteByte('\f')
		case 'n':
			d.sb.WriteByte('\n')
		case 'r':
			d.sb.WriteByte('\r')
		case 't':
			d.sb.WriteByte('\t')
		case 'u':
			r, ok := d.hex4()
			if !ok {
				return "", d.errorf("invalid \\uXXXX escape")
			}
			if utf16.IsSurrogate(r) {
				if r < 0xdc00 && d.hasPrefix(`\u`) {
					save := d.pos
					d.pos += 2
					r2, ok2 := d.hex4()
					if ok2 && r2 >= 0xdc00 && r2 <= 0xdfff {
						d.sb.WriteRune(utf16.DecodeRune(r, r2))
						continue
					}
					d.pos = save
				}
				r = utf8.RuneError
			}
			d.sb.WriteRune(r)
		default:
			return "", d.errorf("invalid escape")
		}
	}
	return "", d.errorf("unterminated string")
}

func (d *jsonDecoder) hex4() (rune, bool) {
	if len(d.data)-d.pos < 4 {
		return 0, false
	}
	var r rune
	for i := 0; i < 4; i++ {
		c := d.data[d.pos+i]
		var x byte
		switch {
		case c >= '0' && c <= '9':
			x = c - '0'
		case c >= 'a' && c <= 'f':
			x = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			x = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(x)
	}
	d.pos += 4
	return r, true
}

// JSONOptions are the json.dumps arguments the tojson filter accepts.
type JSONOptions struct {
	Indent       *string // nil: single line; else the per-level indent string
	ItemSep      string
	KeySep       string
	SortKeys     bool
	EnsureASCII  bool
	separatorSet bool
}

// DumpJSON is Python's json.dumps(v, ensure_ascii=..., indent=...,
// separators=..., sort_keys=...) with allow_nan. With no separators given,
// they are ", " and ": " (or "," and ": " when indenting).
func DumpJSON(v Value, o JSONOptions) (string, error) {
	if !o.separatorSet {
		o.ItemSep, o.KeySep = ", ", ": "
		if o.Indent != nil {
			o.ItemSep = ","
		}
	}
	var sb strings.Builder
	if err := dumpJSON(&sb, v, &o, 0); err != nil {
		return "", err
	}
	return sb.String(), nil
}

func dumpJSON(sb *strings.Builder, v Value, o *JSONOptions, level int) error {
	if level > maxReprDepth {
		return valueErrorf("Circular reference detected")
	}
	switch v.kind {
	case KindNone:
		sb.WriteString("null")
	case KindBool:
		if v.n != 0 {
			sb.WriteString("true")
		} else {
			sb.WriteString("false")
		}
	case KindInt:
		sb.WriteString(formatInt(v))
	case KindFloat:
		sb.WriteString(jsonFloat(v.f))
	case KindString:
		writeJSONString(sb, v.s, o.EnsureASCII)
	case KindList:
		l := v.list()
		if l.kind != listPlain && l.kind != listTuple {
			return typeErrorf("Object of type %s is not JSON serializable", pyTypeName(v))
		}
		if len(l.Items) == 0 {
			sb.WriteString("[]")
			return nil
		}
		sb.WriteByte('[')
		for i, it := range l.Items {
			if i > 0 {
				sb.WriteString(o.ItemSep)
			}
			jsonNewline(sb, o, level+1)
			if err := dumpJSON(sb, it, o, level+1); err != nil {
				return err
			}
			if err := checkLen(sb); err != nil {
				return err
			}
		}
		jsonNewline(sb, o, level)
		sb.WriteByte(']')
	case KindDict:
		d := v.dict()
		if d.Len() == 0 {
			sb.WriteString("{}")
			return nil
		}
		order := make([]int, d.Len())
		for i := range order {
			order[i] = i
		}
		if o.SortKeys {
			var serr error
			sort.SliceStable(order, func(a, b int) bool {
				lt, err := pyLess(d.keys[order[a]], d.keys[order[b]])
				if err != nil && serr == nil {
					serr = err
				}
				return lt
			})
			if serr != nil {
				return serr
			}
		}
		sb.WriteByte('{')
		for n, i := range order {
			k := d.keys[i]
			var ks string
			switch k.kind {
			case KindString:
				ks = k.s
			case KindFloat:
				ks = jsonFloat(k.f)
			case KindInt:
				ks = formatInt(k)
			case KindBool:
				ks = "false"
				if k.n != 0 {
					ks = "true"
				}
			case KindNone:
				ks = "null"
			default:
				return typeErrorf("keys must be str, int, float, bool or None, not %s", pyTypeName(k))
			}
			if n > 0 {
				sb.WriteString(o.ItemSep)
			}
			jsonNewline(sb, o, level+1)
			writeJSONString(sb, ks, o.EnsureASCII)
			sb.WriteString(o.KeySep)
			if err := dumpJSON(sb, d.vals[i], o, level+1); err != nil {
				return err
			}
			if err := checkLen(sb); err != nil {
				return err
			}
		}
		jsonNewline(sb, o, level)
		sb.WriteByte('}')
	default:
		return typeErrorf("Object of type %s is not JSON serializable", pyTypeName(v))
	}
	return nil
}

func jsonNewline(sb *strings.Builder, o *JSONOptions, level int) {
	if o.Indent == nil {
		return
	}
	sb.WriteByte('\n')
	for i := 0; i < level; i++ {
		sb.WriteString(*o.Indent)
	}
}

func jsonFloat(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	return formatFloat(f)
}

// writeJSONString escapes like Python's json encoder: \" \\ \n \r \t \b \f,
// other control characters as \u00XX; with ensureASCII everything outside
// printable ASCII as \uXXXX (surrogate pairs above the BMP).
func writeJSONString(sb *strings.Builder, s string, ensureASCII bool) {
	sb.WriteByte('"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && (c < 0x7f || (c == 0x7f && !ensureASCII)) {
			i++
			continue
		}
		if c >= 0x7f {
			if !ensureASCII {
				i++
				continue
			}
			sb.WriteString(s[start:i])
			r, size := utf8.DecodeRuneInString(s[i:])
			if c == 0x7f {
				r, size = 0x7f, 1
			}
			if r > 0xffff {
				r1, r2 := utf16.EncodeRune(r)
				writeHexEscape(sb, 'u', uint32(r1), 4)
				writeHexEscape(sb, 'u', uint32(r2), 4)
			} else {
				writeHexEscape(sb, 'u', uint32(r), 4)
			}
			i += size
			start = i
			continue
		}
		sb.WriteString(s[start:i])
		switch c {
		case '"':
			sb.WriteString(`\"`)
		case '\\':
			sb.WriteString(`\\`)
		case '\n':
			sb.WriteString(`\n`)
		case '\r':
			sb.WriteString(`\r`)
		case '\t':
			sb.WriteString(`\t`)
		case '\b':
			sb.WriteString(`\b`)
		case '\f':
			sb.WriteString(`\f`)
		default:
			writeHexEscape(sb, 'u', uint32(c), 4)
		}
		i++
		start = i
	}
	sb.WriteString(s[start:])
	sb.WriteByte('"')
}
